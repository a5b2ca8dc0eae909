#!/usr/bin/env bash
# A forwarding group with liveness and one without.
set -euo pipefail
n=ovn-nbctl
$n ls-add sw0
$n lsp-add sw0 p1 -- lsp-set-addresses p1 "50:54:00:00:00:01 10.0.0.11"
$n lsp-add sw0 p2 -- lsp-set-addresses p2 "50:54:00:00:00:02 10.0.0.12"
$n lsp-add sw0 p3 -- lsp-set-addresses p3 "50:54:00:00:00:03 10.0.0.13"
$n --liveness fwd-group-add fg1 sw0 10.0.0.100 00:00:00:00:aa:01 p1 p2
