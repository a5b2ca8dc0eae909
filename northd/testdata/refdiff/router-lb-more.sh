#!/usr/bin/env bash
# More load balancers on routers: a gateway router with an explicit
# lb_force_snat_ip and a load balancer group, affinity on IPv6 VIPs and on
# a VIP without port, a VIP without backends; a distributed router's
# gateway port on a localnet switch with skip_snat and affinity, and a port
# that resides on the redirect chassis; a distributed router without a
# gateway port (no load balancing).
set -euo pipefail
n=ovn-nbctl
$n ls-add in1 -- ls-add ext -- ls-add in2 -- ls-add in3
$n lsp-add in1 a1 -- lsp-set-addresses a1 "50:54:00:00:01:01 10.1.0.11 fd01::11"
$n lsp-add in2 a2 -- lsp-set-addresses a2 "50:54:00:00:02:01 10.2.0.11"
$n lsp-add ext ln -- lsp-set-type ln localnet -- lsp-set-addresses ln unknown -- lsp-set-options ln network_name=phys
$n lr-add g1 -- set Logical_Router g1 options:chassis=hv1 "options:lb_force_snat_ip=192.168.0.9 fd99::9"
$n lrp-add g1 g1-in 00:00:00:01:00:01 10.1.0.1/24 fd01::1/64
$n lrp-add g1 g1-ext 00:00:00:01:00:02 192.168.0.1/24 fd99::1/64
$n lsp-add in1 in1-g1 -- lsp-set-type in1-g1 router -- lsp-set-addresses in1-g1 router -- lsp-set-options in1-g1 router-port=g1-in
$n lb-add v6aff "[fd99::100]:80" "[fd01::11]:80" tcp -- set Load_Balancer v6aff options:affinity_timeout=10
$n lb-add noport 192.168.0.101 10.1.0.11 -- set Load_Balancer noport options:affinity_timeout=20
$n lb-add empty 192.168.0.102:80 "" tcp
$n lb-add grp1 192.168.0.103:443 10.1.0.11:443 tcp
lbg=$($n create Load_Balancer_Group name=g1grp)
$n add Load_Balancer_Group g1grp load_balancer $($n --bare --columns _uuid find Load_Balancer name=grp1)
$n add Logical_Router g1 load_balancer_group $lbg
for lb in v6aff noport empty; do $n lr-lb-add g1 $lb; done
$n lr-add d1
$n lrp-add d1 d1-in 00:00:00:02:00:01 10.2.0.1/24 -- set Logical_Router_Port d1-in options:reside-on-redirect-chassis=true
$n lrp-add d1 d1-ext 00:00:00:02:00:02 192.168.0.2/24
$n lrp-set-gateway-chassis d1-ext hv2 10
$n lsp-add in2 in2-d1 -- lsp-set-type in2-d1 router -- lsp-set-addresses in2-d1 router -- lsp-set-options in2-d1 router-port=d1-in
$n lsp-add ext ext-d1 -- lsp-set-type ext-d1 router -- lsp-set-addresses ext-d1 router -- lsp-set-options ext-d1 router-port=d1-ext
$n lb-add dskip 192.168.0.200:80 10.2.0.11:80 tcp -- set Load_Balancer dskip options:skip_snat=true options:affinity_timeout=5
$n lb-add dplain 10.2.0.200 10.2.0.11
$n lr-lb-add d1 dskip -- lr-lb-add d1 dplain
$n lr-add d2
$n lrp-add d2 d2-in 00:00:00:03:00:01 10.3.0.1/24
$n lsp-add in3 in3-d2 -- lsp-set-type in3-d2 router -- lsp-set-addresses in3-d2 router -- lsp-set-options in3-d2 router-port=d2-in
$n lb-add d2lb 10.3.0.100:80 10.3.0.11:80 tcp
$n lr-lb-add d2 d2lb
