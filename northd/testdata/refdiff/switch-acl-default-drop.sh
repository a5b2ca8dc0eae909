#!/usr/bin/env bash
# NB_Global options:default_acl_drop=true, with a stateful switch, a
# stateless one and one without ACLs.
set -euo pipefail
n=ovn-nbctl
$n set NB_Global . options:default_acl_drop=true
for s in a b c; do $n ls-add sw-$s; $n lsp-add sw-$s p-$s -- lsp-set-addresses p-$s "50:54:00:00:0a:01 10.10.0.2" ; done
$n acl-add sw-a from-lport 100 'ip4' allow-related
$n acl-add sw-b to-lport 100 'ip4' allow
