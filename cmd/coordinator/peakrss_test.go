package main

import (
	"bytes"
	"os"
	"regexp"
	"testing"
)

// TestReportPeakRSS: under LOGBOOK_REPORT_PEAK_RSS the process ends with
// one "peak_rss_kb N" line, N its own VmHWM (where /proc exists).
func TestReportPeakRSS(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc here")
	}
	var buf bytes.Buffer
	reportPeakRSS(&buf)
	if !regexp.MustCompile(`^peak_rss_kb [1-9][0-9]*\n$`).Match(buf.Bytes()) {
		t.Errorf("reported %q", buf.String())
	}
}
