#!/usr/bin/env bash
# One switch with two VMs and nothing else: the smallest logical network.
set -euo pipefail
n=ovn-nbctl
$n ls-add sw0
$n lsp-add sw0 vm1 -- lsp-set-addresses vm1 "50:54:00:00:00:01 10.0.0.11"
$n lsp-add sw0 vm2 -- lsp-set-addresses vm2 "50:54:00:00:00:02 10.0.0.12" -- lsp-set-port-security vm2 "50:54:00:00:00:02 10.0.0.12"
