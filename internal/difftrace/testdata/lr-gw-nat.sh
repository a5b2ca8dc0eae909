#!/usr/bin/env bash
# lr-gw-nat.sh — a gateway router (options:chassis) behind a join switch,
# with SNAT, DNAT, dnat_and_snat, stateless NAT, allowed_ext_ips and
# exempted_ext_ips, on a public localnet switch; a distributed router in
# front of it.
# chassis: hv1 hv2 hv3
set -euo pipefail
n=ovn-nbctl
lrp() { # router switch mac networks...
  local r=$1 sw=$2 mac=$3; shift 3
  $n lrp-add $r $r-$sw $mac "$@" -- lsp-add $sw $sw-$r -- lsp-set-type $sw-$r router \
     -- lsp-set-addresses $sw-$r router -- lsp-set-options $sw-$r router-port=$r-$sw
}
$n ls-add inside -- ls-add join -- ls-add outside
$n lsp-add inside v1 -- lsp-set-addresses v1 "0a:00:00:00:30:01 10.30.1.11"
$n lsp-add inside v2 -- lsp-set-addresses v2 "0a:00:00:00:30:02 10.30.1.12"
$n lsp-add inside v3 -- lsp-set-addresses v3 "0a:00:00:00:30:03 10.30.1.13"
$n lsp-add outside ln-out -- lsp-set-type ln-out localnet -- lsp-set-addresses ln-out unknown -- lsp-set-options ln-out network_name=phys
$n lsp-add outside ext -- lsp-set-addresses ext "0a:00:00:00:32:01 172.30.0.50"
$n lr-add dr -- lr-add gw -- set Logical_Router gw options:chassis=hv3
lrp dr inside 00:00:00:00:30:ff 10.30.1.1/24
lrp dr join 00:00:00:00:31:fd 100.64.0.1/24
lrp gw join 00:00:00:00:31:fe 100.64.0.2/24
lrp gw outside 00:00:00:00:32:fe 172.30.0.2/24
$n lr-route-add dr 0.0.0.0/0 100.64.0.2
$n lr-route-add gw 10.30.1.0/24 100.64.0.1
$n lr-route-add gw 0.0.0.0/0 172.30.0.1
$n lr-nat-add gw snat 172.30.0.2 10.30.1.0/24
$n lr-nat-add gw dnat 172.30.0.20 10.30.1.12
$n lr-nat-add gw dnat_and_snat 172.30.0.21 10.30.1.11
$n --stateless lr-nat-add gw dnat_and_snat 172.30.0.23 10.30.1.13
allowed=$($n create Address_Set name=allowed addresses='"172.30.0.50"')
exempt=$($n create Address_Set name=exempt addresses='"172.30.0.51"')
$n lr-nat-add gw dnat_and_snat 172.30.0.22 10.30.1.12
$n set NAT $($n --bare --columns _uuid find NAT external_ip=172.30.0.22) allowed_ext_ips=$allowed
$n set NAT $($n --bare --columns _uuid find NAT external_ip=172.30.0.20) exempted_ext_ips=$exempt
