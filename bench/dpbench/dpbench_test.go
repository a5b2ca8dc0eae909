package dpbench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	if ok, err := Internal(context.Background(), os.Args[1:]); ok {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestBenchSmoke runs the whole bench briefly: OVS and govn must each move
// UDP and TCP between the namespaces, and the table must print.
func TestBenchSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("runs OVS and govn for about 15 s")
	}
	if err := Check(); err != nil {
		t.Skip(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := Run(ctx, Options{Self: self, Duration: time.Second, Rounds: 1})
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]Figures{"ovs": r.OVS, "govn": r.Govn, "govn+offloads": r.GovnOffload} {
		if f.UDPPacketsPerSec <= 0 || f.TCPMbitPerSec <= 0 {
			t.Errorf("%s moved nothing: %+v", name, f)
		}
	}
	var b strings.Builder
	r.WriteTable(&b)
	t.Log("\n" + b.String())
	if !strings.Contains(b.String(), "64-byte UDP received") {
		t.Error("table lacks the UDP row")
	}
}
