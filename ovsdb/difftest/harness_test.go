package difftest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/govn/govn/schema"
)

// Kinds of OVSDB server a test can start.
const (
	kindReal = "ovsdb-server"
	kindGovn = "govn"
)

// target is the kind of server under test, compared with the real one.
func target() string {
	if k := os.Getenv("GOVN_DIFFTEST_TARGET"); k != "" {
		return k
	}
	return kindGovn
}

// need skips the test unless every named program is installed.
func need(t testing.TB, progs ...string) {
	t.Helper()
	for _, p := range progs {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("%s not installed", p)
		}
	}
}

// govnBinary builds cmd/govn once per test binary.
var govnBuild struct {
	once sync.Once
	path string
	err  error
	dir  string
}

func govnBinary(t testing.TB) string {
	t.Helper()
	govnBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "govn-difftest-bin")
		if err != nil {
			govnBuild.err = err
			return
		}
		govnBuild.dir = dir
		govnBuild.path = filepath.Join(dir, "govn")
		out, err := exec.Command("go", "build", "-buildvcs=false", "-o", govnBuild.path, "github.com/govn/govn/cmd/govn").CombinedOutput()
		if err != nil {
			govnBuild.err = fmt.Errorf("go build ./cmd/govn: %v\n%s", err, out)
		}
	})
	if govnBuild.err != nil {
		t.Fatal(govnBuild.err)
	}
	return govnBuild.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if govnBuild.dir != "" {
		os.RemoveAll(govnBuild.dir)
	}
	os.Exit(code)
}

// schemaFile writes the embedded schema short (nb, sb, vswitch) into dir,
// so both servers serve the very same schema.
func schemaFile(t *testing.T, dir, short string) string {
	t.Helper()
	b, err := schema.Lookup(short)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, short+".ovsschema")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// runEnv is the environment for every OVS/OVN program a test runs: all
// run, log and database directories point into the test's own directory.
func runEnv(dir string) []string {
	env := os.Environ()
	for _, v := range []string{"OVS_RUNDIR", "OVS_LOGDIR", "OVS_DBDIR", "OVN_RUNDIR", "OVN_LOGDIR", "OVN_DBDIR"} {
		env = append(env, v+"="+dir)
	}
	return append(env, "OVN_NB_DB=", "OVN_SB_DB=")
}

// dbServer is one running OVSDB server on a unix socket.
type dbServer struct {
	kind string
	dir  string // its private run directory
	file string // the database file
	sock string
	cmd  *exec.Cmd
	exit chan struct{}
}

// remote is the address clients use.
func (s *dbServer) remote() string { return "unix:" + s.sock }

// startServer creates a database file from the embedded schema short and
// serves it with a server of the given kind, stopped in t.Cleanup.
func startServer(t *testing.T, kind, short string) *dbServer {
	t.Helper()
	b, err := schema.Lookup(short)
	if err != nil {
		t.Fatal(err)
	}
	return startServerSchema(t, kind, short, b)
}

