//go:build unix

package faults

import (
	"os"
	"syscall"
)

func killSelf() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way; never return into the caller
}
