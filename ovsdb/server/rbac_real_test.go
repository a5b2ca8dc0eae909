package server

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/govn/govn/internal/testpki"
)

// rbacSetup is what the test writes over the unix socket: two
// Connections with role ovn-controller (pssl and ptcp, ports filled in),
// permissions like ovn-northd's and rows of another chassis.
const rbacSetup = `["OVN_Southbound",
 {"op":"insert","table":"SB_Global","row":{"connections":["set",[["named-uuid","c1"],["named-uuid","c2"]]]}},
 {"op":"insert","table":"Connection","uuid-name":"c1","row":{"target":"pssl:%d:127.0.0.1","role":"ovn-controller"}},
 {"op":"insert","table":"Connection","uuid-name":"c2","row":{"target":"ptcp:%d:127.0.0.1","role":"ovn-controller"}},
 {"op":"insert","table":"RBAC_Permission","uuid-name":"pch","row":{"table":"Chassis","authorization":"name","insert_delete":true,"update":["set",["nb_cfg","external_ids","encaps","other_config","hostname"]]}},
 {"op":"insert","table":"RBAC_Permission","uuid-name":"pen","row":{"table":"Encap","authorization":"chassis_name","insert_delete":true,"update":["set",["type","options","ip"]]}},
 {"op":"insert","table":"RBAC_Permission","uuid-name":"ppb","row":{"table":"Port_Binding","authorization":"","insert_delete":false,"update":["set",["chassis","up"]]}},
 {"op":"insert","table":"RBAC_Permission","uuid-name":"pdp","row":{"table":"Datapath_Binding","authorization":"external_ids:chassis","insert_delete":false,"update":["set",["load_balancers"]]}},
 {"op":"insert","table":"RBAC_Role","row":{"name":"ovn-controller","permissions":["map",[["Chassis",["named-uuid","pch"]],["Encap",["named-uuid","pen"]],["Port_Binding",["named-uuid","ppb"]],["Datapath_Binding",["named-uuid","pdp"]]]]}},
 {"op":"insert","table":"Encap","uuid-name":"e2","row":{"type":"geneve","ip":"2.2.2.2","chassis_name":"hv2"}},
 {"op":"insert","table":"Chassis","row":{"name":"hv2","hostname":"h2","encaps":["named-uuid","e2"]}},
 {"op":"insert","table":"Datapath_Binding","uuid-name":"dp","row":{"tunnel_key":1,"external_ids":["map",[["chassis","hv1"]]]}},
 {"op":"insert","table":"Port_Binding","row":{"logical_port":"lp1","tunnel_key":1,"datapath":["named-uuid","dp"]}}]`

// rbacOps are the transactions a chassis runs (each without the database
// name).
var rbacOps = []string{
	`{"op":"insert","table":"Encap","uuid-name":"e","row":{"type":"geneve","ip":"1.1.1.1","chassis_name":"hv1"}},{"op":"insert","table":"Chassis","row":{"name":"hv1","encaps":["named-uuid","e"]}}`,
	`{"op":"insert","table":"Encap","row":{"type":"geneve","ip":"3.3.3.3","chassis_name":"hv3"}}`,
	`{"op":"update","table":"Chassis","where":[["name","==","hv1"]],"row":{"hostname":"x"}}`,
	`{"op":"update","table":"Chassis","where":[["name","==","hv1"]],"row":{"name":"hv9"}}`,
	`{"op":"update","table":"Chassis","where":[["name","==","hv1"]],"row":{"name":"hv1"}}`,
	`{"op":"update","table":"Chassis","where":[["name","==","hv2"]],"row":{"hostname":"y"}}`,
	`{"op":"update","table":"Chassis","where":[["name","==","zz"]],"row":{"name":"q"}}`,
	`{"op":"update","table":"Port_Binding","where":[],"row":{"up":true}}`,
	`{"op":"update","table":"Port_Binding","where":[],"row":{"tag":5}}`,
	`{"op":"insert","table":"Port_Binding","row":{"logical_port":"lp2","tunnel_key":2,"datapath":["uuid","00000000-0000-0000-0000-000000000000"]}}`,
	`{"op":"mutate","table":"Chassis","where":[["name","==","hv1"]],"mutations":[["nb_cfg","+=",1]]}`,
	`{"op":"mutate","table":"Chassis","where":[["name","==","hv1"]],"mutations":[["transport_zones","insert","z"]]}`,
	`{"op":"mutate","table":"Chassis","where":[],"mutations":[["nb_cfg","+=",1]]}`,
	`{"op":"update","table":"Datapath_Binding","where":[],"row":{"load_balancers":["set",[]]}}`,
	`{"op":"insert","table":"Datapath_Binding","row":{"tunnel_key":7,"external_ids":["map",[["chassis","hv1"]]]}}`,
	`{"op":"insert","table":"MAC_Binding","row":{"logical_port":"a","ip":"1","mac":"m","datapath":["uuid","00000000-0000-0000-0000-000000000000"]}}`,
	`{"op":"update","table":"SB_Global","where":[],"row":{"nb_cfg":3}}`,
	`{"op":"delete","table":"MAC_Binding","where":[]}`,
	`{"op":"update","table":"Chassis","where":[["name","==","hv2"]],"row":{}}`,
	`{"op":"delete","table":"Chassis","where":[["name","==","hv2"]]}`,
	`{"op":"update","table":"Chassis","where":[["name","==","hv1"]],"row":{"name":"zz"}},{"op":"delete","table":"Chassis","where":[["name","==","hv1"]]}`,
	`{"op":"delete","table":"Chassis","where":[["name","==","hv1"]]}`,
	`{"op":"delete","table":"Chassis","where":[["name","==","nope"]]}`,
	`{"op":"select","table":"Chassis","where":[],"columns":["name"]}`,
}

