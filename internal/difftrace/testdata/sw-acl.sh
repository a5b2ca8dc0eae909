#!/usr/bin/env bash
# sw-acl.sh — ACLs with every action (allow, allow-related, allow-stateless,
# drop, reject), both directions, apply-after-lb, port groups, address
# sets, labels, logging with name, severity and meter, and a load
# balancer so that apply-after-lb has something to follow.
set -euo pipefail
n=ovn-nbctl
$n ls-add acl
for i in 1 2 3 4 5; do
  $n lsp-add acl a$i -- lsp-set-addresses a$i "0a:00:00:00:02:0$i 192.168.2.1$i fd02::1$i"
done
$n pg-add pg_front a1 a2 -- pg-add pg_back a3 a4
$n create Address_Set name=as_admins addresses='"192.168.2.15","192.168.2.11"'
$n create Address_Set name=as_admins6 addresses='"fd02::15"'
$n meter-add acl_meter drop 10 pktps 5
$n --label=77 acl-add pg_back to-lport 1010 'outport == @pg_back && ip4 && tcp.dst == 5432 && ip4.src == $as_admins' allow-related
$n --log --name=back_db --severity=info --meter=acl_meter acl-add pg_back to-lport 1005 'outport == @pg_back && ip4 && tcp.dst == 5432' reject
$n acl-add pg_back to-lport 1000 'outport == @pg_back && ip' drop
$n acl-add pg_front from-lport 1100 'inport == @pg_front && udp.dst == {53, 123}' allow-stateless
$n --label=5 acl-add pg_front from-lport 1050 'inport == @pg_front && tcp.dst >= 8000 && tcp.dst <= 8080' allow-related
$n --log --severity=alert acl-add pg_front from-lport 1040 'inport == @pg_front && tcp.dst == 23' drop
$n acl-add pg_front from-lport 1030 'inport == @pg_front && sctp.dst == 9000' reject
$n acl-add acl from-lport 900 'ip6.src == $as_admins6 && icmp6' allow
$n acl-add acl to-lport 800 'outport == "a5" && ip4 && udp.dst == 161' reject
$n acl-add acl from-lport 700 'inport == "a5" && ip4.dst == 192.168.2.14' drop
$n --apply-after-lb acl-add acl from-lport 600 'ip4.dst == 192.168.2.13 && tcp.dst == 80' drop
$n --apply-after-lb --log --name=after_lb acl-add acl from-lport 590 'ip4.dst == 192.168.2.12 && tcp.dst == 80' allow-related
$n acl-add acl to-lport 100 'arp || nd' allow
$n lb-add web 10.2.0.10:80 192.168.2.12:80,192.168.2.13:80 tcp -- ls-lb-add acl web
