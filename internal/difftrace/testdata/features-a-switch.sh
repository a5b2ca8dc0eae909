#!/usr/bin/env bash
# features-a-switch.sh — the switch part of features-a.sh: its switches,
# ports, DHCP, DNS, localnet, load balancers, port groups, address sets,
# ACLs and QoS, without routers.
set -euo pipefail
n=ovn-nbctl
$n ls-add sw0 -- ls-add sw1 -- ls-add public
$n set Logical_Switch sw0 other_config:subnet=10.0.0.0/24 other_config:mcast_snoop=true
for i in 1 2 3; do
  $n lsp-add sw0 sw0-p$i -- lsp-set-addresses sw0-p$i "50:54:00:00:00:0$i 10.0.0.1$i aef0::1$i" \
     -- lsp-set-port-security sw0-p$i "50:54:00:00:00:0$i 10.0.0.1$i aef0::1$i"
  $n lsp-add sw1 sw1-p$i -- lsp-set-addresses sw1-p$i "50:54:00:00:01:0$i 20.0.0.1$i"
done
$n lsp-add sw0 sw0-unknown -- lsp-set-addresses sw0-unknown unknown
$n lsp-add sw0 sw0-lp -- lsp-set-type sw0-lp localport -- lsp-set-addresses sw0-lp "50:54:00:00:00:99 10.0.0.99"
$n lsp-add sw0 sw0-vip -- lsp-set-type sw0-vip virtual -- lsp-set-addresses sw0-vip "50:54:00:00:00:88 10.0.0.88" \
   -- set Logical_Switch_Port sw0-vip options:virtual-ip=10.0.0.88 options:virtual-parents=sw0-p1,sw0-p2
dh4=$($n create DHCP_Options cidr=10.0.0.0/24 options='"lease_time"="3600" "router"="10.0.0.1" "server_id"="10.0.0.1" "server_mac"="c0:ff:ee:00:00:01" "dns_server"="8.8.8.8"')
$n lsp-set-dhcpv4-options sw0-p1 $dh4
dh6=$($n create DHCP_Options cidr="aef0\:\:/64" options='"server_id"="00:00:00:10:00:01"')
$n lsp-set-dhcpv6-options sw0-p1 $dh6
dns=$($n create DNS records='{"vm1.ovn.org"="10.0.0.11 aef0::11", "vm2.ovn.org"="10.0.0.12"}')
$n add Logical_Switch sw0 dns_records $dns
$n lsp-add public ln-public -- lsp-set-type ln-public localnet -- lsp-set-addresses ln-public unknown \
   -- lsp-set-options ln-public network_name=phys
$n lb-add lb0 30.0.0.1 10.0.0.11,10.0.0.12
$n lb-add lb1 30.0.0.2:8000 10.0.0.11:80,10.0.0.12:80,20.0.0.11:80 tcp
$n lb-add lb2 30.0.0.3:53 10.0.0.13:53 udp
$n lb-add lb3 "[aef0::100]:80" "[aef0::11]:80,[aef0::12]:80" tcp
$n set Load_Balancer lb1 options:hairpin_snat_ip=42.42.42.42 selection_fields=ip_src,ip_dst
$n set Load_Balancer lb2 options:affinity_timeout=60
for lb in lb0 lb1 lb2 lb3; do $n ls-lb-add sw0 $lb -- ls-lb-add sw1 $lb; done
lbg=$($n create Load_Balancer_Group name=lbg0)
$n lb-add lb4 30.0.0.4:443 10.0.0.11:443,20.0.0.12:443 tcp
$n add Load_Balancer_Group lbg0 load_balancer $($n --bare --columns _uuid find Load_Balancer name=lb4)
$n add Logical_Switch sw1 load_balancer_group $lbg
$n pg-add pg_web sw0-p1 sw0-p2 -- pg-add pg_db sw1-p1
$n create Address_Set name=as_clients addresses='"10.0.0.11","10.0.0.12","10.0.0.0/28"'
$n create Address_Set name=as_v6 addresses='"aef0::11","aef0::12"'
$n acl-add pg_web to-lport 1002 'outport == @pg_web && ip4 && tcp.dst == 80' allow-related
$n acl-add pg_web to-lport 1001 'outport == @pg_web && ip4.src == $as_clients' allow
$n acl-add pg_web to-lport 1000 'outport == @pg_web && ip' drop
$n --log --severity=warning --name=deny_db acl-add pg_db from-lport 1000 'inport == @pg_db && ip4.dst == 30.0.0.0/8' reject
$n acl-add sw1 from-lport 900 'ip6.src == $as_v6 && udp.dst == {53, 5353}' allow-stateless
$n --apply-after-lb acl-add sw1 from-lport 800 'ip4 && tcp.dst >= 1000 && tcp.dst <= 2000' allow-related
$n acl-add sw0 to-lport 100 'arp || nd' allow
$n qos-add sw0 from-lport 100 'inport == "sw0-p3" && ip4' dscp=10 rate=1000 burst=100
$n meter-add meter0 drop 100 pktps 10
