#!/usr/bin/env bash
# lr-icmp.sh — ICMP errors from routers: TTL exceeded (IPv4 and IPv6),
# destination unreachable (no route), TCP reset and port unreachable for
# router addresses, and packet too big on a gateway port with
# gateway_mtu.
# chassis: hv1 hv2 hv3
set -euo pipefail
n=ovn-nbctl
$n ls-add ia -- ls-add ib
$n lsp-add ia i1 -- lsp-set-addresses i1 "0a:00:00:00:70:01 10.70.1.11 fd70:1::11"
$n lsp-add ia i2 -- lsp-set-addresses i2 "0a:00:00:00:70:02 10.70.1.12"
$n lsp-add ib j1 -- lsp-set-addresses j1 "0a:00:00:00:71:01 10.70.2.11 fd70:2::11"
$n lsp-add ib ln-ib -- lsp-set-type ln-ib localnet -- lsp-set-addresses ln-ib unknown -- lsp-set-options ln-ib network_name=phys
$n lr-add ir
$n lrp-add ir ir-ia 00:00:00:00:70:ff 10.70.1.1/24 fd70:1::1/64 -- lsp-add ia ia-ir -- lsp-set-type ia-ir router \
   -- lsp-set-addresses ia-ir router -- lsp-set-options ia-ir router-port=ir-ia
$n lrp-add ir ir-ib 00:00:00:00:71:ff 10.70.2.1/24 fd70:2::1/64 -- lsp-add ib ib-ir -- lsp-set-type ib-ir router \
   -- lsp-set-addresses ib-ir router -- lsp-set-options ib-ir router-port=ir-ib
$n lrp-set-gateway-chassis ir-ib hv1 10
$n set Logical_Router_Port ir-ib options:gateway_mtu=1300
$n lr-route-add ir 10.70.50.0/24 10.70.2.11
