#!/usr/bin/env bash
# lr-gw-lb.sh — load balancers on a gateway router: force_snat_for_lb,
# lb_force_snat_ip=router_ip, skip_snat, a VIP on the router's own
# address, UDP, and a load balancer group. (IPv4 only: IPv6 through this
# gateway router makes ovn-trace 23.03 print megabytes per packet.)
# chassis: hv1 hv2 hv3
set -euo pipefail
n=ovn-nbctl
$n ls-add srv -- ls-add edge
for i in 1 2 3; do $n lsp-add srv s$i -- lsp-set-addresses s$i "0a:00:00:00:50:0$i 10.50.1.1$i"; done
$n lsp-add edge ln-edge -- lsp-set-type ln-edge localnet -- lsp-set-addresses ln-edge unknown -- lsp-set-options ln-edge network_name=phys
$n lsp-add edge cli -- lsp-set-addresses cli "0a:00:00:00:51:01 172.50.0.50"
$n lr-add glb -- set Logical_Router glb options:chassis=hv3 options:lb_force_snat_ip=router_ip
$n lrp-add glb glb-srv 00:00:00:00:50:ff 10.50.1.1/24 -- lsp-add srv srv-glb -- lsp-set-type srv-glb router \
   -- lsp-set-addresses srv-glb router -- lsp-set-options srv-glb router-port=glb-srv
$n lrp-add glb glb-edge 00:00:00:00:51:ff 172.50.0.1/24 -- lsp-add edge edge-glb -- lsp-set-type edge-glb router \
   -- lsp-set-addresses edge-glb router -- lsp-set-options edge-glb router-port=glb-edge
$n lr-route-add glb 0.0.0.0/0 172.50.0.254
$n lb-add web 172.50.0.100:80 10.50.1.11:8080,10.50.1.12:8080 tcp
$n lb-add dns 172.50.0.100:53 10.50.1.13:53 udp
$n lb-add onrouter 172.50.0.1:8443 10.50.1.11:443,10.50.1.13:443 tcp
$n lb-add noskip 172.50.0.101:80 10.50.1.12:80 tcp -- set Load_Balancer noskip options:skip_snat=true
$n set Load_Balancer web options:force_snat_for_lb=true
for lb in web dns onrouter noskip; do $n lr-lb-add glb $lb; done
lbg=$($n create Load_Balancer_Group name=rgrp)
$n lb-add grouped 172.50.0.102:80 10.50.1.13:80 tcp
$n add Load_Balancer_Group rgrp load_balancer $($n --bare --columns _uuid find Load_Balancer name=grouped)
$n add Logical_Router glb load_balancer_group $lbg
$n lr-nat-add glb snat 172.50.0.1 10.50.1.0/24
