package conntrack

import (
	"testing"
	"unsafe"
)

// TestEntryLayout pins the cache-line layout that conn's comment and
// ProcessBatch's touches rely on.
func TestEntryLayout(t *testing.T) {
	var c conn
	const line = 64
	checks := []struct {
		name      string
		off, size uintptr
		line      uintptr
	}{
		{"mu", unsafe.Offsetof(c.mu), unsafe.Sizeof(c.mu), 0},
		{"expires", unsafe.Offsetof(c.expires), unsafe.Sizeof(c.expires), 0},
		{"mark", unsafe.Offsetof(c.mark), unsafe.Sizeof(c.mark), 0},
		{"flags", unsafe.Offsetof(c.flags), unsafe.Sizeof(c.flags), 0},
		{"class", unsafe.Offsetof(c.class), unsafe.Sizeof(c.class), 0},
		{"keys[0]", unsafe.Offsetof(c.keys), unsafe.Sizeof(c.keys[0]), 0},
		{"keys[1]", unsafe.Offsetof(c.keys) + unsafe.Sizeof(c.keys[0]), unsafe.Sizeof(c.keys[1]), 1},
		{"label", unsafe.Offsetof(c.label), unsafe.Sizeof(c.label), 1},
		{"peer", unsafe.Offsetof(c.peer), unsafe.Sizeof(c.peer), 2},
		{"tags", unsafe.Offsetof(c.tags), unsafe.Sizeof(c.tags), 2},
	}
	for _, f := range checks {
		if f.off/line != f.line || (f.off+f.size-1)/line != f.line {
			t.Errorf("%s at bytes %d..%d, want inside line %d", f.name, f.off, f.off+f.size, f.line)
		}
	}
	if s := unsafe.Sizeof(c); s != 3*line {
		t.Errorf("conn is %d bytes, want %d", s, 3*line)
	}
	if s := unsafe.Sizeof(bucket{}); s != line {
		t.Errorf("bucket is %d bytes, want %d", s, line)
	}
	if s := unsafe.Sizeof([chunkSize]conn{}); s <= 32<<10 {
		t.Errorf("a chunk is %d bytes: not a page-aligned large object", s)
	}
}
