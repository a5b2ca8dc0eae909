package jsonrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"syscall"
	"testing"
)

func BenchmarkReaderUpdate(b *testing.B) {
	msg := `{"id":null,"method":"update3","params":[["monid","OVN_Southbound"],"00000000-0000-0000-0000-000000000000",{"Logical_Flow":{"` +
		strings.Repeat(`0a6c8a34-7cfb-4ab7-8e80-2b0e2d5b2a1f":{"insert":{"match":"ip4.dst == 10.0.0.1 && tcp.dst == 80","actions":"next;","priority":100}},"`, 20) +
		`x":{"delete":null}}}]}`
	data := []byte(strings.Repeat(msg, 100))
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		r := NewReader(bytes.NewReader(data), 0)
		for {
			if _, err := r.Next(); err != nil {
				if err != io.EOF {
					b.Fatal(err)
				}
				break
			}
		}
	}
}

func BenchmarkCallRoundTrip(b *testing.B) { benchmarkCallRoundTrip(b, false) }

// BenchmarkCallRoundTripInline is BenchmarkCallRoundTrip with
// Options.InlineWrites on both ends.
func BenchmarkCallRoundTripInline(b *testing.B) { benchmarkCallRoundTrip(b, true) }

func benchmarkCallRoundTrip(b *testing.B, inline bool) {
	a, c := socketPair(b)
	server := NewConn(b.Context(), a, Options{Handler: echoServer, InlineWrites: inline})
	client := NewConn(b.Context(), c, Options{InlineWrites: inline})
	defer server.Close()
	defer client.Close()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := client.Call(b.Context(), "echo", []int{1}, nil); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkParseMessageLarge(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"id":7,"error":null,"result":{"Big":{`)
	for i := range 20000 {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`"0a6c8a34-7cfb-4ab7-8e80-2b0e2d5b2a1f":{"initial":{"name":"big-row-1234","n":1234,"external_ids":["map",[["index","1234"],["owner","bench"]]]}}`)
	}
	sb.WriteString(`}}}`)
	data := []byte(sb.String())
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := ParseMessage(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFanout sends one notification to each of 200 connections and
// waits until all have arrived: the shape of a monitor update.
func BenchmarkFanout(b *testing.B) { benchmarkFanout(b, false) }

// BenchmarkFanoutInline is BenchmarkFanout with Options.InlineWrites and
// the notifications queued first and flushed after, as the server does.
func BenchmarkFanoutInline(b *testing.B) { benchmarkFanout(b, true) }

func benchmarkFanout(b *testing.B, inline bool) {
	const n = 200
	var wg sync.WaitGroup
	servers := make([]*Conn, n)
	for i := range n {
		a, c := socketPair(b)
		servers[i] = NewConn(b.Context(), a, Options{InlineWrites: inline})
		client := NewConn(b.Context(), c, Options{Handler: func(context.Context, *Conn, *Message) { wg.Done() }})
		defer servers[i].Close()
		defer client.Close()
	}
	params := json.RawMessage(`["mon",{"T":{"0a6c8a34-7cfb-4ab7-8e80-2b0e2d5b2a1f":{"modify":{"seq":1}}}}]`)
	defer reportCPU(b)()
	for b.Loop() {
		wg.Add(n)
		for _, s := range servers {
			var err error
			if inline {
				err = s.QueueNotification("update2", params)
			} else {
				err = s.Notify("update2", params)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		if inline {
			for _, s := range servers {
				s.Flush()
			}
		}
		wg.Wait()
	}
}

// reportCPU starts counting the process's CPU time (user and system); the
// returned function reports it per operation as cpu-ns/op, a figure that
// varies less than wall time on a machine shared with other work.
func reportCPU(b *testing.B) func() {
	var start syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &start)
	return func() {
		var end syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &end)
		ns := func(r *syscall.Rusage) int64 { return r.Utime.Nano() + r.Stime.Nano() }
		b.ReportMetric(float64(ns(&end)-ns(&start))/float64(b.N), "cpu-ns/op")
	}
}
