#!/usr/bin/env bash
# sw-localnet-external.sh — a provider switch: a localnet port with a VLAN
# tag, VMs, and external ports (bare-metal hosts reached through the
# localnet) on an HA_Chassis_Group, with DHCP for them; plus an untagged
# localnet switch.
# chassis: hv1 hv2 hv3
set -euo pipefail
n=ovn-nbctl
$n ls-add prov
$n lsp-add prov ln-prov -- lsp-set-type ln-prov localnet -- lsp-set-addresses ln-prov unknown \
   -- lsp-set-options ln-prov network_name=physnet1 -- set Logical_Switch_Port ln-prov tag=100
$n lsp-add prov vm1 -- lsp-set-addresses vm1 "0a:00:00:00:05:01 192.168.5.11"
$n lsp-add prov vm2 -- lsp-set-addresses vm2 "0a:00:00:00:05:02 192.168.5.12" -- lsp-set-port-security vm2 "0a:00:00:00:05:02 192.168.5.12"
$n ha-chassis-group-add hagrp -- ha-chassis-group-add-chassis hagrp hv1 30 -- ha-chassis-group-add-chassis hagrp hv2 20
hag=$($n --bare --columns _uuid find HA_Chassis_Group name=hagrp)
dh4=$($n create DHCP_Options cidr=192.168.5.0/24 options='"lease_time"="3600" "router"="192.168.5.1" "server_id"="192.168.5.1" "server_mac"="c0:ff:ee:00:05:01"')
for i in 1 2; do
  $n lsp-add prov ext$i -- lsp-set-type ext$i external -- lsp-set-addresses ext$i "0a:00:00:00:05:e$i 192.168.5.2$i" \
     -- set Logical_Switch_Port ext$i ha_chassis_group=$hag -- lsp-set-dhcpv4-options ext$i $dh4
done
$n lsp-set-dhcpv4-options vm1 $dh4
$n lr-add provr -- lrp-add provr provr-prov 00:00:00:00:05:ff 192.168.5.1/24 \
   -- lsp-add prov prov-provr -- lsp-set-type prov-provr router -- lsp-set-addresses prov-provr router -- lsp-set-options prov-provr router-port=provr-prov
$n ls-add flat
$n lsp-add flat ln-flat -- lsp-set-type ln-flat localnet -- lsp-set-addresses ln-flat unknown -- lsp-set-options ln-flat network_name=physnet2
$n lsp-add flat f1 -- lsp-set-addresses f1 "0a:00:00:00:06:01 192.168.6.11"
$n lsp-add flat f2 -- lsp-set-addresses f2 "0a:00:00:00:06:02 192.168.6.12"
