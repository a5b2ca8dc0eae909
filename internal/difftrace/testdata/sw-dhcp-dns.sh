#!/usr/bin/env bash
# sw-dhcp-dns.sh — DHCPv4 with many option types, DHCPv6 (stateful and
# stateless), and DNS records on a switch behind a router port.
set -euo pipefail
n=ovn-nbctl
$n ls-add dh
$n lsp-add dh d1 -- lsp-set-addresses d1 "0a:00:00:00:04:01 192.168.4.11 fd04::11"
$n lsp-add dh d2 -- lsp-set-addresses d2 "0a:00:00:00:04:02 192.168.4.12 fd04::12"
$n lsp-add dh d3 -- lsp-set-addresses d3 "0a:00:00:00:04:03 192.168.4.13"
$n lsp-add dh d4 -- lsp-set-addresses d4 "0a:00:00:00:04:04 192.168.4.14 fd04::14"
dh4=$($n create DHCP_Options cidr=192.168.4.0/24 options='"lease_time"="3600" "router"="192.168.4.1" "server_id"="192.168.4.1" "server_mac"="c0:ff:ee:00:04:01" "dns_server"="{8.8.8.8,1.1.1.1}" "mtu"="1400" "domain_name"="\"ovn.test\"" "classless_static_route"="{30.0.0.0/24,192.168.4.2, 0.0.0.0/0,192.168.4.1}" "ntp_server"="{192.168.4.3}" "T1"="1800" "T2"="3150" "hostname"="\"vm\""')
dh4b=$($n create DHCP_Options cidr=192.168.4.0/24 options='"lease_time"="600" "router"="192.168.4.1" "server_id"="192.168.4.1" "server_mac"="c0:ff:ee:00:04:01"')
$n lsp-set-dhcpv4-options d1 $dh4 -- lsp-set-dhcpv4-options d2 $dh4 -- lsp-set-dhcpv4-options d3 $dh4b
dh6=$($n create DHCP_Options cidr="fd04\:\:/64" options='"server_id"="00:00:00:10:04:01" "dns_server"="{fd04::53}" "domain_search"="\"ovn.test\""')
dh6s=$($n create DHCP_Options cidr="fd04\:\:/64" options='"server_id"="00:00:00:10:04:01" "dhcpv6_stateless"="true" "dns_server"="{fd04::53}"')
$n lsp-set-dhcpv6-options d1 $dh6 -- lsp-set-dhcpv6-options d2 $dh6s
dns=$($n create DNS records='{"d1.ovn.test"="192.168.4.11 fd04::11", "d2.ovn.test"="192.168.4.12", "ptr.ovn.test"="192.168.4.14"}')
$n add Logical_Switch dh dns_records $dns
$n lr-add dhr -- lrp-add dhr dhr-dh 00:00:00:00:04:ff 192.168.4.1/24 fd04::1/64 \
   -- lsp-add dh dh-dhr -- lsp-set-type dh-dhr router -- lsp-set-addresses dh-dhr router -- lsp-set-options dh-dhr router-port=dhr-dh
