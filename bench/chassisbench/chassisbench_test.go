package chassisbench

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/govn/govn/internal/hvtest"
)

// TestBenchSmoke runs the port-up bench with 3 ports on each side: every
// port must come up on govn chassis and on the real OVN hypervisor, and
// the table must print.
func TestBenchSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two clusters in namespaces (about 10 s)")
	}
	if why := hvtest.Available(); why != "" {
		t.Skip(why)
	}
	for _, b := range []string{"ovn-northd", "ovsdb-server", "ovs-vswitchd", "ovn-controller"} {
		if _, err := exec.LookPath(b); err != nil {
			t.Skipf("needs %s", b)
		}
	}
	govn := buildGovn(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var logs strings.Builder
	r, err := Run(ctx, Options{Govn: []string{govn, "chassis"}, Ports: 3, OVN: true,
		Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	t.Log("\n" + logs.String())
	if err != nil {
		t.Fatal(err)
	}
	if r.OVN == nil {
		t.Fatalf("no OVN side: %s", r.OVNSkipped)
	}
	for _, f := range []Figures{r.Govn, *r.OVN} {
		if f.Ports != 3 || f.Failed != 0 || len(f.SamplesMs) != 3 {
			t.Errorf("%s: %d ports up, %d failed, samples %v; want all 3 up", f.Chassis, f.Ports, f.Failed, f.SamplesMs)
		}
		if f.P50Ms <= 0 || f.P90Ms < f.P50Ms || f.AddPortP50Ms <= 0 {
			t.Errorf("%s: p50 %v ms, p90 %v ms, add-port p50 %v ms", f.Chassis, f.P50Ms, f.P90Ms, f.AddPortP50Ms)
		}
	}
	var b strings.Builder
	r.WriteTable(&b)
	t.Log("\n" + b.String())
	for _, want := range []string{"p50", "p90", "govn/OVN", "goal: govn p50"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q", want)
		}
	}
}

// TestBenchFloodSmoke runs the port-up bench on govn chassis alone with
// 2 ports under a flood of 2,000 ARP misses a second: the flooder sends,
// the ports come up, and the report and table say there was a flood.
func TestBenchFloodSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a cluster in namespaces (about 10 s)")
	}
	if why := hvtest.Available(); why != "" {
		t.Skip(why)
	}
	if _, err := exec.LookPath("ovn-northd"); err != nil {
		t.Skip("needs ovn-northd")
	}
	govn := buildGovn(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var logs strings.Builder
	const rate = 2000
	r, err := Run(ctx, Options{Govn: []string{govn, "chassis"}, Ports: 2, Flood: rate,
		Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	t.Log("\n" + logs.String())
	if err != nil {
		t.Fatal(err)
	}
	if f := r.Govn; f.Ports != 2 || f.Failed != 0 {
		t.Errorf("%d ports up, %d failed under the flood; want both up", f.Ports, f.Failed)
	}
	// The flood runs from before the warm-up port to the last port's
	// reply: a few tenths of a second at least (three ports' worth; CI
	// saw 682 frames in 0.7 s), so a tenth of a second's worth proves it
	// ran.
	if sent := r.FloodSent["govn chassis"]; r.Flood != rate || sent < rate/10 {
		t.Errorf("flood %d a second, sent %v; want %d a second and at least %d sent", r.Flood, r.FloodSent, rate, rate/10)
	}
	var b strings.Builder
	r.WriteTable(&b)
	t.Log("\n" + b.String())
	if !strings.Contains(b.String(), "under a flood of 2000 ARP misses a second") {
		t.Errorf("table does not mention the flood:\n%s", b.String())
	}
}

// buildGovn builds ./cmd/govn into the test's temporary directory; it
// skips the test without a go command.
func buildGovn(t *testing.T) string {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		goCmd = "/usr/local/go/bin/go"
		if _, err := os.Stat(goCmd); err != nil {
			t.Skip("needs the go command to build govn")
		}
	}
	bin := filepath.Join(t.TempDir(), "govn")
	if out, err := exec.Command(goCmd, "build", "-o", bin, "github.com/govn/govn/cmd/govn").CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/govn: %v\n%s", err, out)
	}
	return bin
}

func TestFirstReply(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		want      time.Time
		ok        bool
	}{
		{"reply", "PING 10.0.0.2 (10.0.0.2) 56(84) bytes of data.\n" +
			"[1764633600.012345] 64 bytes from 10.0.0.2: icmp_seq=7 ttl=64 time=0.4 ms\n" +
			"[1764633601.5] 64 bytes from 10.0.0.2: icmp_seq=8 ttl=64 time=0.4 ms\n",
			time.Unix(1764633600, 12345000), true},
		{"none", "PING 10.0.0.2 (10.0.0.2) 56(84) bytes of data.\n\n--- 10.0.0.2 ping statistics ---\n" +
			"1000 packets transmitted, 0 received, 100% packet loss, time 5000ms\n", time.Time{}, false},
		{"error line is no reply", "[1764633600.1] From 10.0.0.1 icmp_seq=1 Destination Host Unreachable\n", time.Time{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := firstReply([]byte(tc.out))
			if ok != tc.ok || !got.Equal(tc.want) {
				t.Errorf("firstReply = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	var samples []time.Duration
	for _, m := range []int{50, 10, 40, 20, 30, 100, 90, 80, 70, 60} {
		samples = append(samples, time.Duration(m)*time.Millisecond)
	}
	var f Figures
	f.summarize(samples)
	want := Figures{Ports: 10, P50Ms: 50, P90Ms: 90, MinMs: 10, MaxMs: 100,
		SamplesMs: []float64{50, 10, 40, 20, 30, 100, 90, 80, 70, 60}}
	if !reflect.DeepEqual(f, want) {
		t.Errorf("summarize:\n got %+v\nwant %+v", f, want)
	}
	var none Figures
	none.summarize(nil)
	if none.Ports != 0 || none.P50Ms != 0 {
		t.Errorf("no samples: %+v", none)
	}
	if got := rank([]float64{7}, 90); got != 7 {
		t.Errorf("rank of one: %v", got)
	}
}

// TestTB: the adapter's Fatal and Skip end the work with an error,
// cleanups run last first and see the failure, Error does not stop.
func TestTB(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	var order []string
	err := withTB(log, func(tb *tb) {
		tb.Cleanup(func() { order = append(order, "first") })
		tb.Cleanup(func() {
			order = append(order, "second")
			if !tb.Failed() {
				t.Error("cleanup does not see the failure")
			}
		})
		tb.Fatalf("broke %d", 1)
		order = append(order, "after Fatal")
	})
	if err == nil || err.Error() != "broke 1" {
		t.Errorf("error %v, want broke 1", err)
	}
	if strings.Join(order, ",") != "second,first" {
		t.Errorf("order %v", order)
	}

	err = withTB(log, func(tb *tb) { tb.Skipf("needs %s", "root") })
	if err == nil || !strings.Contains(err.Error(), "needs root") {
		t.Errorf("skip: %v", err)
	}

	reached := false
	err = withTB(log, func(tb *tb) {
		tb.Error("one")
		tb.Errorf("two")
		reached = true
	})
	if !reached || err == nil || err.Error() != "one" {
		t.Errorf("Error: reached %v, err %v", reached, err)
	}

	if err := withTB(log, func(*tb) {}); err != nil {
		t.Errorf("no failure: %v", err)
	}
	err = withTB(log, func(*tb) { panic(errors.New("bug")) })
	if err == nil || !strings.Contains(err.Error(), "bug") {
		t.Errorf("panic: %v", err)
	}
}
