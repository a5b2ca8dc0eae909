package ovsdb

import (
	"strings"
	"testing"
)

// TestServerOrder checks serverOrder against the member that the real
// ovsdb-server 3.1 named when every column of an inserted row was unknown
// ("No column X in table a."): the first it visits. The rows were sent
// with their members in byte order, as serverOrder assumes.
func TestServerOrder(t *testing.T) {
	for _, tt := range []struct{ members, first string }{
		{"n zz", "n"},
		{"a n", "a"},
		{"b n", "b"},
		// Sent as {"n":..,"c":..}, ovsdb-server visits n first: the two
		// share a bucket, where arrival order counts, which govn's
		// parser does not keep.
		{"c n", "c"},
		{"qb6o148 qby0a1ro qeqh413yng qgubbb7ayn", "qgubbb7ayn"},
		{"q05mts45z q1 q8glshv qc3pz_lx8x qoo2sb", "qoo2sb"},
		{"q q_wa77 qam7 qarprhlw qay5i68n0 qcefb qgk6zx4b3 qoz5w9w2r qv2bol8lf8 qx98m5_4 qzkk5", "qx98m5_4"},
		{"q_mqgq qk qn0bobzjc qq6 qrs qu43hbty", "q_mqgq"},
		{"q507o61o qbz9u0dti qdte qt", "qt"},
		{"q0m4gys54b q_9 qia8c qn qn92k5cymw qzsbkm", "qn92k5cymw"},
		{"q47pecfik q7n q8g qc_eyj qiv0nrgy8w qv5qx qvhsp4", "qvhsp4"},
		{"q9fr qgcsa qhye98 qs97h2", "qhye98"},
	} {
		m := map[string]bool{}
		for _, k := range strings.Fields(tt.members) {
			m[k] = true
		}
		order := serverOrder(m)
		if len(order) != len(m) || order[0] != tt.first {
			t.Errorf("serverOrder(%s) = %v, want %s first", tt.members, order, tt.first)
		}
	}
}

func TestNumberAsInteger(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1", 1, true}, {"-0", 0, true}, {"1.0", 1, true}, {"1e2", 100, true}, {"1.5e1", 15, true},
		{"-2.50e1", -25, true}, {"0.0e5", 0, true}, {"9223372036854775807", 9223372036854775807, true},
		{"-9223372036854775808", -9223372036854775808, true}, {"9223372036854775808", 0, false},
		{"1e19", 0, false}, {"1.5", 0, false}, {"2.5e0", 0, false}, {"1e-1", 0, false}, {"1e999999", 0, false},
	} {
		got, ok := numberAsInteger(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("numberAsInteger(%s) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}
