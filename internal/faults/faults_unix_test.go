//go:build unix

package faults

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// TestEnvKills runs this test binary again with LOGBOOK_CRASH set: the child
// must die of SIGKILL at the second hit, after announcing it.
func TestEnvKills(t *testing.T) {
	if os.Getenv("FAULTS_CHILD") == "1" {
		for i := 1; i <= 3; i++ {
			os.Stdout.WriteString("hit\n")
			Point("child.point")
		}
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestEnvKills$")
	cmd.Env = append(os.Environ(), "FAULTS_CHILD=1", EnvVar+"=child.point:2")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("child: %v, want a kill\nstderr: %s", err, errb.String())
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v, want SIGKILL", ee)
	}
	if n := strings.Count(out.String(), "hit\n"); n != 2 {
		t.Fatalf("child reached the point %d times, want 2", n)
	}
	if !strings.Contains(errb.String(), "faults: crash point child.point reached (2): SIGKILL") {
		t.Fatalf("no announcement on stderr: %q", errb.String())
	}
}
