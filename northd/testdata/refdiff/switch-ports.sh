#!/usr/bin/env bash
# Switch port types and port security: VIFs with L2, IPv4 and IPv6 port
# security, a disabled port, a localport, a localnet with a VLAN, an
# external port with an HA chassis group, virtual ports, container ports,
# an l2gateway port, a vtep port, a remote port, a port with a queue.
set -euo pipefail
n=ovn-nbctl
$n ls-add sw0 -- ls-add sw1 -- set Logical_Switch sw1 other_config:requested-tnl-key=77
$n lsp-add sw0 p1 -- lsp-set-addresses p1 "50:54:00:00:00:01 10.0.0.11 fd00::11" \
   -- lsp-set-port-security p1 "50:54:00:00:00:01 10.0.0.11 fd00::11"
$n lsp-add sw0 p2 -- lsp-set-addresses p2 "50:54:00:00:00:02 10.0.0.12" -- lsp-set-port-security p2 "50:54:00:00:00:02"
$n lsp-add sw0 p3 -- lsp-set-addresses p3 "50:54:00:00:00:03 10.0.0.13 10.0.0.14 fd00::13" \
   -- lsp-set-port-security p3 "50:54:00:00:00:03 10.0.0.13/24 fd00::/64"
$n lsp-add sw0 p4 -- lsp-set-addresses p4 "50:54:00:00:00:04" -- lsp-set-enabled p4 disabled
$n lsp-add sw0 p5 -- lsp-set-addresses p5 "50:54:00:00:00:05 10.0.0.15" -- set Logical_Switch_Port p5 options:qdisc_queue_id=7 \
   options:requested-tnl-key=42 options:requested-chassis=hv2 external_ids:foo=bar
$n lsp-add sw0 p6 -- lsp-set-addresses p6 "50:54:00:00:00:06 10.0.0.16" "unknown"
$n lsp-add sw0 p7 -- lsp-set-addresses p7 unknown
$n lsp-add sw0 p8 -- lsp-set-addresses p8 "unknown" -- lsp-set-port-security p8 "50:54:00:00:00:08"
$n lsp-add sw0 lp -- lsp-set-type lp localport -- lsp-set-addresses lp "50:54:00:00:00:99 10.0.0.99"
$n lsp-add sw0 vip -- lsp-set-type vip virtual -- lsp-set-addresses vip "50:54:00:00:00:88 10.0.0.88" \
   -- set Logical_Switch_Port vip options:virtual-ip=10.0.0.88 options:virtual-parents=p1,p2
$n lsp-add sw0 vip6 -- lsp-set-type vip6 virtual -- set Logical_Switch_Port vip6 options:virtual-ip=fd00::88 options:virtual-parents=p3
# container ports
$n lsp-add sw0 parent -- lsp-set-addresses parent "50:54:00:00:00:10 10.0.0.20"
$n lsp-add sw0 c1 parent 5 -- lsp-set-addresses c1 "50:54:00:00:00:11 10.0.0.21"
$n lsp-add sw0 c2real -- set Logical_Switch_Port c2real parent_name=parent tag_request=0 addresses='"50:54:00:00:00:13 10.0.0.23"'
$n lsp-add sw0 c3 -- set Logical_Switch_Port c3 parent_name=parent tag_request=0
# localnet with a VLAN; external ports with an HA chassis group
$n lsp-add sw1 ln -- lsp-set-type ln localnet -- lsp-set-addresses ln unknown -- lsp-set-options ln network_name=phys \
   -- set Logical_Switch_Port ln tag_request=100
$n ha-chassis-group-add hagrp -- ha-chassis-group-add-chassis hagrp hv1 30 -- ha-chassis-group-add-chassis hagrp hv2 20
$n lsp-add sw1 ext1 -- lsp-set-type ext1 external -- lsp-set-addresses ext1 "50:54:00:00:01:01 10.1.0.11"
$n set Logical_Switch_Port ext1 ha_chassis_group=$($n --bare --columns _uuid find HA_Chassis_Group name=hagrp)
$n lsp-add sw1 q1 -- lsp-set-addresses q1 "50:54:00:00:01:02 10.1.0.12 fd01::12"
$n lsp-add sw1 l2gw -- lsp-set-type l2gw l2gateway -- lsp-set-addresses l2gw unknown \
   -- lsp-set-options l2gw network_name=phys2 l2gateway-chassis=hv3
$n lsp-add sw1 vtep1 -- lsp-set-type vtep1 vtep -- lsp-set-addresses vtep1 unknown \
   -- lsp-set-options vtep1 vtep-physical-switch=ps1 vtep-logical-switch=lsw1
$n lsp-add sw1 rem -- lsp-set-type rem remote -- lsp-set-addresses rem "50:54:00:00:01:09 10.1.0.99" \
   -- lsp-set-options rem requested-chassis=hv3
$n lsp-add sw1 arpx -- lsp-set-addresses arpx "50:54:00:00:01:03 10.1.0.13" -- lsp-set-options arpx arp_proxy="50:54:00:00:01:33 10.1.0.200 10.1.1.0/24"
# a router on the switch with the external port and the localnet port
$n lr-add lr1 -- lrp-add lr1 lr1-sw1 00:00:00:00:ff:11 10.1.0.1/24 fd01::1/64
$n lsp-add sw1 sw1-lr1 -- lsp-set-type sw1-lr1 router -- lsp-set-addresses sw1-lr1 router -- lsp-set-options sw1-lr1 router-port=lr1-sw1
$n lsp-add sw1 ext2 -- lsp-set-type ext2 external -- lsp-set-addresses ext2 "50:54:00:00:01:04 10.1.0.14" "50:54:00:00:01:05 10.1.0.15"
$n set Logical_Switch_Port ext2 ha_chassis_group=$($n --bare --columns _uuid find HA_Chassis_Group name=hagrp)
