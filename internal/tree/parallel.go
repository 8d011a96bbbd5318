package tree

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// scanWorkers is how many files the full scan reads and replays at once:
// every core (tests set it to compare with one).
var scanWorkers = func() int { return runtime.GOMAXPROCS(0) }

// parallel runs f(0) .. f(n-1) on scanWorkers goroutines, each taking the
// next index; it returns when all are done. f must write only to its own
// index's results: the caller merges them in index order, so the outcome
// does not depend on the scheduling.
func parallel(n int, f func(i int)) {
	w := min(scanWorkers(), n)
	if w <= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				f(i)
			}
		}()
	}
	wg.Wait()
}