// TestRealRBAC runs the same RBAC rules, role connections and chassis
// certificate against govn and the real ovsdb-server and compares every
// reply: as chassis hv1 over SSL, then without a certificate over TCP.
func TestRealRBAC(t *testing.T) {
	for _, tool := range []string{"ovsdb-server", "ovsdb-tool", "ovsdb-client"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	certDir := t.TempDir()
	testCA := testpki.NewCA(t, certDir, "test-ca")
	ca := testCA.File
	serverKey, serverCert := testCA.Issue(t, certDir, "server")
	hv1Key, hv1Cert := testCA.Issue(t, certDir, "hv1")
	tlsOpts := TLSOptions{PrivateKey: serverKey, Certificate: serverCert, CACert: ca}

	remotes := func(dir string) []string {
		return []string{"punix:" + filepath.Join(dir, "sb.sock"), "db:OVN_Southbound,SB_Global,connections"}
	}
	startGovn := func(t *testing.T, dir string) string {
		startGovnRemotes(t, dir, "sb", remotes(dir), tlsOpts)
		return filepath.Join(dir, "sb.sock")
	}
	startReal := func(t *testing.T, dir string) string {
		startRealRemotes(t, dir, "sb", remotes(dir), tlsOpts)
		return filepath.Join(dir, "sb.sock")
	}
	script := func(t *testing.T, sock string) []string {
		sslPort, tcpPort := freePort(t), freePort(t)
		runTool(t, "ovsdb-client", "--timeout=5", "transact", "unix:"+sock, fmt.Sprintf(rbacSetup, sslPort, tcpPort))
		if !waitListening(sslPort, true) || !waitListening(tcpPort, true) {
			t.Fatal("role connections not opened")
		}
		var out []string
		run := func(who string, args ...string) {
			for _, op := range rbacOps {
				cmd := exec.Command("ovsdb-client", append(append([]string{"--timeout=5"}, args...), `["OVN_Southbound",`+op+`]`)...)
				b, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("ovsdb-client transact %s: %v: %s", op, err, b)
				}
				out = append(out, who+": "+uuidRE.ReplaceAllString(strings.TrimSpace(string(b)), "<uuid>"))
			}
		}
		run("hv1", "--private-key="+hv1Key, "--certificate="+hv1Cert, "--ca-cert="+ca, "transact", fmt.Sprintf("ssl:127.0.0.1:%d", sslPort))
		run("no certificate", "transact", fmt.Sprintf("tcp:127.0.0.1:%d", tcpPort))
		return out
	}
	got := script(t, startGovn(t, t.TempDir()))
	want := script(t, startReal(t, t.TempDir()))
	if !slices.Equal(got, want) {
		t.Errorf("replies differ\ngovn:\n%s\novsdb-server:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Sanity: the chassis could write its own rows and was refused others.
	joined := strings.Join(want, "\n")
	for _, s := range []string{`hv1: [{"count":1}]`, `prohibit row insertion into table \"Encap\"`, `client \"(null)\"`} {
		if !strings.Contains(joined, s) {
			t.Errorf("ovsdb-server replies lack %s:\n%s", s, joined)
		}
	}
}