// startServerSchema is startServer for the schema text given, named
// short in file names.
func startServerSchema(t *testing.T, kind, short string, schemaText []byte) *dbServer {
	t.Helper()
	dir, err := os.MkdirTemp("", "difftest-"+short+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s := &dbServer{kind: kind, dir: dir, file: filepath.Join(dir, short+".db"), sock: filepath.Join(dir, short+".sock")}
	sf := filepath.Join(dir, short+".ovsschema")
	if err := os.WriteFile(sf, schemaText, 0o644); err != nil {
		t.Fatal(err)
	}
	switch kind {
	case kindReal:
		need(t, "ovsdb-tool", "ovsdb-server")
		if out, err := exec.Command("ovsdb-tool", "create", s.file, sf).CombinedOutput(); err != nil {
			t.Fatalf("ovsdb-tool create: %v\n%s", err, out)
		}
	case kindGovn:
		if out, err := exec.Command(govnBinary(t), "db", "create", s.file, sf).CombinedOutput(); err != nil {
			t.Fatalf("govn db create: %v\n%s", err, out)
		}
	default:
		t.Fatalf("unknown server kind %q", kind)
	}
	s.start(t)
	return s
}

// start runs the server on its existing file; restart after a kill.
func (s *dbServer) start(t *testing.T) {
	t.Helper()
	var cmd *exec.Cmd
	switch s.kind {
	case kindReal:
		cmd = exec.Command("ovsdb-server", "--no-chdir",
			"--remote=punix:"+s.sock,
			"--unixctl="+filepath.Join(s.dir, "ctl"),
			"--pidfile="+filepath.Join(s.dir, "pid"),
			"--log-file="+filepath.Join(s.dir, "log"),
			s.file)
	case kindGovn:
		cmd = exec.Command(govnBinary(t), "db",
			"--remote=punix:"+s.sock,
			"--unixctl="+filepath.Join(s.dir, "ctl"),
			"--pidfile="+filepath.Join(s.dir, "pid"),
			s.file)
		cmd.Stderr = newLogFile(t, filepath.Join(s.dir, "log"))
	}
	cmd.Env = runEnv(s.dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", s.kind, err)
	}
	s.cmd = cmd
	s.exit = make(chan struct{})
	go func() { cmd.Wait(); close(s.exit) }()
	t.Cleanup(func() { s.kill() })
	waitSocket(t, s.sock, s.exit, func() string { return s.logTail() })
}

// kill ends the server with SIGKILL and waits for it.
func (s *dbServer) kill() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	<-s.exit
	s.cmd = nil
}

func (s *dbServer) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

func newLogFile(t testing.TB, path string) *os.File {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// waitSocket waits until a unix socket accepts connections.
func waitSocket(t testing.TB, sock string, exited <-chan struct{}, log func() string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			t.Fatalf("server exited before listening on %s:\n%s", sock, log())
		default:
		}
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("nothing listens on %s after 20s:\n%s", sock, log())
}

// daemon is a long-running OVN program (ovn-northd) stopped in t.Cleanup.
func startDaemon(t *testing.T, dir string, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = runEnv(dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	return cmd
}

// run runs one command with a timeout and returns a transcript entry: the
// command, its stdout and stderr, and a non-zero exit status.
func run(ctx context.Context, dir string, name string, args ...string) string {
	entry, _ := runOut(ctx, dir, name, args...)
	return entry
}

// runOut is run that also returns the command's standard output alone.
func runOut(ctx context.Context, dir string, name string, args ...string) (entry, stdout string) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = runEnv(dir)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var b strings.Builder
	// The --db argument names a per-test socket; leave it out.
	shown := slices.DeleteFunc(slices.Clone(args), func(a string) bool { return strings.HasPrefix(a, "--db=") })
	fmt.Fprintf(&b, "$ %s %s\n%s", name, strings.Join(shown, " "), out.String())
	if errb.Len() > 0 {
		fmt.Fprintf(&b, "[stderr] %s", errb.String())
	}
	if err != nil {
		fmt.Fprintf(&b, "[exit] %v\n", err)
	}
	return b.String(), out.String()
}

