#!/usr/bin/env bash
# DHCPv4 and DHCPv6 with many options, on ports with and without IPv6.
set -euo pipefail
n=ovn-nbctl
$n ls-add sw0
$n lsp-add sw0 p1 -- lsp-set-addresses p1 "50:54:00:00:00:01 10.0.0.11 fd00::11"
$n lsp-add sw0 p2 -- lsp-set-addresses p2 "50:54:00:00:00:02 10.0.0.12 fd00::12"
$n lsp-add sw0 p3 -- lsp-set-addresses p3 "50:54:00:00:00:03 10.0.0.13"
$n lsp-add sw0 p4 -- lsp-set-addresses p4 "50:54:00:00:00:04 192.168.9.4"
dh4=$($n create DHCP_Options cidr=10.0.0.0/24 options='"lease_time"="3600" "router"="10.0.0.1" "server_id"="10.0.0.1" "server_mac"="c0:ff:ee:00:00:01" "dns_server"="{8.8.8.8,1.1.1.1}" "domain_name"="\"ovn.org\"" "mtu"="1400" "T1"="1800" "T2"="3000" "ntp_server"="10.0.0.2" "classless_static_route"="{30.0.0.0/24,10.0.0.10, 0.0.0.0/0,10.0.0.1}" "hostname"="\"host1\"" "wpad"="\"http://wpad\"" "bootfile_name"="\"boot.ipxe\"" "tftp_server"="\"10.0.0.3\"" "ip_forward_enable"="1" "broadcast_address"="10.0.0.255" "domain_search_list"="\"a.org,b.org\"" "arp_cache_timeout"="60" "tcp_keepalive_interval"="30" "path_prefix"="\"/x\"" "netbios_node_type"="2" "next_server"="10.0.0.4"')
$n lsp-set-dhcpv4-options p1 $dh4 -- lsp-set-dhcpv4-options p2 $dh4 -- lsp-set-dhcpv4-options p4 $dh4
dh6=$($n create DHCP_Options cidr="fd00\:\:/64" options='"server_id"="00:00:00:10:00:01" "dns_server"="{fd00::1,fd00::2}" "domain_search"="\"ovn.org\""')
$n lsp-set-dhcpv6-options p1 $dh6
dh6s=$($n create DHCP_Options cidr="fd00\:\:/64" options='"server_id"="00:00:00:10:00:02" "dhcpv6_stateless"="true"')
$n lsp-set-dhcpv6-options p2 $dh6s
dh4b=$($n create DHCP_Options cidr=10.0.0.0/24 options='"lease_time"="60" "router"="10.0.0.1" "server_id"="10.0.0.1" "server_mac"="c0:ff:ee:00:00:02"')
$n lsp-set-dhcpv4-options p3 $dh4b
