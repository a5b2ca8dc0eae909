package difftest

import "testing"

func TestNormalizeUUIDs(t *testing.T) {
	a := "11111111-1111-1111-1111-111111111111"
	b := "22222222-2222-2222-2222-222222222222"
	c := "33333333-3333-3333-3333-333333333333"
	tests := []struct{ in, want string }{
		{"x " + a + " y " + b + " " + a, "x <0> y <1> <0>"},
		// Set order (by UUID value) must not matter...
		{"ports: [" + a + ", " + b + "]\n_uuid: " + b + "\n_uuid: " + a, "ports: [<0>, <1>]\n_uuid: <0>\n_uuid: <1>"},
		{"ports: [" + b + ", " + a + "]\n_uuid: " + b + "\n_uuid: " + a, "ports: [<0>, <1>]\n_uuid: <0>\n_uuid: <1>"},
		// ...and a UUID seen only in a set is numbered there.
		{"[" + c + ", " + a + "] " + a, "[<0>, <1>] <0>"},
		{"single [" + a + "]", "single [<0>]"},
	}
	for _, tt := range tests {
		if got := normalizeUUIDs(tt.in); got != tt.want {
			t.Errorf("normalizeUUIDs(%q) =\n%q, want\n%q", tt.in, got, tt.want)
		}
	}
}

func TestSortBlocks(t *testing.T) {
	in := "name: b\n_uuid: 11111111-1111-1111-1111-111111111111\n\nname: a\n_uuid: 22222222-2222-2222-2222-222222222222\n"
	want := "name: a\n_uuid: 22222222-2222-2222-2222-222222222222\n\nname: b\n_uuid: 11111111-1111-1111-1111-111111111111\n"
	if got := sortBlocks(in); got != want {
		t.Errorf("sortBlocks =\n%s\nwant\n%s", got, want)
	}
}

func TestSortTree(t *testing.T) {
	in := "switch b\n    port 2\n        type: x\n    port 1\nswitch a\n    port 3\n"
	want := "switch a\n    port 3\nswitch b\n    port 1\n    port 2\n        type: x\n"
	if got := sortTree(in); got != want {
		t.Errorf("sortTree =\n%s\nwant\n%s", got, want)
	}
}
