//go:build !linux

package ovsref

import "syscall"

func daemonAttr() *syscall.SysProcAttr { return nil }
