#!/usr/bin/env bash
# The switch side of router ports: a distributed router with a gateway port
# and NAT, a gateway router, IPv6 addresses, a router port with
# nat-addresses, and an unconnected router port.
set -euo pipefail
n=ovn-nbctl
$n ls-add sw0 -- ls-add public
$n lsp-add sw0 p1 -- lsp-set-addresses p1 "50:54:00:00:00:01 10.0.0.11 fd00::11"
$n lsp-add public ln -- lsp-set-type ln localnet -- lsp-set-addresses ln unknown -- lsp-set-options ln network_name=phys
$n lr-add lr0
$n lrp-add lr0 lr0-sw0 00:00:00:00:ff:01 10.0.0.1/24 fd00::1/64 -- lsp-add sw0 sw0-lr0 -- lsp-set-type sw0-lr0 router \
   -- lsp-set-addresses sw0-lr0 router -- lsp-set-options sw0-lr0 router-port=lr0-sw0
$n lrp-add lr0 lr0-public 00:00:20:20:12:13 172.168.0.100/24 -- lsp-add public public-lr0 -- lsp-set-type public-lr0 router \
   -- lsp-set-addresses public-lr0 router -- lsp-set-options public-lr0 router-port=lr0-public nat-addresses=router
$n lrp-set-gateway-chassis lr0-public hv1 20
$n lr-nat-add lr0 snat 172.168.0.100 10.0.0.0/24
$n lr-nat-add lr0 dnat_and_snat 172.168.0.110 10.0.0.11 p1 30:54:00:00:00:03
$n lr-add gr0 -- set Logical_Router gr0 options:chassis=hv3
$n lrp-add gr0 gr0-public 00:00:20:20:12:20 172.168.0.200/24
$n lsp-add public public-gr0 -- lsp-set-type public-gr0 router -- lsp-set-addresses public-gr0 "00:00:20:20:12:20 172.168.0.200" \
   -- lsp-set-options public-gr0 router-port=gr0-public
$n lsp-add sw0 dangling -- lsp-set-type dangling router -- lsp-set-addresses dangling router -- lsp-set-options dangling router-port=nope
