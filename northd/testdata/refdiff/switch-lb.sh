#!/usr/bin/env bash
# Load balancers on switches: IPv4 and IPv6 VIPs with and without ports,
# TCP, UDP and SCTP, a load balancer group, hairpin_snat_ip, reject without
# backends, selection fields, affinity, and a health-checked backend.
set -euo pipefail
n=ovn-nbctl
$n ls-add sw0 -- ls-add sw1
for i in 1 2 3; do
  $n lsp-add sw0 p$i -- lsp-set-addresses p$i "50:54:00:00:00:0$i 10.0.0.1$i fd00::1$i"
  $n lsp-add sw1 q$i -- lsp-set-addresses q$i "50:54:00:00:01:0$i 10.0.1.1$i"
done
$n lb-add lb-tcp 30.0.0.1:80 10.0.0.11:8080,10.0.0.12:8080 tcp
$n lb-add lb-udp 30.0.0.2:53 10.0.0.13:5353 udp
$n lb-add lb-sctp 30.0.0.3:9999 10.0.0.11:9999 sctp
$n lb-add lb-noport 30.0.0.4 10.0.0.11,10.0.0.12,10.0.0.13
$n lb-add lb-v6 "[fd00::100]:80" "[fd00::11]:80,[fd00::12]:80" tcp
$n lb-add lb-v6noport fd00::101 fd00::13
$n lb-add lb-empty 30.0.0.5:80 "" tcp
$n set Load_Balancer lb-empty options:reject=true
$n lb-add lb-empty-noreject 30.0.0.6:80 "" tcp
$n lb-add lb-hash 30.0.0.7:80 10.0.0.11:80,10.0.0.12:80 tcp
$n set Load_Balancer lb-hash selection_fields=ip_src,ip_dst,tp_src,tp_dst
$n lb-add lb-hairpin 30.0.0.8:80 10.0.0.11:80 tcp
$n set Load_Balancer lb-hairpin options:hairpin_snat_ip="42.42.42.42 fd42::42"
$n lb-add lb-aff 30.0.0.9:80 10.0.0.12:80,10.0.0.13:80 tcp
$n set Load_Balancer lb-aff options:affinity_timeout=120
$n lb-add lb-hc 30.0.0.10:80 10.0.0.11:80,10.0.0.12:80 tcp
$n set Load_Balancer lb-hc ip_port_mappings:10.0.0.11=p1:10.0.0.1 ip_port_mappings:10.0.0.12=p2:10.0.0.1
hc=$($n --id=@hc create Load_Balancer_Health_Check vip="30.0.0.10\:80" options:interval=5 options:timeout=20 -- add Load_Balancer lb-hc health_check @hc)
for lb in lb-tcp lb-udp lb-sctp lb-noport lb-v6 lb-v6noport lb-empty lb-empty-noreject lb-hash lb-hairpin lb-aff lb-hc; do
  $n ls-lb-add sw0 $lb
done
$n lb-add lb-grp 30.0.1.1:443 10.0.1.11:443,10.0.1.12:443 tcp
lbg=$($n create Load_Balancer_Group name=lbg)
$n add Load_Balancer_Group lbg load_balancer $($n --bare --columns _uuid find Load_Balancer name=lb-grp)
$n add Logical_Switch sw1 load_balancer_group $lbg
$n add Logical_Switch sw0 load_balancer_group $lbg
