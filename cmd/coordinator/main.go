// Command coordinator is Logbook's daemon and CLI: it makes trees of AI agents
// recoverable from their append-only rollout logs. See docs/CLI.md.
package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
)

func main() {
	stop := startCPUProfile(os.Stderr)
	code := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if os.Getenv(peakRSSEnv) != "" {
		reportPeakRSS(os.Stderr)
	}
	os.Exit(code)
}

// cpuProfileEnv names a file the process writes a CPU profile of its
// whole run to (go tool pprof reads it): for profiling benchmarks, e.g. a
// serving coordinator under an import; serve must end cleanly (SIGTERM).
const cpuProfileEnv = "LOGBOOK_CPUPROFILE"

// startCPUProfile starts the profile LOGBOOK_CPUPROFILE asks for and
// returns what stops it; a profile that cannot start is said on w and
// the run goes on without it.
func startCPUProfile(w io.Writer) func() {
	path := os.Getenv(cpuProfileEnv)
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintf(w, "warning: %s=%s: no CPU profile: %v\n", cpuProfileEnv, path, err)
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

// peakRSSEnv asks the process to print its peak resident set size at exit
// (benchmarks: a child's ru_maxrss on Linux includes its parent's peak when
// it was started by vfork and exec, as Go starts processes).
const peakRSSEnv = "LOGBOOK_REPORT_PEAK_RSS"

// reportPeakRSS writes "peak_rss_kb N" (VmHWM of /proc/self/status, the
// peak of this program's own memory since its exec); nothing where there
// is no /proc.
func reportPeakRSS(w io.Writer) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
			var kb int64
			if _, err := fmt.Sscanf(string(bytes.TrimSpace(v)), "%d kB", &kb); err == nil {
				fmt.Fprintf(w, "peak_rss_kb %d\n", kb)
			}
			return
		}
	}
}
