package lflow

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestCheckListingCorpus(t *testing.T) {
	st := testSymtab(t)
	f, err := os.Open("../testdata/reference/lflows-a.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out strings.Builder
	res, err := st.CheckListing(f, &out, CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Parsed != 687 || res.Failed != 0 || out.String() != "687 parsed, 0 failed\n" {
		t.Errorf("got %+v and output %q", res, out.String())
	}
}

func TestCheckListingFailures(t *testing.T) {
	st := testSymtab(t)
	listing := `Datapath: "sw0" (5e4d2c3a-0000-0000-0000-000000000000)  Pipeline: ingress
  table=0 (ls_in_a            ), priority=100  , match=(tcp.dst == 80), action=(next;)
  table=1 (ls_in_b            ), priority=100  , match=(tcp.dst === 80), action=(next;)
  table=2 (ls_in_c            ), priority=100  , match=(ip4), action=(frob;)
  table=3 (ls_in_d            ), priority=100  , match=(ip4.src == $nope), action=(next;)
  table=x garbage
`
	var out strings.Builder
	res, err := st.CheckListing(strings.NewReader(listing), &out, CheckOptions{Normalize: true, Env: &mapEnv{}})
	if err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"line 6: bad table number",
		"line 3: match: at offset 10: expected a constant, found \"=\"",
		"line 4: actions: at offset 0: unknown action \"frob\"",
		"line 5: not normalized: unknown address set $nope",
		"    eth.type == {0x800, 0x86dd} && ip.proto == 6 && tcp.dst == 80",
		"1 matches not normalized",
		"2 parsed, 3 failed\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if res.Parsed != 2 || res.Failed != 3 || res.Unresolved != 1 {
		t.Errorf("got %+v", res)
	}
}

func TestCheckListingNoFlows(t *testing.T) {
	st := testSymtab(t)
	for _, in := range []string{
		"",
		"\n\n",
		"Datapath: \"sw0\" (5e4d2c3a-0000-0000-0000-000000000000)  Pipeline: ingress\n",
		"{\"name\": \"not a listing\"}\n",
		"_uuid : 0\nactions : \"next;\"\nmatch : \"1\"\n", // ovn-sbctl list, not lflow-list
	} {
		var out strings.Builder
		_, err := st.CheckListing(strings.NewReader(in), &out, CheckOptions{})
		if !errors.Is(err, ErrNoFlows) || out.Len() != 0 {
			t.Errorf("%q: got error %v and output %q, want ErrNoFlows and nothing", in, err, out.String())
		}
	}
}

func TestCheckListingCompile(t *testing.T) {
	st, c := testCompiler(t)
	env := newTestEnv(t, st)
	env.autoKeys = true
	f, err := os.Open("../testdata/reference/lflows-a.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out strings.Builder
	res, err := st.CheckListing(f, &out, CheckOptions{Env: env, Compiler: c})
	if err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if res.Parsed != 687 || res.Failed != 0 || !strings.HasSuffix(got, "687 parsed, 0 failed\n") {
		t.Errorf("got %+v, output ends %q", res, got[max(0, len(got)-200):])
	}
	for _, want := range []string{
		"line 2: ingress table=0 priority=100: 2 rules\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(got, "not compiled") {
		t.Errorf("some flows were not compiled:\n%s", got[max(0, len(got)-2000):])
	}
}
