#!/usr/bin/env bash
# internal/hvtest's TestRouter topology: a distributed router between two
# switches, with a gateway port on hv3 onto a localnet switch, SNAT,
# dnat_and_snat and a router load balancer.
set -euo pipefail
n=ovn-nbctl
$n lr-add lr1
for spec in "ls1 0a:00:00:00:ff:11 10.0.1.1/24" "ls2 0a:00:00:00:ff:12 10.0.2.1/24" "pub 0a:00:00:00:ff:01 192.168.50.254/24"; do
  set -- $spec
  $n ls-add $1 -- lrp-add lr1 lr1-$1 $2 $3 -- lsp-add $1 $1-lr1 -- lsp-set-type $1-lr1 router \
     -- lsp-set-addresses $1-lr1 router -- lsp-set-options $1-lr1 router-port=lr1-$1
done
$n lsp-add pub pub-ln -- lsp-set-type pub-ln localnet -- lsp-set-addresses pub-ln unknown -- lsp-set-options pub-ln network_name=physnet1
$n lrp-set-gateway-chassis lr1-pub hv3 10
$n lr-nat-add lr1 snat 192.168.50.254 10.0.0.0/16
$n lr-nat-add lr1 dnat_and_snat 192.168.50.100 10.0.2.12
$n lb-add lbr 192.168.50.200:80 10.0.1.11:80,10.0.2.12:80 tcp
$n lr-lb-add lr1 lbr
$n lsp-add ls1 vm1 -- lsp-set-addresses vm1 "0a:00:00:00:01:01 10.0.1.11"
$n lsp-add ls2 vm2 -- lsp-set-addresses vm2 "0a:00:00:00:02:02 10.0.2.12"
