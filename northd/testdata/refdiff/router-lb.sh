#!/usr/bin/env bash
# Load balancers on routers: a gateway router with force_snat_for_lb and
# lb_force_snat_ip=router_ip, skip_snat, affinity, an IPv6 VIP, a VIP
# without port; and a distributed router's gateway port with a load
# balancer and options:lb_force_snat_ip.
set -euo pipefail
n=ovn-nbctl
$n ls-add inside -- ls-add outside -- ls-add inside2
$n lsp-add inside vm1 -- lsp-set-addresses vm1 "50:54:00:00:0a:01 10.10.0.11 fd10::11"
$n lsp-add inside vm2 -- lsp-set-addresses vm2 "50:54:00:00:0a:02 10.10.0.12 fd10::12"
$n lsp-add inside2 vm3 -- lsp-set-addresses vm3 "50:54:00:00:0b:01 10.20.0.11"
$n lr-add gw -- set Logical_Router gw options:chassis=hv1 options:lb_force_snat_ip=router_ip
$n lrp-add gw gw-in 00:00:00:0a:00:01 10.10.0.1/24 fd10::1/64
$n lrp-add gw gw-out 00:00:00:0a:00:02 172.16.0.1/24 fd16::1/64
$n lsp-add inside in-gw -- lsp-set-type in-gw router -- lsp-set-addresses in-gw router -- lsp-set-options in-gw router-port=gw-in
$n lsp-add outside out-gw -- lsp-set-type out-gw router -- lsp-set-addresses out-gw router -- lsp-set-options out-gw router-port=gw-out
$n lb-add web 172.16.0.100:80 10.10.0.11:8080,10.10.0.12:8080 tcp
$n lb-add dns 172.16.0.101:53 10.10.0.11:53 udp
$n lb-add any 172.16.0.102 10.10.0.11,10.10.0.12
$n lb-add web6 "[fd16::100]:80" "[fd10::11]:80,[fd10::12]:80" tcp
$n lb-add skip 172.16.0.103:80 10.10.0.12:80 tcp -- set Load_Balancer skip options:skip_snat=true
$n lb-add aff 172.16.0.104:80 10.10.0.11:80,10.10.0.12:80 tcp -- set Load_Balancer aff options:affinity_timeout=30
for lb in web dns any web6 skip aff; do $n lr-lb-add gw $lb; done
$n lr-add dr -- set Logical_Router dr options:lb_force_snat_ip=172.16.0.222
$n lrp-add dr dr-in 00:00:00:0b:00:01 10.20.0.1/24
$n lrp-add dr dr-out 00:00:00:0b:00:02 172.16.0.2/24
$n lrp-set-gateway-chassis dr-out hv2 20
$n lsp-add inside2 in-dr -- lsp-set-type in-dr router -- lsp-set-addresses in-dr router -- lsp-set-options in-dr router-port=dr-in
$n lsp-add outside out-dr -- lsp-set-type out-dr router -- lsp-set-addresses out-dr router -- lsp-set-options out-dr router-port=dr-out
$n lb-add drweb 172.16.0.200:80 10.20.0.11:80 tcp
$n lr-lb-add dr drweb
$n ls-lb-add inside2 drweb
