package lflow

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestDHCPOptionsDifferential starts a real ovn-northd 23.03 on empty
// Northbound and Southbound databases and compares the DHCP_Options and
// DHCPv6_Options tables it fills with the options put_dhcp_opts and
// put_dhcpv6_opts take here: the same names, codes and types. It skips
// when the OVN binaries are missing.
func TestDHCPOptionsDifferential(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, sb := startCentral(ctx, t)
	dump := func(table string) []Option {
		query := fmt.Sprintf(`["OVN_Southbound",{"op":"select","table":%q,"where":[],"columns":["name","code","type"]}]`, table)
		out, err := exec.CommandContext(ctx, "ovsdb-client", "transact", sb, query).Output()
		if err != nil {
			return nil
		}
		var reply []struct {
			Rows []struct {
				Name string `json:"name"`
				Code int    `json:"code"`
				Type string `json:"type"`
			} `json:"rows"`
		}
		if json.Unmarshal(out, &reply) != nil || len(reply) != 1 {
			t.Fatalf("unexpected reply %s", out)
		}
		var opts []Option
		for _, r := range reply[0].Rows {
			opts = append(opts, Option{Name: r.Name, Code: r.Code, Type: optionTypeByName(t, r.Type)})
		}
		sort.Slice(opts, func(i, j int) bool { return opts[i].Code < opts[j].Code })
		return opts
	}
	var v4, v6 []Option
	for v4 == nil || v6 == nil {
		if ctx.Err() != nil {
			t.Fatal("ovn-northd did not fill DHCP_Options and DHCPv6_Options within a minute")
		}
		time.Sleep(100 * time.Millisecond)
		v4, v6 = dump("DHCP_Options"), dump("DHCPv6_Options")
	}
	for _, c := range []struct {
		table     string
		real, got []Option
	}{{"DHCP_Options", v4, DHCPv4Options()}, {"DHCPv6_Options", v6, DHCPv6Options()}} {
		if r, g := optionsText(c.real), optionsText(c.got); r != g {
			t.Errorf("%s: ovn-northd writes\n%s\nbut this package has\n%s", c.table, r, g)
		}
	}
}

// startCentral starts ovsdb-server for an empty Northbound and
// Southbound and a real ovn-northd between them, all stopped when the test
// ends, and returns the databases' addresses. It skips when the OVN
// binaries are missing.
func startCentral(ctx context.Context, t *testing.T) (nb, sb string) {
	t.Helper()
	for _, bin := range []string{"ovsdb-tool", "ovsdb-server", "ovsdb-client", "ovn-northd", "ovn-nbctl", "ovn-sbctl"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not installed", bin)
		}
	}
	schemas := map[string]string{"nb": "/usr/share/ovn/ovn-nb.ovsschema", "sb": "/usr/share/ovn/ovn-sb.ovsschema"}
	for _, s := range schemas {
		if _, err := os.Stat(s); err != nil {
			t.Skip(err)
		}
	}
	dir := t.TempDir()
	start := func(args ...string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Dir = dir
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
	for _, db := range []string{"nb", "sb"} {
		file := filepath.Join(dir, db+".db")
		if out, err := exec.CommandContext(ctx, "ovsdb-tool", "create", file, schemas[db]).CombinedOutput(); err != nil {
			t.Fatalf("ovsdb-tool create: %v: %s", err, out)
		}
		start("ovsdb-server", "--no-chdir", "--remote=punix:"+filepath.Join(dir, db+".sock"),
			"--unixctl="+filepath.Join(dir, db+".ctl"), "--log-file="+filepath.Join(dir, db+".log"), file)
	}
	nb, sb = "unix:"+filepath.Join(dir, "nb.sock"), "unix:"+filepath.Join(dir, "sb.sock")
	start("ovn-northd", "--no-chdir", "--ovnnb-db="+nb, "--ovnsb-db="+sb,
		"--unixctl="+filepath.Join(dir, "northd.ctl"), "--log-file="+filepath.Join(dir, "northd.log"))
	return nb, sb
}