var uuidRE = regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`)

// uuidSetRE matches a bracketed list of two or more UUIDs, as the tools
// print set columns: sorted by UUID value, so in an order that differs
// between two databases.
var uuidSetRE = regexp.MustCompile(`\[(?:` + uuidRE.String() + `, )+` + uuidRE.String() + `\]`)

// normalizedSetRE matches such a list after normalization.
var normalizedSetRE = regexp.MustCompile(`\[(?:<\d+>, )+<\d+>\]`)

// normalizeUUIDs replaces each distinct UUID by <N>, numbered in order of
// first appearance, so equal histories give equal texts. A UUID's
// appearances inside multi-element sets count only if it appears nowhere
// else, since set order depends on the UUIDs' values; and the members of
// each set are then listed in ascending <N> order.
func normalizeUUIDs(text string) string {
	seen := map[string]int{}
	number := func(u string) int {
		u = strings.ToLower(u)
		n, ok := seen[u]
		if !ok {
			n = len(seen)
			seen[u] = n
		}
		return n
	}
	masked := uuidSetRE.ReplaceAllStringFunc(text, func(set string) string { return strings.Repeat(" ", len(set)) })
	for _, u := range uuidRE.FindAllString(masked, -1) {
		number(u)
	}
	out := uuidRE.ReplaceAllStringFunc(text, func(u string) string { return fmt.Sprintf("<%d>", number(u)) })
	return normalizedSetRE.ReplaceAllStringFunc(out, func(set string) string {
		members := strings.Split(set[1:len(set)-1], ", ")
		slices.SortFunc(members, func(a, b string) int {
			var x, y int
			fmt.Sscanf(a, "<%d>", &x)
			fmt.Sscanf(b, "<%d>", &y)
			return x - y
		})
		return "[" + strings.Join(members, ", ") + "]"
	})
}

var (
	logTimeRE     = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z\|\d+\|`)
	lastIDRE      = regexp.MustCompile(`last_id: ` + uuidRE.String())
	deleteRefRE   = regexp.MustCompile(`(cannot delete \w+ row )` + uuidRE.String())
	indexRowsRE   = regexp.MustCompile(`First row, with UUID (` + uuidRE.String() + `), ([^.]*)\.  Second row, with UUID (` + uuidRE.String() + `), ([^.]*)\.`)
	maskedRowText = "<a row>"
)

// normalizeNoise masks what legitimately differs between two runs or two
// server implementations: log timestamps and sequence numbers, and the
// transaction ids monitor_cond_since reports: govn gives every commit one
// so that clients can resume, whereas a standalone ovsdb-server repeats
// one id. Error objects are compared whole, ovsdb-server's "details" and
// "syntax" members included: the tools print them to people; but where an
// error names one of several rows that could be named, which one
// ovsdb-server names is the order of its hash table of rows, keyed by
// their random UUIDs, so the row is masked (a referenced row a delete
// matched, the two rows of an index-uniqueness error, whose order is
// made canonical).
func normalizeNoise(text string) string {
	text = logTimeRE.ReplaceAllString(text, "<time>|")
	text = lastIDRE.ReplaceAllString(text, "last_id: <txn-id>")
	text = deleteRefRE.ReplaceAllString(text, "${1}"+maskedRowText)
	return indexRowsRE.ReplaceAllStringFunc(text, func(s string) string {
		m := indexRowsRE.FindStringSubmatch(s)
		a, b := m[2], m[4]
		if a > b {
			a, b = b, a
		}
		return "First row, with UUID " + maskedRowText + ", " + a + ".  Second row, with UUID " + maskedRowText + ", " + b + "."
	})
}

// sortBlocks sorts the blank-line separated blocks of out (the records of
// "list" and "find"), which the tools print in hash order of row UUIDs:
// an order that differs between any two databases. Blocks are compared
// with their UUIDs masked.
func sortBlocks(out string) string {
	blocks := strings.Split(strings.TrimRight(out, "\n"), "\n\n")
	slices.SortStableFunc(blocks, func(a, b string) int {
		return strings.Compare(uuidRE.ReplaceAllString(a, "<uuid>"), uuidRE.ReplaceAllString(b, "<uuid>"))
	})
	return strings.Join(blocks, "\n\n") + "\n"
}

// sortLines sorts the lines of out, for outputs whose line order is hash
// order (the rows of a table dump, set members in --bare output).
func sortLines(out string) string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	slices.SortStableFunc(lines, func(a, b string) int {
		return strings.Compare(uuidRE.ReplaceAllString(a, "<uuid>"), uuidRE.ReplaceAllString(b, "<uuid>"))
	})
	return strings.Join(lines, "\n") + "\n"
}

