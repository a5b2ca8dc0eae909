#!/usr/bin/env bash
# k8s-3.sh — govn bench northd's ovn-kubernetes-like cluster at 3 nodes,
# 2 pods a node, 3 services, 2 namespaces (fewer pods than the bench's 30,
# so that the battery stays small): node switches with management ports
# and pods with port security, gateway routers with join and external
# switches and SNAT, cluster router ports with gateway chassis, a load
# balancer group on every node switch and gateway router, network
# policies as port groups over address sets. k8s-3.json is
#   govn bench northd --nodes 3 --pods 2 --services 3 --namespaces 2 --print-nb
# chassis: chassis-node0 chassis-node1 chassis-node2
set -euo pipefail
ovsdb-client transact "$OVN_NB_DB" "$(cat "$(dirname "$0")/k8s-3.json")" >/dev/null
