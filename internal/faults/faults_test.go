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

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want map[string]int64
		bad  bool
	}{
		{spec: "a", want: map[string]int64{"a": 1}},
		{spec: "a:3,b", want: map[string]int64{"a": 3, "b": 1}},
		{spec: " a:2 , ", want: map[string]int64{"a": 2}},
		{spec: "a:0", bad: true},
		{spec: "a:x", bad: true},
		{spec: ":2", bad: true},
	} {
		got, err := Parse(tc.spec)
		if (err != nil) != tc.bad {
			t.Fatalf("Parse(%q): %v", tc.spec, err)
		}
		if tc.bad {
			continue
		}
		if len(got) != len(tc.want) {
			t.Fatalf("Parse(%q) = %v, want %v", tc.spec, got, tc.want)
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Fatalf("Parse(%q) = %v, want %v", tc.spec, got, tc.want)
			}
		}
	}
}

func TestArmFiresOnNthHit(t *testing.T) {
	var fired []string
	disarm := Arm("test.point", 3, func(name string) { fired = append(fired, name) })
	for range 2 {
		if !Armed("test.point") {
			t.Fatal("not armed before the 3rd hit")
		}
		Point("test.point")
	}
	if len(fired) != 0 {
		t.Fatalf("fired early: %v", fired)
	}
	Point("test.point")
	Point("test.point")
	if len(fired) != 1 || Armed("test.point") {
		t.Fatalf("fired %v, armed %v; want once, then spent", fired, Armed("test.point"))
	}
	disarm()
	Point("test.point")
	Point("other")
	if len(fired) != 1 {
		t.Fatalf("fired after disarm: %v", fired)
	}
}

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
