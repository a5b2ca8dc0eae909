#!/usr/bin/env bash
# Two routers joined by a switch: connected, static (dst-ip and src-ip),
# ECMP (with symmetric reply), route tables, discard and IPv6 routes, and
# routing policies (allow, drop, reroute to one and several next hops,
# pkt_mark).
set -euo pipefail
n=ovn-nbctl
$n lr-add r1 -- lr-add r2
$n ls-add ls1 -- ls-add join -- ls-add ls2
$n lrp-add r1 r1-ls1 00:00:00:01:00:01 10.1.0.1/24 fd01::1/64
$n lrp-add r1 r1-join 00:00:00:01:00:02 100.64.0.1/24 fd64::1/64
$n lrp-add r2 r2-join 00:00:00:02:00:02 100.64.0.2/24 fd64::2/64
$n lrp-add r2 r2-ls2 00:00:00:02:00:01 10.2.0.1/24 10.3.0.1/24 fd02::1/64
for pair in "ls1 r1-ls1" "join r1-join" "join r2-join" "ls2 r2-ls2"; do
  set -- $pair
  $n lsp-add $1 $1-$2 -- lsp-set-type $1-$2 router -- lsp-set-addresses $1-$2 router -- lsp-set-options $1-$2 router-port=$2
done
$n lsp-add ls1 vm1 -- lsp-set-addresses vm1 "50:54:00:00:01:01 10.1.0.11 fd01::11"
$n lsp-add ls2 vm2 -- lsp-set-addresses vm2 "50:54:00:00:02:01 10.2.0.11 fd02::11"
$n lsp-add join j-extra -- lsp-set-addresses j-extra "50:54:00:00:64:03 100.64.0.3"
$n lr-route-add r1 10.2.0.0/16 100.64.0.2
$n lr-route-add r1 0.0.0.0/0 100.64.0.2
$n lr-route-add r1 fd02::/64 fd64::2
$n --ecmp-symmetric-reply lr-route-add r1 192.168.10.0/24 100.64.0.2
$n --ecmp-symmetric-reply lr-route-add r1 192.168.10.0/24 100.64.0.3
$n --ecmp lr-route-add r1 192.168.20.0/24 100.64.0.2
$n --ecmp lr-route-add r1 192.168.20.0/24 100.64.0.3
$n --policy=src-ip lr-route-add r1 10.1.0.128/25 100.64.0.3
$n lr-route-add r1 192.168.30.0/24 discard
$n lr-route-add r1 192.168.40.5 100.64.0.3 r1-join
$n --route-table=rt1 lr-route-add r1 0.0.0.0/0 100.64.0.3
$n lrp-set-options r1-ls1 route_table=rt1
$n lr-route-add r2 10.1.0.0/24 100.64.0.1
$n lr-policy-add r2 1000 "ip4.src == 10.2.0.11" drop
$n lr-policy-add r2 900 "ip4.src == 10.3.0.0/24" allow
$n lr-policy-add r2 800 "ip4.dst == 8.8.8.8" reroute 100.64.0.1
$n lr-policy-add r2 700 "ip4.dst == 9.9.9.9" reroute 100.64.0.1,100.64.0.3
$n lr-policy-add r2 600 "ip6.src == fd02::/64" reroute fd64::1
$n lr-policy-add r2 500 "tcp.dst == 22" allow pkt_mark=42
