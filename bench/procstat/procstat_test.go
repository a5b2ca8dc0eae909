package procstat

import (
	"os"
	"testing"
)

// TestSelf reads this test process: it has memory and has used CPU, and
// a process that does not exist is an error.
func TestSelf(t *testing.T) {
	peak, cur, err := Memory(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if cur <= 0 || peak < cur {
		t.Errorf("peak %d, current %d", peak, cur)
	}
	sum := 0
	for i := range 1_000_000 {
		sum += i
	}
	_ = sum
	cpu, err := CPUTime(os.Getpid())
	if err != nil || cpu <= 0 {
		t.Errorf("CPU time %v, %v", cpu, err)
	}
	if _, _, err := Memory(-1); err == nil {
		t.Error("Memory(-1) succeeded")
	}
	if _, err := CPUTime(-1); err == nil {
		t.Error("CPUTime(-1) succeeded")
	}
}
