#!/usr/bin/env bash
# ACLs of every action and direction, on switches and on port groups, with
# labels, logging, meters, apply-after-lb, address sets and the port-group
# address sets; and switches that have only some kinds of ACL.
set -euo pipefail
n=ovn-nbctl
for s in sw-full sw-stateless sw-drop sw-lbonly; do $n ls-add $s; done
for i in 1 2 3 4; do
  $n lsp-add sw-full f$i -- lsp-set-addresses f$i "50:54:00:00:01:0$i 10.1.0.1$i fd01::1$i"
done
$n lsp-add sw-stateless s1 -- lsp-set-addresses s1 "50:54:00:00:02:01 10.2.0.11"
$n lsp-add sw-drop d1 -- lsp-set-addresses d1 "50:54:00:00:03:01 10.3.0.11"
$n lsp-add sw-lbonly l1 -- lsp-set-addresses l1 "50:54:00:00:04:01 10.4.0.11"
$n lb-add lb-only 30.4.0.1:80 10.4.0.11:8080 tcp -- ls-lb-add sw-lbonly lb-only
$n acl-add sw-stateless from-lport 100 'ip4 && udp' allow-stateless
$n acl-add sw-stateless to-lport 100 'ip4 && tcp.dst == 22' allow-stateless
$n acl-add sw-drop from-lport 100 'ip4.src == 10.3.0.0/24 && icmp4' drop
$n create Address_Set name=as_peers addresses='"10.1.0.11","10.1.0.12"'
$n pg-add pg_a f1 f2 -- pg-add pg_b f3
$n meter-add acl_meter drop 10 pktps
$n acl-add sw-full from-lport 1000 'inport == "f1" && ip4' allow
$n acl-add sw-full from-lport 990 'inport == "f2" && tcp' allow-related
$n acl-add sw-full from-lport 980 'inport == "f3" && udp' allow-stateless
$n acl-add sw-full from-lport 970 'inport == "f4" && tcp.dst == 25' drop
$n acl-add sw-full from-lport 960 'inport == "f4" && tcp.dst == 26' reject
$n acl-add sw-full from-lport 950 'inport == "f4" && udp.dst == 27' reject
$n acl-add sw-full from-lport 940 'inport == "f4" && sctp' reject
$n acl-add sw-full from-lport 930 'inport == "f4" && ip6' reject
$n acl-add sw-full to-lport 1000 'outport == "f1" && ip4.src == $as_peers' allow
$n acl-add sw-full to-lport 990 'outport == "f2" && ip4.src == $pg_a_ip4' allow-related
$n acl-add sw-full to-lport 980 'outport == @pg_b && ip6' allow-stateless
$n acl-add sw-full to-lport 970 'outport == @pg_b && icmp4' drop
$n acl-add sw-full to-lport 960 'outport == @pg_b && tcp' reject
$n --label=1234 acl-add sw-full from-lport 920 'inport == "f1" && tcp.dst == 443' allow-related
$n --label=77 acl-add sw-full to-lport 920 'outport == "f1" && tcp.dst == 8443' allow
$n --log --name=log_allow --severity=info acl-add sw-full from-lport 910 'inport == "f1" && tcp.dst == 80' allow-related
$n --log --meter=acl_meter --severity=alert acl-add sw-full to-lport 910 'outport == "f1" && udp.dst == 53' drop
$n --log --name=log_reject acl-add sw-full from-lport 900 'inport == "f2" && udp.dst == 69' reject
$n --apply-after-lb acl-add sw-full from-lport 800 'ip4.dst == 10.1.0.14 && tcp' allow-related
$n --apply-after-lb acl-add sw-full from-lport 790 'ip4.dst == 10.1.0.13 && udp' drop
$n --apply-after-lb acl-add sw-full from-lport 780 'ip4.dst == 10.1.0.12 && icmp4' allow
$n acl-add pg_a from-lport 700 'inport == @pg_a && ip4.dst == $as_peers' allow-related
$n acl-add pg_a to-lport 700 'outport == @pg_a && ip4.src == 10.9.0.0/16' drop
$n acl-add pg_b from-lport 600 'inport == @pg_b && ip6' allow-stateless
