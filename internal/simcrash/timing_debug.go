package simcrash

import (
	"fmt"
	"os"
	"sync"
	"time"
)

var timingOn = os.Getenv("SIMCRASH_TIMING") != ""
var timingMu sync.Mutex
var timings = map[string]time.Duration{}
var timingN = map[string]int{}

func timed(name string) func() {
	if !timingOn {
		return func() {}
	}
	start := time.Now()
	return func() {
		timingMu.Lock()
		timings[name] += time.Since(start)
		timingN[name]++
		timingMu.Unlock()
	}
}

func TimingReport() string {
	timingMu.Lock()
	defer timingMu.Unlock()
	s := ""
	for k, v := range timings {
		s += fmt.Sprintf("%-20s n=%5d total=%8.2fs avg=%7.2fms\n", k, timingN[k], v.Seconds(), float64(v.Microseconds())/1000/float64(timingN[k]))
	}
	return s
}
