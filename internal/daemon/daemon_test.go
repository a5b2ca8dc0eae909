package daemon

import (
	"os"
	"strings"
	"testing"
)

// helperEnv makes the test binary act as the daemon child instead of
// running tests: "ready" reports readiness, "fail" reports an error, "die"
// exits without a word.
const helperEnv = "GOVN_DAEMON_TEST_HELPER"

func TestMain(m *testing.M) {
	if path := os.Getenv(pidfileHelperEnv); path != "" {
		os.Exit(holdPidfile(path))
	}
	mode := os.Getenv(helperEnv)
	if mode == "" {
		os.Exit(m.Run())
	}
	n := ChildNotifier(os.Environ())
	if n == nil {
		os.Exit(3) // not started by Detach
	}
	switch mode {
	case "ready":
		n.Ready()
		n.Fail(nil) // ignored after Ready
	case "fail":
		n.Fail(errFromHelper)
	case "die":
		os.Exit(1)
	}
	os.Exit(0)
}

var errFromHelper = stringError("opening nb.db: permission denied")

type stringError string

func (e stringError) Error() string { return string(e) }

func TestDetach(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mode    string
		wantErr string // "" for success
	}{
		{"ready", ""},
		{"fail", "opening nb.db: permission denied"},
		{"die", "exited before it was ready"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			env := append(os.Environ(), helperEnv+"="+tc.mode, childEnv+"=99")
			err := Detach(exe, nil, env)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Detach: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Detach: %v, want an error with %q", err, tc.wantErr)
			}
		})
	}
}

func TestIsChild(t *testing.T) {
	if IsChild([]string{"A=1", "GOVN_DAEMON_READY_FDX=3"}) {
		t.Error("IsChild without the variable")
	}
	if !IsChild([]string{"A=1", childEnv + "=3"}) {
		t.Error("!IsChild with the variable")
	}
	if got := withoutChildEnv([]string{childEnv + "=3", "B=2"}); len(got) != 1 || got[0] != "B=2" {
		t.Errorf("withoutChildEnv: %q", got)
	}
}

func TestLookupUser(t *testing.T) {
	c, err := LookupUser("root:root")
	if err != nil {
		t.Skipf("no root user here: %v", err)
	}
	if c.UID != 0 || c.GID != 0 {
		t.Errorf("root:root = %+v", c)
	}
	for _, bad := range []string{"", ":root", "no-such-user-govn", "root:no-such-group-govn"} {
		if _, err := LookupUser(bad); err == nil {
			t.Errorf("LookupUser(%q): no error", bad)
		}
	}
}

// FuzzLookupUser checks that no --user spec crashes the lookup.
func FuzzLookupUser(f *testing.F) {
	for _, s := range []string{"root", "root:root", ":", "a:b:c", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		_, _ = LookupUser(spec)
	})
}
