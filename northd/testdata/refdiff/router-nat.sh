#!/usr/bin/env bash
# NAT on a gateway router and on a distributed router's gateway port: snat,
# dnat, dnat_and_snat (distributed, with logical_port and external_mac),
# stateless, allowed and exempted external addresses, and a gateway router
# with options:dnat_force_snat_ip and snat-ct-zone.
set -euo pipefail
n=ovn-nbctl
$n ls-add inside -- ls-add outside -- ls-add inside2
$n lsp-add inside vm1 -- lsp-set-addresses vm1 "50:54:00:00:0a:01 10.10.0.11"
$n lsp-add inside vm2 -- lsp-set-addresses vm2 "50:54:00:00:0a:02 10.10.0.12"
$n lsp-add inside2 vm3 -- lsp-set-addresses vm3 "50:54:00:00:0b:01 10.20.0.11"
$n lsp-add outside ln -- lsp-set-type ln localnet -- lsp-set-addresses ln unknown -- lsp-set-options ln network_name=phys
# Gateway router.
$n lr-add gw -- set Logical_Router gw options:chassis=hv1 options:dnat_force_snat_ip=172.16.0.250
$n lrp-add gw gw-in 00:00:00:0a:00:01 10.10.0.1/24
$n lrp-add gw gw-out 00:00:00:0a:00:02 172.16.0.1/24
$n lsp-add inside in-gw -- lsp-set-type in-gw router -- lsp-set-addresses in-gw router -- lsp-set-options in-gw router-port=gw-in
$n lsp-add outside out-gw -- lsp-set-type out-gw router -- lsp-set-addresses out-gw router -- lsp-set-options out-gw router-port=gw-out nat-addresses=router
$n lr-nat-add gw snat 172.16.0.1 10.10.0.0/24
$n lr-nat-add gw dnat 172.16.0.100 10.10.0.11
$n lr-nat-add gw dnat_and_snat 172.16.0.101 10.10.0.12
$n --stateless lr-nat-add gw dnat_and_snat 172.16.0.102 10.10.0.13
as=$($n create Address_Set name=allowed addresses='"172.16.0.50"')
$n lr-nat-add gw dnat_and_snat 172.16.0.103 10.10.0.14
$n set NAT $($n --bare --columns _uuid find NAT external_ip=172.16.0.103) allowed_ext_ips=$as
$n lr-route-add gw 0.0.0.0/0 172.16.0.254
# Distributed router with a gateway port on two chassis.
$n lr-add dr
$n lrp-add dr dr-in 00:00:00:0b:00:01 10.20.0.1/24
$n lrp-add dr dr-out 00:00:00:0b:00:02 172.16.0.2/24
$n lrp-set-gateway-chassis dr-out hv2 20 -- lrp-set-gateway-chassis dr-out hv3 10
$n lsp-add inside2 in-dr -- lsp-set-type in-dr router -- lsp-set-addresses in-dr router -- lsp-set-options in-dr router-port=dr-in
$n lsp-add outside out-dr -- lsp-set-type out-dr router -- lsp-set-addresses out-dr router -- lsp-set-options out-dr router-port=dr-out nat-addresses=router
$n lr-nat-add dr snat 172.16.0.2 10.20.0.0/24
$n lr-nat-add dr dnat_and_snat 172.16.0.110 10.20.0.11 vm3 30:54:00:00:0b:01
$n lr-nat-add dr dnat 172.16.0.111 10.20.0.12
ex=$($n create Address_Set name=exempt addresses='"172.16.0.60"')
$n lr-nat-add dr dnat_and_snat 172.16.0.112 10.20.0.13
$n set NAT $($n --bare --columns _uuid find NAT external_ip=172.16.0.112) exempted_ext_ips=$ex
$n lr-route-add dr 0.0.0.0/0 172.16.0.254
