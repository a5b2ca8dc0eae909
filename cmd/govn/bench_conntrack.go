package main

import (
	"context"
	"errors"
)

// runBenchConntrack is not written yet; its owner replaces this file.
func runBenchConntrack(ctx context.Context, args []string) error {
	return errors.New("not implemented yet")
}
