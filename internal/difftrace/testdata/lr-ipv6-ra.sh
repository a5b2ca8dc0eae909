#!/usr/bin/env bash
# lr-ipv6-ra.sh — IPv6 routing with router advertisements: slaac,
# dhcpv6_stateful and dhcpv6_stateless address modes, MTU, prefixes,
# periodic RAs, and IPv6 static routes.
set -euo pipefail
n=ovn-nbctl
lrp() { # router switch mac networks...
  local r=$1 sw=$2 mac=$3; shift 3
  $n lrp-add $r $r-$sw $mac "$@" -- lsp-add $sw $sw-$r -- lsp-set-type $sw-$r router \
     -- lsp-set-addresses $sw-$r router -- lsp-set-options $sw-$r router-port=$r-$sw
}
$n ls-add s6a -- ls-add s6b -- ls-add s6c
$n lsp-add s6a h1 -- lsp-set-addresses h1 "0a:00:00:00:60:01 fd60:a::11"
$n lsp-add s6a h2 -- lsp-set-addresses h2 "0a:00:00:00:60:02 fd60:a::12 10.60.1.12"
$n lsp-add s6b h3 -- lsp-set-addresses h3 "0a:00:00:00:61:01 fd60:b::11"
$n lsp-add s6c h4 -- lsp-set-addresses h4 "0a:00:00:00:62:01 fd60:c::11"
$n lr-add r6
lrp r6 s6a 00:00:00:00:60:ff fd60:a::1/64 10.60.1.1/24
lrp r6 s6b 00:00:00:00:61:ff fd60:b::1/64
lrp r6 s6c 00:00:00:00:62:ff fd60:c::1/64
$n set Logical_Router_Port r6-s6a ipv6_ra_configs:address_mode=slaac ipv6_ra_configs:send_periodic=true \
   ipv6_ra_configs:max_interval=30 ipv6_ra_configs:min_interval=10 ipv6_ra_configs:mtu=1450
$n set Logical_Router_Port r6-s6b ipv6_ra_configs:address_mode=dhcpv6_stateful ipv6_ra_configs:router_preference=HIGH
$n set Logical_Router_Port r6-s6c ipv6_ra_configs:address_mode=dhcpv6_stateless ipv6_ra_configs:rdnss=fd60::53 ipv6_ra_configs:dnssl=ovn.test
$n lr-route-add r6 fd60:d::/64 fd60:c::11
$n lr-route-add r6 ::/0 fd60:b::11
