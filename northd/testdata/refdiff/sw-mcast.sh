#!/usr/bin/env bash
# sw-mcast.sh — IGMP/MLD snooping with a querier, mcast_flood and
# mcast_flood_reports on ports, a flood-unregistered switch, and a router
# port relaying multicast between two snooping switches.
set -euo pipefail
n=ovn-nbctl
$n ls-add mc -- ls-add mc2
$n set Logical_Switch mc other_config:mcast_snoop=true other_config:mcast_querier=true \
   other_config:mcast_eth_src=0a:00:00:00:07:fe other_config:mcast_ip4_src=192.168.7.254 other_config:mcast_ip6_src=fe80::fe \
   other_config:mcast_table_size=128 other_config:mcast_idle_timeout=300
$n set Logical_Switch mc2 other_config:mcast_snoop=true other_config:mcast_flood_unregistered=true
for i in 1 2 3; do
  $n lsp-add mc m$i -- lsp-set-addresses m$i "0a:00:00:00:07:0$i 192.168.7.1$i fd07::1$i"
  $n lsp-add mc2 n$i -- lsp-set-addresses n$i "0a:00:00:00:08:0$i 192.168.8.1$i fd08::1$i"
done
$n lsp-set-options m2 mcast_flood=true
$n lsp-set-options m3 mcast_flood_reports=true
$n lr-add mcr -- set Logical_Router mcr options:mcast_relay=true
$n lrp-add mcr mcr-mc 00:00:00:00:07:ff 192.168.7.1/24 fd07::1/64 \
   -- lsp-add mc mc-mcr -- lsp-set-type mc-mcr router -- lsp-set-addresses mc-mcr router -- lsp-set-options mc-mcr router-port=mcr-mc
$n lrp-add mcr mcr-mc2 00:00:00:00:08:ff 192.168.8.1/24 fd08::1/64 \
   -- lsp-add mc2 mc2-mcr -- lsp-set-type mc2-mcr router -- lsp-set-addresses mc2-mcr router -- lsp-set-options mc2-mcr router-port=mcr-mc2
$n set Logical_Router_Port mcr-mc options:mcast_flood=true
