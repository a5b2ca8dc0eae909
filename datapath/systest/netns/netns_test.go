package netns

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/govn/govn/datapath/systest/traffic"
)

func TestMain(m *testing.M) {
	RunToolIfAsked()
	os.Exit(m.Run())
}

// TestServe starts a TCP sink in a namespace and sends to it at once: Serve
// must not return before the sink accepts connections. Listening must not
// mistake another process or another port for the sink.
func TestServe(t *testing.T) {
	ns := New(t)
	ns.Serve(t, "tcp-sink", "127.0.0.1:5003")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	send, err := ns.Tool(ctx, "tcp-send", "127.0.0.1:5003", "100000")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := send.CombinedOutput(); err != nil {
		t.Fatalf("tcp-send right after Serve: %v\n%s", err, out)
	}

	if traffic.Listening(os.Getpid(), "tcp", 5003) {
		t.Error("Listening is true for the test process, which is in no made namespace")
	}
	idle, err := ns.Tool(ctx, "tcp-sink", "127.0.0.1:5004")
	if err != nil {
		t.Fatal(err)
	}
	if err := idle.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = idle.Wait() })
	for deadline := time.Now().Add(20 * time.Second); !traffic.Listening(idle.Process.Pid, "tcp", 5004); {
		if time.Now().After(deadline) {
			t.Fatal("second sink never listened")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if traffic.Listening(idle.Process.Pid, "tcp", 5005) || traffic.Listening(idle.Process.Pid, "udp", 5004) {
		t.Error("Listening reports a port or protocol nobody listens on")
	}
}