// TestNorthdDHCPFlows configures a real ovn-northd with a port that has
// every DHCPv4 and DHCPv6 option and router ports with router
// advertisements, and checks that this package parses every flow it
// writes: its put_dhcp_opts, put_dhcpv6_opts and put_nd_ra_opts included.
func TestNorthdDHCPFlows(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nb, sb := startCentral(ctx, t)
	nbctl := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, "ovn-nbctl", append([]string{"--db=" + nb}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ovn-nbctl %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	nbctl("ls-add", "sw0")
	nbctl("lsp-add", "sw0", "p1")
	nbctl("lsp-set-addresses", "p1", "00:00:00:00:00:01 10.0.0.11 aef0::11")
	v4 := nbctl("create", "DHCP_Options", "cidr=10.0.0.0/24")
	nbctl("dhcp-options-set-options", v4, "server_id=10.0.0.1", "server_mac=00:00:00:00:00:fe",
		"lease_time=3600", "router=10.0.0.1", "netmask=255.255.255.0", "dns_server={8.8.8.8, 8.8.4.4}",
		"log_server=10.0.0.2", "lpr_server=10.0.0.3", "swap_server=10.0.0.4", "policy_filter={10.0.0.5, 10.0.0.6}",
		"router_solicitation=10.0.0.7", "nis_server=10.0.0.8", "ntp_server=10.0.0.9",
		"netbios_name_server=10.0.0.10", "broadcast_address=10.0.0.255", "tftp_server_address=10.0.0.12",
		"next_server=10.0.0.13", "T1=1800", "T2=3000", "arp_cache_timeout=60", "tcp_keepalive_interval=30",
		"default_ttl=64", "tcp_ttl=64", "netbios_node_type=2", "mtu=1442", "ip_forward_enable=1",
		"router_discovery=0", "ethernet_encap=0", `hostname="host1"`, `domain_name="ovn.org"`,
		`bootfile_name="pxe.0"`, `bootfile_name_alt="ipxe.efi"`, `path_prefix="/tftp"`,
		`wpad="http://wpad/x.dat"`, `tftp_server="tftp.ovn.org"`,
		"classless_static_route={30.0.0.0/24,10.0.0.10, 0.0.0.0/0,10.0.0.1}",
		"ms_classless_static_route={30.0.0.0/24,10.0.0.10}", `domain_search_list="a.com,b.com"`)
	nbctl("lsp-set-dhcpv4-options", "p1", v4)
	v6 := nbctl("create", "DHCP_Options", `cidr="aef0::/64"`)
	nbctl("dhcp-options-set-options", v6, "server_id=00:00:00:00:10:02", "dns_server={ae70::1,ae70::2}", `domain_search="ovn.org"`)
	nbctl("lsp-set-dhcpv6-options", "p1", v6)
	nbctl("lr-add", "lr0")
	nbctl("lrp-add", "lr0", "lrp0", "00:00:00:00:ff:01", "10.0.0.1/24", "aef0::1/64")
	nbctl("set", "Logical_Router_Port", "lrp0", "ipv6_ra_configs:address_mode=slaac", "ipv6_ra_configs:mtu=1450",
		"ipv6_ra_configs:rdnss=aef0::53", "ipv6_ra_configs:dnssl=ovn.org", "ipv6_ra_configs:router_preference=HIGH",
		"ipv6_ra_configs:route_info=HIGH-aef1::/64", "ipv6_ra_configs:send_periodic=true")
	nbctl("lsp-add", "sw0", "sw0-lr0")
	nbctl("lsp-set-type", "sw0-lr0", "router")
	nbctl("lsp-set-addresses", "sw0-lr0", "router")
	nbctl("lsp-set-options", "sw0-lr0", "router-port=lrp0")
	nbctl("lrp-add", "lr0", "lrp1", "00:00:00:00:ff:02", "20.0.0.1/24", "aef2::1/64")
	nbctl("set", "Logical_Router_Port", "lrp1", "ipv6_ra_configs:address_mode=dhcpv6_stateful")
	nbctl("--wait=sb", "sync")

	var listing string
	for _, want := range []string{"put_dhcp_opts(", "put_dhcpv6_opts(", "put_nd_ra_opts("} {
		for !strings.Contains(listing, want) {
			if ctx.Err() != nil {
				t.Fatalf("ovn-northd wrote no %s flow within a minute", want)
			}
			out, err := exec.CommandContext(ctx, "ovn-sbctl", "--db="+sb, "lflow-list").Output()
			if err != nil {
				t.Fatal(err)
			}
			listing = string(out)
			time.Sleep(100 * time.Millisecond)
		}
	}
	for _, o := range DHCPv4Options() {
		if !strings.Contains(listing, " "+o.Name+" = ") && !strings.Contains(listing, "("+o.Name+" = ") {
			t.Errorf("ovn-northd wrote no flow with DHCPv4 option %s", o.Name)
		}
	}
	var report strings.Builder
	res, err := testSymtab(t).CheckListing(strings.NewReader(listing), &report, CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed != 0 || res.Parsed < 100 {
		t.Errorf("%d flows parsed, %d failed:\n%s", res.Parsed, res.Failed, report.String())
	}
}

func optionTypeByName(t *testing.T, name string) OptionType {
	for i, n := range optionTypeNames {
		if n == name {
			return OptionType(i)
		}
	}
	t.Fatalf("ovn-northd writes an option type %q this package does not know", name)
	return 0
}

func optionsText(opts []Option) string {
	var sb strings.Builder
	for _, o := range opts {
		fmt.Fprintf(&sb, "  %d %s %s\n", o.Code, o.Name, o.Type)
	}
	return sb.String()
}
