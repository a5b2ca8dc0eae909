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
	for _, bin := range []string{"ovsdb-tool", "ovsdb-server", "ovsdb-client", "ovn-northd"} {
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
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
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
	sb := "unix:" + filepath.Join(dir, "sb.sock")
	start("ovn-northd", "--no-chdir", "--ovnnb-db=unix:"+filepath.Join(dir, "nb.sock"), "--ovnsb-db="+sb,
		"--unixctl="+filepath.Join(dir, "northd.ctl"), "--log-file="+filepath.Join(dir, "northd.log"))

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
