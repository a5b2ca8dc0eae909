package main

import (
	"context"
	"errors"
)

// runBenchDatapath is not written yet; its owner replaces this file.
func runBenchDatapath(ctx context.Context, args []string) error {
	return errors.New("not implemented yet")
}
