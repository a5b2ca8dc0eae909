package main

import (
	"context"
	"errors"
)

// runDB is not written yet; its owner replaces this file.
func runDB(ctx context.Context, args []string) error {
	return errors.New("not implemented yet")
}
