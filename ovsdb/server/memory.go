package server

import (
	"fmt"
	"sort"
	"strings"
)

// MemoryShow renders Stats the way "memory/show" prints them.
func (s *Server) MemoryShow() string {
	st := s.Stats()
	var b strings.Builder
	fmt.Fprintf(&b, "sessions:%d monitors:%d", st.Sessions, st.Monitors)
	names := make([]string, 0, len(st.Rows))
	for n := range st.Rows {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, " rows(%s):%d", n, st.Rows[n])
	}
	return b.String() + "\n"
}
