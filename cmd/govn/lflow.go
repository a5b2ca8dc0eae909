package main

import (
	"context"
	"errors"
)

// runLflow is not written yet; its owner replaces this file.
func runLflow(ctx context.Context, args []string) error {
	return errors.New("not implemented yet")
}
