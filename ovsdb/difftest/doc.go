// Package difftest holds govn's differential and durability tests of
// "govn db": the real OVN/OVS tools (ovn-nbctl, ovn-sbctl, ovsdb-client,
// ovn-northd, ovsdb-tool) run the same script against govn db and against
// the real ovsdb-server, and their outputs, with UUIDs normalized, must be
// identical. The package has no non-test code.
//
// The server under test is chosen by the environment variable
// GOVN_DIFFTEST_TARGET: "govn" (the default; the test builds ./cmd/govn)
// or "ovsdb-server", which compares the real server with itself and so
// checks the harness. Tests skip when the real binaries are missing.
package difftest
