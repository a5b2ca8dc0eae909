# The topology of govn sandbox (sandbox/demo.go), as ovn-nbctl and
# ovn-sbctl commands: ls1 (vm1 on hv1, vm2 on hv2, vm3 on hv3 with DHCP)
# and ls2 (web1-3 on hv1-3) joined by router lr0; load balancer lb0
# (172.16.0.100:80 to web1-3) on ls1; an ACL on ls2 dropping ICMP from
# vm2; gateway router gw on hv3 with SNAT of 10.0.0.0/16 to the provider
# network. $NB and $SB are the databases. This part writes the
# Northbound and waits for nothing (the golden test runs it with northd
# paused); sandbox-sb.sh follows.
set -e

nbctl() { ovn-nbctl --db="$NB" "$@"; }
sbctl() { ovn-sbctl --db="$SB" "$@"; }

# Fixed where northd would choose at random, for golden output.
nbctl set NB_Global . options:mac_prefix=0e:00:00 options:svc_monitor_mac=0e:00:00:00:00:01
nbctl lr-add lr0
for n in "ls1 0a:00:00:00:01:01 10.0.1.1/24" "ls2 0a:00:00:00:02:01 10.0.2.1/24"; do
	set -- $n
	nbctl ls-add $1 -- lrp-add lr0 lr0-$1 $2 $3 \
		-- lsp-add $1 $1-lr0 -- lsp-set-type $1-lr0 router \
		-- lsp-set-addresses $1-lr0 router -- lsp-set-options $1-lr0 router-port=lr0-$1
done
nbctl lsp-add ls1 vm1 -- lsp-set-addresses vm1 "0a:00:00:00:01:11 10.0.1.11"
nbctl lsp-add ls1 vm2 -- lsp-set-addresses vm2 "0a:00:00:00:01:12 10.0.1.12"
nbctl lsp-add ls2 web1 -- lsp-set-addresses web1 "0a:00:00:00:02:21 10.0.2.21"
nbctl lsp-add ls2 web2 -- lsp-set-addresses web2 "0a:00:00:00:02:22 10.0.2.22"
nbctl lsp-add ls2 web3 -- lsp-set-addresses web3 "0a:00:00:00:02:23 10.0.2.23"

nbctl lb-add lb0 172.16.0.100:80 10.0.2.21:80,10.0.2.22:80,10.0.2.23:80 tcp -- ls-lb-add ls1 lb0

nbctl acl-add ls2 to-lport 1001 "ip4.src == 10.0.1.12 && icmp4" drop

dhcp=$(nbctl create DHCP_Options cidr=10.0.1.0/24)
nbctl dhcp-options-set-options $dhcp lease_time=3600 router=10.0.1.1 server_id=10.0.1.1 server_mac=0a:00:00:00:01:01 mtu=1400
nbctl lsp-add ls1 vm3 -- lsp-set-addresses vm3 "0a:00:00:00:01:13 10.0.1.13" -- lsp-set-dhcpv4-options vm3 $dhcp

link() { # ROUTER SWITCH MAC CIDR
	echo -- lrp-add $1 $1-$2 $3 $4 -- lsp-add $2 $2-$1 -- lsp-set-type $2-$1 router \
		-- lsp-set-addresses $2-$1 router -- lsp-set-options $2-$1 router-port=$1-$2
}
nbctl ls-add join -- ls-add pub -- lr-add gw -- set Logical_Router gw options:chassis=hv3 \
	$(link lr0 join 0a:00:00:00:64:01 100.64.0.1/24) \
	$(link gw join 0a:00:00:00:64:02 100.64.0.2/24) \
	$(link gw pub 0a:00:00:00:c8:01 192.168.100.1/24) \
	-- lsp-add pub pub-ln -- lsp-set-type pub-ln localnet -- lsp-set-addresses pub-ln unknown \
	-- lsp-set-options pub-ln network_name=physnet \
	-- lr-route-add lr0 0.0.0.0/0 100.64.0.2 \
	-- lr-route-add gw 10.0.0.0/16 100.64.0.1 \
	-- lr-nat-add gw snat 192.168.100.1 10.0.0.0/16
# Tunnel keys fixed, for golden output (northd numbers rows in the order
# it sees them).
keys=""
n=0
for dp in ls1 ls2 join pub; do
	n=$((n+1)); keys="$keys -- set Logical_Switch $dp other_config:requested-tnl-key=$n"
done
for dp in lr0 gw; do
	n=$((n+1)); keys="$keys -- set Logical_Router $dp options:requested-tnl-key=$n"
done
port_keys() { # TABLE PORT...
	t=$1; shift; k=0
	for p in "$@"; do
		k=$((k+1)); keys="$keys -- set $t $p options:requested-tnl-key=$k"
	done
}
port_keys Logical_Switch_Port ls1-lr0 vm1 vm2 vm3
port_keys Logical_Switch_Port ls2-lr0 web1 web2 web3
port_keys Logical_Switch_Port join-lr0 join-gw
port_keys Logical_Switch_Port pub-gw pub-ln
port_keys Logical_Router_Port lr0-ls1 lr0-ls2 lr0-join
port_keys Logical_Router_Port gw-join gw-pub
nbctl ${keys# -- }

