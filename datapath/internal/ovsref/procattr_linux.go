package ovsref

import "syscall"

// daemonAttr makes a daemon die with the test process, even when the test
// binary is killed before its cleanups run.
func daemonAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
