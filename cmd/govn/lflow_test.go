package main

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/govn/govn/lflow"
)

// TestLflowCheck runs "govn lflow check" on the reference Southbound, on
// input without flows (a wrong file) and on a flow that does not parse.
func TestLflowCheck(t *testing.T) {
	ref, err := os.ReadFile("../../testdata/reference/lflows-a.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, in string
		wantErr  error
		wantOut  string
	}{
		{"reference", string(ref), nil, "687 parsed, 0 failed\n"},
		{"empty", "", lflow.ErrNoFlows, ""},
		{"wrong file", "#!/bin/sh\necho hello\n", lflow.ErrNoFlows, ""},
		{"bad flow", "  table=0 (ls_in_a), priority=1, match=(eth.type != 0x800), action=(next;)\n", errFailed, "0 parsed, 1 failed\n"},
	} {
		var out strings.Builder
		err := lflowCheck(strings.NewReader(tc.in), &out, newCLIEnv(), false, false)
		if !errors.Is(err, tc.wantErr) || !strings.HasSuffix(out.String(), tc.wantOut) {
			t.Errorf("%s: got error %v and output ending %q, want %v and %q", tc.name, err, out.String()[max(0, out.Len()-100):], tc.wantErr, tc.wantOut)
		}
	}
}
