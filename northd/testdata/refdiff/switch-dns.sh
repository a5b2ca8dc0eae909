#!/usr/bin/env bash
# DNS records on two switches (one DNS row shared), and a switch without.
set -euo pipefail
n=ovn-nbctl
$n ls-add sw0 -- ls-add sw1 -- ls-add sw2
$n lsp-add sw0 p1 -- lsp-set-addresses p1 "50:54:00:00:00:01 10.0.0.11"
$n lsp-add sw1 q1 -- lsp-set-addresses q1 "50:54:00:00:01:01 10.0.1.11"
$n lsp-add sw2 r1 -- lsp-set-addresses r1 "50:54:00:00:02:01 10.0.2.11"
d1=$($n create DNS records='{"vm1.ovn.org"="10.0.0.11 fd00::11", "vm2.ovn.org"="10.0.0.12", "11.0.0.10.in-addr.arpa"="vm1.ovn.org"}' external_ids:k=v)
d2=$($n create DNS records='{"q1.ovn.org"="10.0.1.11"}')
$n add Logical_Switch sw0 dns_records $d1 -- add Logical_Switch sw1 dns_records $d1 -- add Logical_Switch sw1 dns_records $d2
