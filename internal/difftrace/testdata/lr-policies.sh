#!/usr/bin/env bash
# lr-policies.sh — routing policies: allow, drop, reroute to one and to
# several next hops, pkt_mark, over IPv4 and IPv6, above a default route.
set -euo pipefail
n=ovn-nbctl
$n ls-add pa -- ls-add pb -- ls-add pext
$n lsp-add pa a1 -- lsp-set-addresses a1 "0a:00:00:00:20:01 10.20.1.11 fd20:1::11"
$n lsp-add pa a2 -- lsp-set-addresses a2 "0a:00:00:00:20:02 10.20.1.12 fd20:1::12"
$n lsp-add pa a3 -- lsp-set-addresses a3 "0a:00:00:00:20:03 10.20.1.13"
$n lsp-add pb b1 -- lsp-set-addresses b1 "0a:00:00:00:21:01 10.20.2.11 fd20:2::11"
$n lsp-add pb b2 -- lsp-set-addresses b2 "0a:00:00:00:21:02 10.20.2.12"
$n lsp-add pext x1 -- lsp-set-addresses x1 "0a:00:00:00:22:01 10.20.0.101 fd20::101"
$n lsp-add pext x2 -- lsp-set-addresses x2 "0a:00:00:00:22:02 10.20.0.102"
$n lr-add pr
for sw in pa pb pext; do :; done
$n lrp-add pr pr-pa 00:00:00:00:20:ff 10.20.1.1/24 fd20:1::1/64 -- lsp-add pa pa-pr -- lsp-set-type pa-pr router -- lsp-set-addresses pa-pr router -- lsp-set-options pa-pr router-port=pr-pa
$n lrp-add pr pr-pb 00:00:00:00:21:ff 10.20.2.1/24 fd20:2::1/64 -- lsp-add pb pb-pr -- lsp-set-type pb-pr router -- lsp-set-addresses pb-pr router -- lsp-set-options pb-pr router-port=pr-pb
$n lrp-add pr pr-pext 00:00:00:00:22:ff 10.20.0.1/24 fd20::1/64 -- lsp-add pext pext-pr -- lsp-set-type pext-pr router -- lsp-set-addresses pext-pr router -- lsp-set-options pext-pr router-port=pr-pext
$n lr-route-add pr 0.0.0.0/0 10.20.0.101
$n lr-route-add pr ::/0 fd20::101
$n lr-policy-add pr 2000 "ip4.src == 10.20.1.13" drop
$n lr-policy-add pr 1900 "ip4.src == 10.20.1.12 && ip4.dst == 10.20.2.0/24" reroute 10.20.0.102
$n lr-policy-add pr 1800 "ip4.src == 10.20.1.11 && ip4.dst == 198.51.100.0/24" reroute 10.20.0.101,10.20.0.102
$n lr-policy-add pr 1700 "ip4.dst == 203.0.113.7" allow pkt_mark=1234
$n lr-policy-add pr 1600 "ip6.src == fd20:1::12 && ip6.dst == fd20:2::/64" reroute fd20::101
$n lr-policy-add pr 1500 "ip6.dst == fd20:2::11 && icmp6" drop
$n lr-policy-add pr 1000 "ip4.src == 10.20.2.0/24" allow
