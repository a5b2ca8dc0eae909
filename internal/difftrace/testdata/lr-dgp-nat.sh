#!/usr/bin/env bash
# lr-dgp-nat.sh — NAT on a distributed gateway port with two gateway
# chassis: SNAT, DNAT, centralized dnat_and_snat and distributed
# dnat_and_snat (logical_port, external_mac), gateway_mtu.
# chassis: hv1 hv2 hv3
set -euo pipefail
n=ovn-nbctl
$n ls-add priv -- ls-add pub
$n lsp-add priv w1 -- lsp-set-addresses w1 "0a:00:00:00:40:01 10.40.1.11 fd40:1::11"
$n lsp-add priv w2 -- lsp-set-addresses w2 "0a:00:00:00:40:02 10.40.1.12"
$n lsp-add priv w3 -- lsp-set-addresses w3 "0a:00:00:00:40:03 10.40.1.13"
$n lsp-add pub ln-pub -- lsp-set-type ln-pub localnet -- lsp-set-addresses ln-pub unknown -- lsp-set-options ln-pub network_name=phys
$n lsp-add pub peer -- lsp-set-addresses peer "0a:00:00:00:41:01 172.40.0.50 fd40::50"
$n lr-add dg
$n lrp-add dg dg-priv 00:00:00:00:40:ff 10.40.1.1/24 fd40:1::1/64 -- lsp-add priv priv-dg -- lsp-set-type priv-dg router \
   -- lsp-set-addresses priv-dg router -- lsp-set-options priv-dg router-port=dg-priv
$n lrp-add dg dg-pub 00:00:00:00:41:ff 172.40.0.1/24 fd40::1/64 -- lsp-add pub pub-dg -- lsp-set-type pub-dg router \
   -- lsp-set-addresses pub-dg router -- lsp-set-options pub-dg router-port=dg-pub nat-addresses=router
$n lrp-set-gateway-chassis dg-pub hv1 20 -- lrp-set-gateway-chassis dg-pub hv2 10
$n set Logical_Router_Port dg-pub options:gateway_mtu=1400
$n lr-route-add dg 0.0.0.0/0 172.40.0.254
$n lr-nat-add dg snat 172.40.0.1 10.40.1.0/24
$n lr-nat-add dg dnat 172.40.0.10 10.40.1.12
$n lr-nat-add dg dnat_and_snat 172.40.0.11 10.40.1.13
$n lr-nat-add dg dnat_and_snat 172.40.0.12 10.40.1.11 w1 30:54:00:00:40:01
$n lr-nat-add dg snat fd40::1 fd40:1::/64
