//go:build !unix

package lflow

import "time"

// processCPUTime is not available here; benchmarks then report only wall
// time figures.
func processCPUTime() time.Duration { return 0 }
