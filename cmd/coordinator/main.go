// Command coordinator is Logbook's daemon and CLI: it makes trees of AI agents
// recoverable from their append-only rollout logs. See docs/CLI.md.
package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
)

func main() {
	code := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
	if os.Getenv(peakRSSEnv) != "" {
		reportPeakRSS(os.Stderr)
	}
	os.Exit(code)
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
