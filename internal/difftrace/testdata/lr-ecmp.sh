#!/usr/bin/env bash
# lr-ecmp.sh — two routers joined by a transit switch, static routes both
# ways, ECMP with symmetric reply towards two next hops, a src-ip route,
# a discard-like route to an unreachable next hop, and a route table.
set -euo pipefail
n=ovn-nbctl
$n ls-add left -- ls-add right -- ls-add transit
$n lsp-add left l1 -- lsp-set-addresses l1 "0a:00:00:00:10:01 10.10.1.11 fd10:1::11"
$n lsp-add left l2 -- lsp-set-addresses l2 "0a:00:00:00:10:02 10.10.1.12 fd10:1::12"
$n lsp-add right r1 -- lsp-set-addresses r1 "0a:00:00:00:11:01 10.10.2.11 fd10:2::11"
$n lsp-add right r2 -- lsp-set-addresses r2 "0a:00:00:00:11:02 10.10.2.12"
$n lsp-add transit nh1 -- lsp-set-addresses nh1 "0a:00:00:00:12:01 10.10.0.101"
$n lsp-add transit nh2 -- lsp-set-addresses nh2 "0a:00:00:00:12:02 10.10.0.102"
lrp() { # router port switch mac networks...
  local r=$1 sw=$2 mac=$3; shift 3
  $n lrp-add $r $r-$sw $mac "$@" -- lsp-add $sw $sw-$r -- lsp-set-type $sw-$r router \
     -- lsp-set-addresses $sw-$r router -- lsp-set-options $sw-$r router-port=$r-$sw
}
$n lr-add ra -- lr-add rb
lrp ra left 00:00:00:00:10:ff 10.10.1.1/24 fd10:1::1/64
lrp ra transit 00:00:00:00:12:fa 10.10.0.1/24 fd10::1/64
lrp rb right 00:00:00:00:11:ff 10.10.2.1/24 fd10:2::1/64
lrp rb transit 00:00:00:00:12:fb 10.10.0.2/24 fd10::2/64
$n lr-route-add ra 10.10.2.0/24 10.10.0.2
$n lr-route-add ra fd10:2::/64 fd10::2
$n lr-route-add rb 10.10.1.0/24 10.10.0.1
$n lr-route-add rb fd10:1::/64 fd10::1
$n --ecmp-symmetric-reply lr-route-add ra 172.16.50.0/24 10.10.0.101
$n --ecmp-symmetric-reply lr-route-add ra 172.16.50.0/24 10.10.0.102
$n --ecmp lr-route-add rb 172.16.60.0/24 10.10.0.101 -- --ecmp lr-route-add rb 172.16.60.0/24 10.10.0.102
$n --policy=src-ip lr-route-add ra 10.10.1.12/32 10.10.0.102
$n lr-route-add ra 172.16.70.0/24 10.10.0.250
$n lr-route-add ra 0.0.0.0/0 10.10.0.2
$n --route-table=rtb lr-route-add ra 172.16.80.0/24 10.10.0.101
$n lrp-set-options ra-left route_table=rtb
