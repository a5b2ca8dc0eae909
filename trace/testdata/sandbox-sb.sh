# The second part of the sandbox's topology (after sandbox-nb.sh): wait
# for northd, then add the chassis and bind the VMs where govn sandbox's
# chassis would claim them, and wait for northd again (it reacts to the
# chassis: the gateway router's ports).
set -e
nbctl() { ovn-nbctl --db="$NB" "$@"; }
sbctl() { ovn-sbctl --db="$SB" "$@"; }

nbctl --wait=sb sync
sbctl chassis-add hv1 geneve 192.168.0.1 -- chassis-add hv2 geneve 192.168.0.2 -- chassis-add hv3 geneve 192.168.0.3
for b in vm1:hv1 web1:hv1 vm2:hv2 web2:hv2 vm3:hv3 web3:hv3; do
	sbctl lsp-bind ${b%:*} ${b#*:}
done
nbctl --wait=sb sync
