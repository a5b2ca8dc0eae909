#!/usr/bin/env bash
# lr-multi-dgp-lb.sh — a distributed router with two distributed gateway
# ports (on different chassis, each on its own localnet switch) and load
# balancers: a VIP with a port and affinity, one without a port, an IPv6
# VIP, a VIP whose backends are all on one side, and skip_snat.
set -euo pipefail
n=ovn-nbctl
$n ls-add in -- ls-add ext1 -- ls-add ext2
$n lsp-add in v1 -- lsp-set-addresses v1 "50:54:00:00:31:01 10.31.0.11 fd31::11"
$n lsp-add in v2 -- lsp-set-addresses v2 "50:54:00:00:31:02 10.31.0.12 fd31::12"
for i in 1 2; do
  $n lsp-add ext$i ln$i -- lsp-set-type ln$i localnet -- lsp-set-addresses ln$i unknown -- lsp-set-options ln$i network_name=phys$i
done
$n lr-add r
$n lrp-add r r-in 00:00:00:00:31:01 10.31.0.1/24 fd31::1/64
$n lrp-add r r-ext1 00:00:00:00:32:01 172.32.0.1/24 fd32::1/64 -- lrp-set-gateway-chassis r-ext1 hv1 20 -- lrp-set-gateway-chassis r-ext1 hv2 10
$n lrp-add r r-ext2 00:00:00:00:33:01 172.33.0.1/24 -- lrp-set-gateway-chassis r-ext2 hv3 10
$n lsp-add in in-r -- lsp-set-type in-r router -- lsp-set-addresses in-r router -- lsp-set-options in-r router-port=r-in
for i in 1 2; do
  $n lsp-add ext$i ext$i-r -- lsp-set-type ext$i-r router -- lsp-set-addresses ext$i-r router -- lsp-set-options ext$i-r router-port=r-ext$i
done
$n lb-add web 172.32.0.100:80 "10.31.0.11:8080,10.31.0.12:8080" tcp -- set Load_Balancer web options:affinity_timeout=30
$n lb-add any 172.33.0.100 "10.31.0.11,10.31.0.12"
$n lb-add web6 "[fd32::100]:80" "[fd31::11]:80,[fd31::12]:80" tcp
$n lb-add skip 172.33.0.101:53 10.31.0.12:53 udp -- set Load_Balancer skip options:skip_snat=true
for lb in web any web6 skip; do $n lr-lb-add r $lb; done
# NAT on a router with several gateway ports: each rule on the port in
# its external address's network, or on the one its gateway_port names.
$n lr-nat-add r snat 172.32.0.1 10.31.0.0/24
$n lr-nat-add r dnat_and_snat 172.33.0.50 10.31.0.11
$n lr-nat-add r dnat 172.33.0.60 10.31.0.12
$n --id=@p get Logical_Router_Port r-ext1 -- set NAT $($n --bare --columns=_uuid find NAT external_ip=172.33.0.60) gateway_port=@p
