// Package noasyncpreempt re-executes a host benchmark with GODEBUG=asyncpreemptoff=1. The
// benchmarks block their threads in raw system calls the Go scheduler never sees, so to it those
// threads run without a break, and after 10 ms sysmon would send the preemption signal (SIGURG,
// preemptone in runtime/proc.go) that cuts a sleep short and adds the signal's own cost.
package noasyncpreempt

import (
	"os"
	"strings"
	"syscall"
)

// Ensure returns at once when the process already runs with asynchronous preemption off, and
// otherwise replaces it with itself under that setting (the same arguments and environment); it
// returns an error only when it cannot.
func Ensure() error {
	if strings.Contains(os.Getenv("GODEBUG"), "asyncpreemptoff=1") {
		return nil
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	env := append(os.Environ(), "GODEBUG=asyncpreemptoff=1")
	return syscall.Exec(self, os.Args, env)
}
