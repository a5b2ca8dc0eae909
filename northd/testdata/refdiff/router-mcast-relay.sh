#!/usr/bin/env bash
# router-mcast-relay.sh — multicast relay across a router: two snooping
# switches joined by a router with options:mcast_relay, a third switch on a
# second relaying router port with options:mcast_flood, a localnet port on
# one switch, a second relaying router on a distributed gateway port, and
# IGMP_Group rows in the Southbound as chassis write them
# when hosts join groups (IPv4, routable and link-local IPv6, a local
# 224.0.0.x group, one group on two chassis, multicast routers ports).
set -euo pipefail
n=ovn-nbctl
$n ls-add s1 -- ls-add s2 -- ls-add s3
for s in s1 s2 s3; do $n set Logical_Switch $s other_config:mcast_snoop=true other_config:mcast_querier=false; done
for i in 1 2; do
  $n lsp-add s1 a$i -- lsp-set-addresses a$i "0a:00:00:00:21:0$i 10.21.0.1$i fd21::1$i"
  $n lsp-add s2 b$i -- lsp-set-addresses b$i "0a:00:00:00:22:0$i 10.22.0.1$i fd22::1$i"
  $n lsp-add s3 c$i -- lsp-set-addresses c$i "0a:00:00:00:23:0$i 10.23.0.1$i"
done
$n lsp-add s2 s2-ln -- lsp-set-type s2-ln localnet -- lsp-set-addresses s2-ln unknown -- lsp-set-options s2-ln network_name=phys
$n lr-add r -- set Logical_Router r options:mcast_relay=true
for s in 1 2 3; do
  $n lrp-add r r-s$s 00:00:00:00:2$s:ff 10.2$s.0.1/24 fd2$s::1/64 \
    -- lsp-add s$s s$s-r -- lsp-set-type s$s-r router -- lsp-set-addresses s$s-r router -- lsp-set-options s$s-r router-port=r-s$s
done
$n set Logical_Router_Port r-s3 options:mcast_flood=true
$n lsp-set-options a2 mcast_flood=true
# A second relaying router on s1 through a distributed gateway port: it
# hears s1's groups through the chassisredirect port.
$n lr-add r2 -- set Logical_Router r2 options:mcast_relay=true
$n lrp-add r2 r2-s1 00:00:00:00:21:fe 10.21.0.2/24 -- lrp-set-gateway-chassis r2-s1 hv1 10 \
  -- lsp-add s1 s1-r2 -- lsp-set-type s1-r2 router -- lsp-set-addresses s1-r2 router -- lsp-set-options s1-r2 router-port=r2-s1
$n --wait=sb sync
# IGMP_Group rows, as ovn-controller writes them for the ports of its chassis.
s=ovn-sbctl
dp() { $s --bare --columns=_uuid find Datapath_Binding external_ids:name=$1; }
pb() { $s --bare --columns=_uuid find Port_Binding logical_port=$1; }
ch() { $s --bare --columns=_uuid find Chassis name=$1; }
group() { # address switch chassis ports...
  local addr=$1 sw=$2 chassis=$3; shift 3
  local ports=""
  for p in "$@"; do ports="$ports${ports:+,}$(pb $p)"; done
  $s create IGMP_Group address="\"$addr\"" datapath=$(dp $sw) chassis=$(ch $chassis) ports="[$ports]" >/dev/null
  for _ in $(seq 100); do
    [ -n "$($s --bare --columns=_uuid find Multicast_Group name="\"$addr\"" datapath=$(dp $sw))" ] && return
    sleep 0.1
  done
  echo "no Multicast_Group $addr on $sw" >&2; exit 1
}
# One at a time, in address order, each after northd has seen the one
# before: ovn-northd numbers a datapath's groups as they appear (and keeps
# the numbers), govn in address order; so both agree.
group 224.0.0.9 s2 hv1 b2
group 239.1.1.1 s1 hv1 a1
group 239.1.1.1 s1 hv2 a2
group 239.2.2.2 s2 hv1 b1
group 239.3.3.3 s3 hv3 c1
group ff02::1:1 s2 hv2 b2
group ff0e::1:1 s1 hv1 a1
# A multicast router (IGMP queries seen) behind b2 and behind a2, which
# floods already.
$s create IGMP_Group address=mrouters datapath=$(dp s2) chassis=$(ch hv2) ports="[$(pb b2)]" >/dev/null
$s create IGMP_Group address=mrouters datapath=$(dp s1) chassis=$(ch hv2) ports="[$(pb a2)]" >/dev/null
