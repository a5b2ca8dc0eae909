package difftrace

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/govn/govn/internal/refovn"
)

var update = flag.Bool("update", false, "rewrite the golden batteries in testdata/battery")

// TestBatteryGolden generates the battery of two topologies and compares
// it with testdata/battery/*.golden (go test -run TestBatteryGolden
// -update rewrites them): the battery depends only on the Northbound, and
// a change to the generator shows as a diff.
func TestBatteryGolden(t *testing.T) {
	for _, name := range []string{"sw-acl", "lr-gw-nat"} {
		t.Run(name, func(t *testing.T) {
			e := refovn.Start(t, refovn.RealNorthd)
			ctx := context.Background()
			script, _ := filepath.Abs(filepath.Join("testdata", name+".sh"))
			if chassis, err := scriptChassis(script); err != nil {
				t.Fatal(err)
			} else if err := e.AddChassis(ctx, chassis...); err != nil {
				t.Fatal(err)
			}
			if err := e.RunScript(ctx, script); err != nil {
				t.Fatal(err)
			}
			topo, err := readTopology(ctx, e.NBRemote())
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			for _, p := range generate(topo) {
				fmt.Fprintf(&b, "%s\t%s\t%s\t%s\n", p.Name, p.Datapath, strings.Join(p.CT, "|"), p.Flow)
			}
			golden := filepath.Join("testdata", "battery", name+".golden")
			if *update {
				os.MkdirAll(filepath.Dir(golden), 0o755)
				if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if got := b.String(); got != string(want) {
				gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
				for i := 0; i < len(gl) && i < len(wl); i++ {
					if gl[i] != wl[i] {
						t.Fatalf("battery differs from %s at line %d:\n got %s\nwant %s", golden, i+1, gl[i], wl[i])
					}
				}
				t.Fatalf("battery has %d lines, %s %d", len(gl), golden, len(wl))
			}
		})
	}
}

func TestAddressHelpers(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{nthHost(netip.MustParsePrefix("10.0.0.0/24"), 5).String(), "10.0.0.5"},
		{nthHost(netip.MustParsePrefix("10.0.0.0/16"), 300).String(), "10.0.1.44"},
		{nthHost(netip.MustParsePrefix("fd00::/64"), 17).String(), "fd00::11"},
		{solicitedNode(netip.MustParseAddr("aef0::1:2345")).String(), "ff02::1:ff01:2345"},
		{mcastMAC(netip.MustParseAddr("239.129.1.2")), "01:00:5e:01:01:02"},
		{mcastMAC(netip.MustParseAddr("ff02::1:ff00:1")), "33:33:ff:00:00:01"},
		{linkLocal("50:54:00:00:00:01").String(), "fe80::5254:ff:fe00:1"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %s, want %s", tc.got, tc.want)
		}
	}
	for _, tc := range []struct {
		in   string
		ip   string
		port int
	}{{"10.0.0.1:80", "10.0.0.1", 80}, {"10.0.0.1", "10.0.0.1", 0}, {"[aef0::1]:443", "aef0::1", 443}, {"aef0::1", "aef0::1", 0}} {
		ip, port, ok := splitHostPort(tc.in)
		if !ok || ip.String() != tc.ip || port != tc.port {
			t.Errorf("splitHostPort(%q) = %v, %d, %v", tc.in, ip, port, ok)
		}
	}
	if got := addressesIn("ip4.src == 10.0.0.13 && ip4.dst == 20.0.0.0/24 || ip6.dst == aef0::/64"); fmt.Sprint(got) != "[10.0.0.13 20.0.0.5 aef0::5]" {
		t.Errorf("addressesIn: %v", got)
	}
}

// FuzzParseEndpoint: any addresses entry parses or is refused, never
// panics.
func FuzzParseEndpoint(f *testing.F) {
	f.Add("50:54:00:00:00:01 10.0.0.11 aef0::11")
	f.Add("router")
	f.Fuzz(func(t *testing.T, s string) {
		parseEndpoint(s)
		splitHostPort(s)
		addressesIn(s)
	})
}
