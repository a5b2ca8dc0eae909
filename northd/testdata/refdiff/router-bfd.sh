#!/usr/bin/env bash
# BFD-checked static routes and a BFD session on a gateway port, with
# a router port MTU (gateway_mtu) and a static MAC binding.
set -euo pipefail
n=ovn-nbctl
$n ls-add ext -- ls-add int
$n lr-add r -- set Logical_Router r options:chassis=hv1
$n lrp-add r r-ext 00:00:00:0c:00:01 192.168.1.1/24 -- lrp-set-options r-ext gateway_mtu=1400
$n lrp-add r r-int 00:00:00:0c:00:02 10.30.0.1/24
$n lsp-add ext ext-r -- lsp-set-type ext-r router -- lsp-set-addresses ext-r router -- lsp-set-options ext-r router-port=r-ext
$n lsp-add int int-r -- lsp-set-type int-r router -- lsp-set-addresses int-r router -- lsp-set-options int-r router-port=r-int
$n lsp-add int vm -- lsp-set-addresses vm "50:54:00:00:0c:01 10.30.0.11"
$n --bfd lr-route-add r 0.0.0.0/0 192.168.1.254 r-ext
$n --bfd --ecmp lr-route-add r 10.99.0.0/16 192.168.1.253 r-ext
$n --bfd --ecmp lr-route-add r 10.99.0.0/16 192.168.1.252 r-ext
$n static-mac-binding-add r-ext 192.168.1.250 00:00:00:0c:0c:0c
