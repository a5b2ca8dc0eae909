#!/usr/bin/env bash
# features-a.sh — a feature-rich OVN NB configuration (shared corpus "A").
# Needs OVN_NB_DB set. Deterministic.
# chassis: hv1 hv2 hv3
set -euo pipefail
n=ovn-nbctl
$n --may-exist ls-add sw0 -- --may-exist ls-add sw1 -- --may-exist ls-add public
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
# DHCP
dh4=$($n create DHCP_Options cidr=10.0.0.0/24 options='"lease_time"="3600" "router"="10.0.0.1" "server_id"="10.0.0.1" "server_mac"="c0:ff:ee:00:00:01" "dns_server"="8.8.8.8"')
$n lsp-set-dhcpv4-options sw0-p1 $dh4
dh6=$($n create DHCP_Options cidr="aef0\:\:/64" options='"server_id"="00:00:00:10:00:01"')
$n lsp-set-dhcpv6-options sw0-p1 $dh6
# DNS
dns=$($n create DNS records='{"vm1.ovn.org"="10.0.0.11 aef0::11", "vm2.ovn.org"="10.0.0.12"}')
$n add Logical_Switch sw0 dns_records $dns
# localnet
$n lsp-add public ln-public -- lsp-set-type ln-public localnet -- lsp-set-addresses ln-public unknown \
   -- lsp-set-options ln-public network_name=phys
# distributed router with gateway port
$n lr-add lr0
$n lrp-add lr0 lr0-sw0 00:00:00:00:ff:01 10.0.0.1/24 aef0::1/64 -- lsp-add sw0 sw0-lr0 -- lsp-set-type sw0-lr0 router \
   -- lsp-set-addresses sw0-lr0 router -- lsp-set-options sw0-lr0 router-port=lr0-sw0
$n lrp-add lr0 lr0-sw1 00:00:00:00:ff:02 20.0.0.1/24 -- lsp-add sw1 sw1-lr0 -- lsp-set-type sw1-lr0 router \
   -- lsp-set-addresses sw1-lr0 router -- lsp-set-options sw1-lr0 router-port=lr0-sw1
$n lrp-add lr0 lr0-public 00:00:20:20:12:13 172.168.0.100/24 -- lsp-add public public-lr0 -- lsp-set-type public-lr0 router \
   -- lsp-set-addresses public-lr0 router -- lsp-set-options public-lr0 router-port=lr0-public nat-addresses=router
$n lrp-set-gateway-chassis lr0-public hv1 20 -- lrp-set-gateway-chassis lr0-public hv2 10
$n set Logical_Router_Port lr0-sw0 ipv6_ra_configs:address_mode=slaac ipv6_ra_configs:send_periodic=true
# NAT
$n lr-nat-add lr0 snat 172.168.0.100 10.0.0.0/24
$n lr-nat-add lr0 dnat_and_snat 172.168.0.110 10.0.0.11 sw0-p1 30:54:00:00:00:03
$n lr-nat-add lr0 dnat 172.168.0.120 20.0.0.11
# routes and policies
$n lr-route-add lr0 0.0.0.0/0 172.168.0.1
$n --ecmp lr-route-add lr0 192.168.100.0/24 20.0.0.11 -- --ecmp lr-route-add lr0 192.168.100.0/24 20.0.0.12
$n lr-route-add lr0 192.168.200.0/24 10.0.0.12 lr0-sw0
$n lr-policy-add lr0 1000 "ip4.src == 10.0.0.13" drop
$n lr-policy-add lr0 900 "ip4.src == 10.0.0.12 && ip4.dst == 20.0.0.0/24" reroute 20.0.0.13
$n lr-policy-add lr0 800 "ip4.src == 20.0.0.0/24" allow
# gateway router
$n lr-add gr0 -- set Logical_Router gr0 options:chassis=hv3 options:lb_force_snat_ip=router_ip
$n lrp-add gr0 gr0-public 00:00:20:20:12:20 172.168.0.200/24
$n lsp-add public public-gr0 -- lsp-set-type public-gr0 router -- lsp-set-addresses public-gr0 router \
   -- lsp-set-options public-gr0 router-port=gr0-public
$n lr-nat-add gr0 snat 172.168.0.200 10.0.0.0/8
# load balancers
$n lb-add lb0 30.0.0.1 10.0.0.11,10.0.0.12
$n lb-add lb1 30.0.0.2:8000 10.0.0.11:80,10.0.0.12:80,20.0.0.11:80 tcp
$n lb-add lb2 30.0.0.3:53 10.0.0.13:53 udp
$n lb-add lb3 "[aef0::100]:80" "[aef0::11]:80,[aef0::12]:80" tcp
$n set Load_Balancer lb1 options:hairpin_snat_ip=42.42.42.42 selection_fields=ip_src,ip_dst
$n set Load_Balancer lb2 options:affinity_timeout=60
for lb in lb0 lb1 lb2 lb3; do $n ls-lb-add sw0 $lb -- ls-lb-add sw1 $lb; done
$n lr-lb-add gr0 lb1 -- lr-lb-add lr0 lb0
lbg=$($n create Load_Balancer_Group name=lbg0)
$n lb-add lb4 30.0.0.4:443 10.0.0.11:443,20.0.0.12:443 tcp
$n add Load_Balancer_Group lbg0 load_balancer $($n --bare --columns _uuid find Load_Balancer name=lb4)
$n add Logical_Switch sw1 load_balancer_group $lbg
# port groups, address sets, ACLs
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
# QoS and meters
$n qos-add sw0 from-lport 100 'inport == "sw0-p3" && ip4' dscp=10 rate=1000 burst=100
$n meter-add meter0 drop 100 pktps 10
echo done
