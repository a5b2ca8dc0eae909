#!/usr/bin/env bash
# sw-lb.sh — switch load balancers: a TCP VIP with several backends (and
# backends that call their own VIP: hairpin), UDP and SCTP VIPs, a VIP
# without port, IPv6, a load balancer group, reject without backends, and
# a health-checked backend (Load_Balancer_Health_Check, ip_port_mappings).
set -euo pipefail
n=ovn-nbctl
$n ls-add lbs
for i in 1 2 3 4; do
  $n lsp-add lbs b$i -- lsp-set-addresses b$i "0a:00:00:00:03:0$i 192.168.3.1$i fd03::1$i"
done
$n lsp-add lbs client -- lsp-set-addresses client "0a:00:00:00:03:99 192.168.3.99 fd03::99"
$n lb-add web 10.3.0.10:80 192.168.3.11:8080,192.168.3.12:8080,192.168.3.13:8080 tcp
$n lb-add dns 10.3.0.53:53 192.168.3.11:53,192.168.3.12:53 udp
$n lb-add sig 10.3.0.70:3868 192.168.3.13:3868 sctp
$n lb-add any 10.3.0.20 192.168.3.11,192.168.3.14
$n lb-add web6 "[fd03::100]:80" "[fd03::11]:80,[fd03::12]:80" tcp
$n lb-add empty 10.3.0.99:80 "" tcp -- set Load_Balancer empty options:reject=true
$n lb-add hc 10.3.0.30:80 192.168.3.13:80,192.168.3.14:80 tcp
$n set Load_Balancer hc ip_port_mappings:192.168.3.13=b3:192.168.3.1 ip_port_mappings:192.168.3.14=b4:192.168.3.1
hc=$($n --id=@hc create Load_Balancer_Health_Check vip="10.3.0.30\:80" options:interval=5 options:timeout=20 options:success_count=3 options:failure_count=3 -- add Load_Balancer hc health_check @hc)
for lb in web dns sig any web6 empty hc; do $n ls-lb-add lbs $lb; done
$n set Load_Balancer web options:hairpin_snat_ip="10.3.0.254 fd03::254"
lbg=$($n create Load_Balancer_Group name=grp)
$n lb-add grouped 10.3.0.40:443 192.168.3.12:443,192.168.3.14:443 tcp
$n add Load_Balancer_Group grp load_balancer $($n --bare --columns _uuid find Load_Balancer name=grouped)
$n add Logical_Switch lbs load_balancer_group $lbg
