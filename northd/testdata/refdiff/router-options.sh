#!/usr/bin/env bash
# Router options and the rarer stages: gateway_mtu on a gateway port,
# ECMP routes with ecmp_symmetric_reply, a BFD-checked route, a static MAC
# binding, dynamic_neigh_routers and always_learn_from_arp_request, and two
# routers joined directly through peer router ports.
set -euo pipefail
n=ovn-nbctl
$n ls-add s1 -- ls-add pub
$n lsp-add s1 v1 -- lsp-set-addresses v1 "50:54:00:00:11:01 10.11.0.11"
$n lsp-add pub pln -- lsp-set-type pln localnet -- lsp-set-addresses pln unknown -- lsp-set-options pln network_name=phys
$n lr-add r1 -- set Logical_Router r1 options:dynamic_neigh_routers=true options:always_learn_from_arp_request=false
$n lrp-add r1 r1-s1 00:00:00:11:00:01 10.11.0.1/24
$n lrp-add r1 r1-pub 00:00:00:11:00:02 172.20.0.1/24 -- set Logical_Router_Port r1-pub options:gateway_mtu=1400
$n lrp-set-gateway-chassis r1-pub hv1 10
$n lsp-add s1 s1-r1 -- lsp-set-type s1-r1 router -- lsp-set-addresses s1-r1 router -- lsp-set-options s1-r1 router-port=r1-s1
$n lsp-add pub pub-r1 -- lsp-set-type pub-r1 router -- lsp-set-addresses pub-r1 router -- lsp-set-options pub-r1 router-port=r1-pub
$n --ecmp-symmetric-reply lr-route-add r1 0.0.0.0/0 172.20.0.254
$n --ecmp-symmetric-reply lr-route-add r1 0.0.0.0/0 172.20.0.253
$n --bfd lr-route-add r1 192.168.50.0/24 172.20.0.252 r1-pub
$n static-mac-binding-add r1-pub 172.20.0.99 0a:00:00:00:00:99
$n lr-add r2 -- set Logical_Router r2 options:chassis=hv2
$n lrp-add r2 r2-r3 00:00:00:12:00:01 100.64.0.1/30 peer=r3-r2
$n lr-add r3
$n lrp-add r3 r3-r2 00:00:00:13:00:01 100.64.0.2/30 peer=r2-r3
$n lr-route-add r3 0.0.0.0/0 100.64.0.1
# A second router on the localnet switch learns r1 dynamically; a gateway
# router with symmetric-reply ECMP routes; multicast relay.
$n lr-add r4 -- set Logical_Router r4 options:chassis=hv3 options:mcast_relay=true
$n lrp-add r4 r4-pub 00:00:00:14:00:01 172.20.0.4/24 -- set Logical_Router_Port r4-pub options:requested-tnl-key=7
$n lrp-add r4 r4-s4 00:00:00:14:00:02 10.14.0.1/24
$n ls-add s4 -- set Logical_Switch s4 other_config:mcast_snoop=true
$n lsp-add s4 s4-r4 -- lsp-set-type s4-r4 router -- lsp-set-addresses s4-r4 router -- lsp-set-options s4-r4 router-port=r4-s4
$n lsp-add pub pub-r4 -- lsp-set-type pub-r4 router -- lsp-set-addresses pub-r4 router -- lsp-set-options pub-r4 router-port=r4-pub
$n --ecmp-symmetric-reply lr-route-add r4 0.0.0.0/0 172.20.0.254
$n --ecmp-symmetric-reply lr-route-add r4 0.0.0.0/0 172.20.0.253
