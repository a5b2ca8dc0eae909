package ovsdbbench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeServer answers each transact request on a unix socket with reply(id).
func fakeServer(t *testing.T, reply func(id json.RawMessage) string) string {
	t.Helper()
	sock := filepath.Join(shortTempDir(t), "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				dec := json.NewDecoder(bufio.NewReader(c))
				for {
					var m struct {
						ID     json.RawMessage `json:"id"`
						Method string          `json:"method"`
					}
					if dec.Decode(&m) != nil {
						return
					}
					if m.Method == "transact" {
						fmt.Fprint(c, reply(m.ID))
					}
				}
			}()
		}
	}()
	return sock
}

func TestRunInsertsCountsReplies(t *testing.T) {
	sock := fakeServer(t, func(id json.RawMessage) string {
		return `{"id":` + string(id) + `,"result":[{"uuid":["uuid","1d8ebb5c-1a5c-4d4e-9b7a-3b6f0f7f2a10"]}],"error":null}`
	})
	_, n, err := runInserts(sock, 4, 1000, 10*time.Second, false)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1000 {
		t.Errorf("%d transactions answered, want 1000", n)
	}
}

func TestRunInsertsReportsFailures(t *testing.T) {
	for name, reply := range map[string]string{
		"operation error": `,"result":[{"error":"constraint violation","details":"x"}],"error":null}`,
		"request error":   `,"result":null,"error":{"error":"unknown database"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			sock := fakeServer(t, func(id json.RawMessage) string { return `{"id":` + string(id) + reply })
			_, _, err := runInserts(sock, 2, 10, 10*time.Second, true)
			if err == nil || !strings.Contains(err.Error(), "transaction failed") {
				t.Fatalf("err = %v, want a failed transaction", err)
			}
		})
	}
}
