package faults

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// EnvVar is the environment variable that arms crash points.
const EnvVar = "LOGBOOK_CRASH"

// point is one armed point: it fires on hit number at.
type point struct {
	at     int64
	hits   atomic.Int64
	action func(name string, n int64)
}

// registry holds the armed points. It is process-wide by nature: the
// environment that arms the points is, and the calls come from packages that
// share nothing else.
type registry struct {
	once   sync.Once
	mu     sync.Mutex
	points atomic.Pointer[map[string]*point]
	err    error
}

var reg registry

func (r *registry) load() {
	r.once.Do(func() {
		m := map[string]*point{}
		if spec := os.Getenv(EnvVar); spec != "" {
			parsed, err := Parse(spec)
			if err != nil {
				r.err = err
				fmt.Fprintf(os.Stderr, "faults: %v (no crash point armed)\n", err)
			} else {
				for name, n := range parsed {
					m[name] = &point{at: n, action: kill}
				}
			}
		}
		r.points.Store(&m)
	})
}

// Parse reads a LOGBOOK_CRASH value: name[:n][,name[:n]...] with n >= 1.
func Parse(spec string) (map[string]int64, error) {
	out := map[string]int64{}
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, count, found := strings.Cut(part, ":")
		n := int64(1)
		if found {
			v, err := strconv.ParseInt(count, 10, 64)
			if err != nil || v < 1 {
				return nil, fmt.Errorf("%s=%q: %q is not name[:n] with n >= 1", EnvVar, spec, part)
			}
			n = v
		}
		if name == "" {
			return nil, fmt.Errorf("%s=%q: empty point name", EnvVar, spec)
		}
		out[name] = n
	}
	return out, nil
}

// Point marks a crash point. When the point is armed and this is the hit it
// was armed for, the process dies here.
func Point(name string) {
	reg.load()
	p := (*reg.points.Load())[name]
	if p == nil {
		return
	}
	if n := p.hits.Add(1); n == p.at {
		p.action(name, n)
	}
}

// Armed reports whether the point is armed and has not fired yet. Code that
// must shape its work to make the crash meaningful (split a write in two)
// asks first, so that unarmed runs pay nothing.
func Armed(name string) bool {
	reg.load()
	p := (*reg.points.Load())[name]
	return p != nil && p.hits.Load() < p.at
}

// Arm arms a point in this process for a test: action runs on the nth hit
// (nil: SIGKILL, as with the environment). The returned function disarms it.
func Arm(name string, n int64, action func(name string)) (disarm func()) {
	reg.load()
	reg.mu.Lock()
	defer reg.mu.Unlock()
	act := kill
	if action != nil {
		act = func(name string, _ int64) { action(name) }
	}
	old := *reg.points.Load()
	m := make(map[string]*point, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[name] = &point{at: max(n, 1), action: act}
	reg.points.Store(&m)
	return func() {
		reg.mu.Lock()
		defer reg.mu.Unlock()
		cur := *reg.points.Load()
		m := make(map[string]*point, len(cur))
		for k, v := range cur {
			if k != name {
				m[k] = v
			}
		}
		reg.points.Store(&m)
	}
}

// kill writes the announcement and SIGKILLs the process.
func kill(name string, n int64) {
	fmt.Fprintf(os.Stderr, "faults: crash point %s reached (%d): SIGKILL\n", name, n)
	killSelf()
}
