package conntrack

import (
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the expected output of testdata/*.txt")

// TestScripts runs the transcripts in testdata/: each "> command" line is
// followed by the output it must produce; "go test -run TestScripts -args
// -update" rewrites the outputs. Commands:
//
//	> [t=DUR] zone=N [commit] [force] [nat] [snat=A[-B][:P-Q]] [dnat=A[-B][:P-Q]] [mark=V]
//	  PROTO SRC[:PORT] > DST[:PORT] [flags=SAFRP] [seq=N] [ack=N] [win=N] [len=N] [type=N] [code=N] [id=N] [quote]
//	> dump ZONE
//	> expire DUR
//	> flush ZONE
//
// t= advances the clock before the packet; quote puts the previous packet,
// as the tracker left it, inside an ICMP error. A packet's output is its
// ct_state, the reason when invalid, and the packet's addresses after
// translation when they changed.
func TestScripts(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	if len(files) == 0 {
		t.Fatal("no scripts in testdata")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			tr := newTracker(t, Config{})
			var out strings.Builder
			lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
			var st scriptState
			for i := 0; i < len(lines); i++ {
				line := lines[i]
				if !strings.HasPrefix(line, "> ") {
					out.WriteString(line + "\n")
					continue
				}
				got := runScriptLine(t, tr, strings.TrimPrefix(line, "> "), &st)
				var want []string
				for i+1 < len(lines) && !strings.HasPrefix(lines[i+1], "> ") && !strings.HasPrefix(lines[i+1], "#") && lines[i+1] != "" {
					i++
					want = append(want, lines[i])
				}
				out.WriteString(line + "\n")
				for _, g := range got {
					out.WriteString(g + "\n")
				}
				if !*update && strings.Join(got, "\n") != strings.Join(want, "\n") {
					t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", file, i+1, line, strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
			}
			if *update {
				if err := os.WriteFile(file, []byte(out.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// scriptState is what a transcript carries from line to line.
type scriptState struct {
	now  time.Duration
	last []byte // the previous packet, as translated
}

func runScriptLine(t *testing.T, tr *Tracker, cmd string, st *scriptState) []string {
	t.Helper()
	now := &st.now
	f := strings.Fields(cmd)
	switch f[0] {
	case "dump":
		z, _ := strconv.Atoi(f[1])
		var out []string
		tr.Dump(uint16(z), func(e Entry) bool { out = append(out, e.String()); return true })
		if out == nil {
			out = []string{"(empty)"}
		}
		return out
	case "expire":
		d, err := time.ParseDuration(f[1])
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		*now += d
		return []string{fmt.Sprintf("expired %d", tr.Expire(*now))}
	case "flush":
		z, _ := strconv.Atoi(f[1])
		tr.Flush(uint16(z))
		return []string{"flushed"}
	}
	var (
		p   Params
		s   spec
		dir int
	)
	endpoint := func(v string) (string, uint16) {
		ap, err := netip.ParseAddrPort(v)
		if err == nil {
			return ap.Addr().String(), ap.Port()
		}
		return v, 0
	}
	natRange := func(v string) *NATRange {
		r := &NATRange{}
		addrs, ports, _ := strings.Cut(v, ":")
		if strings.HasPrefix(v, "[") {
			addrs, ports, _ = strings.Cut(strings.TrimPrefix(v, "["), "]:")
		}
		lo, hi, _ := strings.Cut(addrs, "-")
		r.MinAddr = netip.MustParseAddr(lo)
		if hi != "" {
			r.MaxAddr = netip.MustParseAddr(hi)
		}
		if ports != "" {
			plo, phi, _ := strings.Cut(ports, "-")
			a, _ := strconv.Atoi(plo)
			b, _ := strconv.Atoi(phi)
			r.MinPort, r.MaxPort = uint16(a), uint16(max(a, b))
		}
		return r
	}
	for _, w := range f {
		k, v, _ := strings.Cut(w, "=")
		num := func() uint32 {
			n, err := strconv.ParseUint(v, 10, 32)
			if err != nil {
				t.Fatalf("%s: bad number %q", cmd, w)
			}
			return uint32(n)
		}
		switch {
		case k == "t":
			d, _ := time.ParseDuration(v)
			*now += d
		case k == "zone":
			p.Zone = uint16(num())
		case k == "commit":
			p.Commit = true
		case k == "force":
			p.Force = true
		case k == "nat":
			if p.NAT == nil {
				p.NAT = &NAT{}
			}
		case k == "snat" || k == "dnat":
			if p.NAT == nil {
				p.NAT = &NAT{}
			}
			if k == "snat" {
				p.NAT.Src = natRange(v)
			} else {
				p.NAT.Dst = natRange(v)
			}
		case k == "mark":
			p.Mark, p.MarkMask = num(), ^uint32(0)
		case k == "tcp" || k == "udp" || k == "icmp" || k == "icmp6":
			s.proto = map[string]uint8{"tcp": protoTCP, "udp": protoUDP, "icmp": protoICMP, "icmp6": protoICMPv6}[k]
		case k == ">":
			dir = 1
		case k == "flags":
			for _, c := range v {
				s.flags |= map[rune]uint8{'S': tcpSYN, 'A': tcpACK, 'F': tcpFIN, 'R': tcpRST, 'P': tcpPSH}[c]
			}
		case k == "seq":
			s.seq = num()
		case k == "ack":
			s.ack = num()
		case k == "win":
			s.win = uint16(num())
		case k == "len":
			s.payload = int(num())
		case k == "type":
			s.icmpType = uint8(num())
		case k == "code":
			s.icmpCode = uint8(num())
		case k == "id":
			s.icmpID = uint16(num())
		case k == "quote":
			s.quote = st.last
		case strings.ContainsAny(k, ".:") && dir == 0:
			s.src, s.sport = endpoint(w)
		case strings.ContainsAny(k, ".:"):
			s.dst, s.dport = endpoint(w)
		default:
			t.Fatalf("%s: unknown word %q", cmd, w)
		}
	}
	pkt := build(s)
	res := tr.Process(pkt, 0, p, *now)
	checkChecksums(t, pkt) // translated or not, they must stay right
	st.last = pkt
	out := res.State.String()
	if res.Reason != ReasonNone {
		out += " (" + res.Reason.String() + ")"
	}
	src, dst, sport, dport := addrs(pkt)
	if s.proto == protoICMP || s.proto == protoICMPv6 {
		l4, _, _, _ := l4Layout(pkt)
		id := uint16(l4[4])<<8 | uint16(l4[5])
		if src.String() != s.src || dst.String() != s.dst || id != s.icmpID {
			out += fmt.Sprintf(" -> %s > %s id=%d", src, dst, id)
		}
	} else if src.String() != s.src || dst.String() != s.dst || sport != s.sport || dport != s.dport {
		out += fmt.Sprintf(" -> %s > %s", netip.AddrPortFrom(src, sport), netip.AddrPortFrom(dst, dport))
	}
	return []string{out}
}