// diffTranscripts fails t with the first differing lines of two
// transcripts, reference first.
func diffTranscripts(t *testing.T, what, ref, got string) {
	t.Helper()
	if dir := os.Getenv("GOVN_DIFFTEST_KEEP"); dir != "" {
		os.WriteFile(filepath.Join(dir, what+".ref"), []byte(ref), 0o644)
		os.WriteFile(filepath.Join(dir, what+".got"), []byte(got), 0o644)
	}
	if ref == got {
		return
	}
	re, ge := splitEntries(ref), splitEntries(got)
	var b strings.Builder
	differing := 0
	for i := 0; i < max(len(re), len(ge)); i++ {
		var r, g string
		if i < len(re) {
			r = re[i]
		}
		if i < len(ge) {
			g = ge[i]
		}
		if r == g {
			continue
		}
		differing++
		if differing > 12 {
			continue
		}
		rl, gl := strings.Split(r, "\n"), strings.Split(g, "\n")
		j := 0
		for j < len(rl) && j < len(gl) && rl[j] == gl[j] {
			j++
		}
		fmt.Fprintf(&b, "\n%s\n  %s: %s\n  %s: %s\n", clip(rl[0]), kindReal, clip(lineAt(rl, j)), target(), clip(lineAt(gl, j)))
	}
	t.Errorf("%s: %d of %d commands differ between %s and %s; the first line that differs in each:%s",
		what, differing, len(re), kindReal, target(), b.String())
}

// splitEntries splits a transcript into one entry per command.
func splitEntries(text string) []string {
	var entries []string
	for _, line := range strings.SplitAfter(text, "\n") {
		if strings.HasPrefix(line, "$ ") || len(entries) == 0 {
			entries = append(entries, "")
		}
		entries[len(entries)-1] += line
	}
	return entries
}

func lineAt(lines []string, i int) string {
	if i >= len(lines) {
		return "(nothing more)"
	}
	return lines[i]
}

// clip shortens a line for an error message.
func clip(s string) string {
	if len(s) > 240 {
		return s[:240] + "..."
	}
	return s
}

// readLines collects lines from r into a channel, for monitor output.
func readLines(r *bufio.Reader) <-chan string {
	ch := make(chan string, 1000)
	go func() {
		defer close(ch)
		for {
			line, err := r.ReadString('\n')
			if line != "" {
				ch <- line
			}
			if err != nil {
				return
			}
		}
	}()
	return ch
}

// sortTree sorts the sibling lines of an indented tree, with their
// subtrees, recursively: "show" commands print switches, routers and their
// ports in hash order.
func sortTree(out string) string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	var b strings.Builder
	for _, n := range parseTree(lines, 0) {
		b.WriteString(n)
	}
	return b.String()
}

// parseTree renders the nodes in lines (each a line indented by at least
// depth spaces, with the lines indented more beneath it) sorted, each as
// text ending in LF.
func parseTree(lines []string, depth int) []string {
	var nodes []string
	for i := 0; i < len(lines); {
		j := i + 1
		for j < len(lines) && indent(lines[j]) > indent(lines[i]) {
			j++
		}
		children := parseTree(lines[i+1:j], indent(lines[i])+1)
		nodes = append(nodes, lines[i]+"\n"+strings.Join(children, ""))
		i = j
	}
	slices.SortStableFunc(nodes, func(a, b string) int {
		return strings.Compare(uuidRE.ReplaceAllString(a, "<uuid>"), uuidRE.ReplaceAllString(b, "<uuid>"))
	})
	return nodes
}

func indent(line string) int { return len(line) - len(strings.TrimLeft(line, " ")) }

// sortLinesInBlocks sorts the rows within each blank-line separated block
// of out, keeping the blocks in order and each block's first three lines
// (table name, headings, rule): a table-format monitor prints one block
// per table of an update, its rows in hash order.
func sortLinesInBlocks(out string) string {
	blocks := strings.Split(strings.TrimRight(out, "\n"), "\n\n")
	for i, b := range blocks {
		lines := strings.Split(b, "\n")
		if len(lines) > 3 {
			blocks[i] = strings.Join(lines[:3], "\n") + "\n" + strings.TrimSuffix(sortLines(strings.Join(lines[3:], "\n")), "\n")
		}
	}
	return strings.Join(blocks, "\n\n") + "\n"
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}
