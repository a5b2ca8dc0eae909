package main

import (
	"context"
	"errors"
)

// runBenchOVSDB is not written yet; its owner replaces this file.
func runBenchOVSDB(ctx context.Context, args []string) error {
	return errors.New("not implemented yet")
}
