#!/usr/bin/env bash
# sw-port-security.sh — L2, IPv4, IPv6 port security: MAC only, MAC+IPv4,
# MAC+IPv4+IPv6, a prefix, several entries, and a port without it.
set -euo pipefail
n=ovn-nbctl
$n ls-add ps
$n lsp-add ps p1 -- lsp-set-addresses p1 "0a:00:00:00:01:01 192.168.1.11 fd01::11" -- lsp-set-port-security p1 "0a:00:00:00:01:01"
$n lsp-add ps p2 -- lsp-set-addresses p2 "0a:00:00:00:01:02 192.168.1.12 fd01::12" -- lsp-set-port-security p2 "0a:00:00:00:01:02 192.168.1.12"
$n lsp-add ps p3 -- lsp-set-addresses p3 "0a:00:00:00:01:03 192.168.1.13 fd01::13" -- lsp-set-port-security p3 "0a:00:00:00:01:03 192.168.1.13 fd01::13"
$n lsp-add ps p4 -- lsp-set-addresses p4 "0a:00:00:00:01:04 192.168.1.14" -- lsp-set-port-security p4 "0a:00:00:00:01:04 192.168.1.0/28"
$n lsp-add ps p5 -- lsp-set-addresses p5 "0a:00:00:00:01:05 192.168.1.15" "0a:00:00:00:01:15 192.168.1.25" \
   -- lsp-set-port-security p5 "0a:00:00:00:01:05 192.168.1.15" "0a:00:00:00:01:15 192.168.1.25"
$n lsp-add ps p6 -- lsp-set-addresses p6 "0a:00:00:00:01:06 192.168.1.16 fd01::16"
$n lsp-add ps p7 -- lsp-set-addresses p7 "0a:00:00:00:01:07 192.168.1.17" unknown
$n lsp-add ps p8 -- lsp-set-addresses p8 "0a:00:00:00:01:08 192.168.1.18" -- lsp-set-port-security p8 "0a:00:00:00:01:08 192.168.1.18" \
   -- lsp-set-enabled p8 disabled
