package lflow

import (
	"bufio"
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

// readCases reads "name: text" lines, skipping blanks and # comments.
func readCases(t *testing.T, path string) [][2]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][2]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, text, ok := strings.Cut(line, ":")
		if !ok {
			t.Fatalf("%s: bad case line %q", path, line)
		}
		out = append(out, [2]string{strings.TrimSpace(name), strings.TrimSpace(text)})
	}
	return out
}

// checkGolden compares got with testdata/name, or rewrites it with -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := "testdata/" + name
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(want) != got {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(gl) || i < len(wl); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("%s differs at line %d:\n got: %.300s\nwant: %.300s\n(run with -update if the change is intended)", path, i+1, g, w)
			}
		}
	}
}

func TestNormalizeGolden(t *testing.T) {
	st := testSymtab(t)
	env := newTestEnv(t, st)
	var sb strings.Builder
	for _, c := range readCases(t, "testdata/normalize.txt") {
		e, err := st.ParseExpr(c[1])
		if err != nil {
			t.Fatalf("%s: %v", c[0], err)
		}
		nf, err := st.Normalize(e, env)
		if err != nil {
			t.Fatalf("%s: %v", c[0], err)
		}
		sb.WriteString("## " + c[0] + ": " + c[1] + "\n")
		sb.WriteString(nf.String())
		sb.WriteString("\n\n")
	}
	checkGolden(t, "normalize.golden", sb.String())
}
