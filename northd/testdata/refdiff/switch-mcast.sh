#!/usr/bin/env bash
# IGMP/MLD snooping with a querier, flood options on ports, a switch with
# snooping but no querier, and one with mcast_flood_unregistered.
set -euo pipefail
n=ovn-nbctl
$n ls-add sw0 -- set Logical_Switch sw0 other_config:mcast_snoop=true other_config:mcast_querier=true \
   other_config:mcast_eth_src=00:00:00:00:05:01 other_config:mcast_ip4_src=10.0.0.254 other_config:mcast_ip6_src=fe80::254 \
   other_config:mcast_table_size=1000 other_config:mcast_idle_timeout=200 other_config:mcast_query_interval=30 other_config:mcast_query_max_response=5
$n lsp-add sw0 p1 -- lsp-set-addresses p1 "50:54:00:00:00:01 10.0.0.11"
$n lsp-add sw0 p2 -- lsp-set-addresses p2 "50:54:00:00:00:02 10.0.0.12" -- set Logical_Switch_Port p2 options:mcast_flood=true
$n lsp-add sw0 p3 -- lsp-set-addresses p3 "50:54:00:00:00:03 10.0.0.13" -- set Logical_Switch_Port p3 options:mcast_flood_reports=true
$n ls-add sw1 -- set Logical_Switch sw1 other_config:mcast_snoop=true other_config:mcast_querier=false other_config:mcast_flood_unregistered=true
$n lsp-add sw1 q1 -- lsp-set-addresses q1 "50:54:00:00:01:01 10.0.1.11"
$n ls-add sw2 -- set Logical_Switch sw2 other_config:mcast_snoop=true
$n lsp-add sw2 r1 -- lsp-set-addresses r1 "50:54:00:00:02:01 10.0.2.11"
