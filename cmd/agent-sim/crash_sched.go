package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The faults a campaign injects, one a round. A name is a kind of fault:
//
//	worker-kill           SIGKILL of a worker at a random moment of the round's work
//	worker-stop           SIGSTOP of a worker at a random moment, past the lease TTL, then SIGCONT
//	coordinator-kill      SIGKILL of the coordinator at a random moment (its embedded NATS dies with it)
//	worker:POINT          the workers restarted with --crash POINT:N: the first to reach its Nth hit dies
//	coordinator:POINT     the coordinator restarted with LOGBOOK_CRASH=POINT:N dies there
//	disk:FAULT            the coordinator restarted with LOGBOOK_DISKFAULT: the Nth write or
//	                      fsync of a mirror file fails once (ENOSPC, EIO); it must recover alone
//	nats-leader-kill      with --cluster only: SIGKILL of the node leading ROLLOUTS at a random
//	                      moment, started again after a lease TTL on the same store and ports

// natsLeaderKill is the fault only a campaign that owns its cluster
// (--cluster) can inject.
const natsLeaderKill = "nats-leader-kill"

// coordinatorPoints are the coordinator's crash points (internal/faults)
// a campaign can reach. revert.after-seal is not among them: simulated
// agents never revert.
var coordinatorPoints = []string{
	"mirror.after-ack", "mirror.mid-append", "mirror.before-watermark",
	"mirror.zst-before-rename", "mirror.zst-after-rename", "mirror.unzst-after-rename",
	"index.mid-tx",
}

// diskFaults are the mirror's disk faults (internal/stream/mirror's
// LOGBOOK_DISKFAULT): the coordinator restarted with the Nth write or fsync
// of a mirror file failing once.
var diskFaults = map[string]string{
	"write-enospc": "write:ENOSPC",
	"write-eio":    "write:EIO",
	"sync-eio":     "sync:EIO",
}

// allFaults lists every fault name, in a fixed order; nats-leader-kill
// (last) only for a campaign with its own cluster.
func allFaults(cluster bool) []string {
	out := []string{"worker-kill", "worker-stop", "coordinator-kill"}
	var ws []string
	for p := range crashPoints {
		ws = append(ws, "worker:"+p)
	}
	slices.Sort(ws)
	out = append(out, ws...)
	for _, p := range coordinatorPoints {
		out = append(out, "coordinator:"+p)
	}
	var ds []string
	for p := range diskFaults {
		ds = append(ds, "disk:"+p)
	}
	slices.Sort(ds)
	out = append(out, ds...)
	if cluster {
		out = append(out, natsLeaderKill)
	}
	return out
}

// parsePoints reads --points: comma-separated fault names, "worker:*",
// "coordinator:*" or "disk:*" for all of a kind's points, or "all" (with
// nats-leader-kill when the campaign runs its own cluster).
func parsePoints(spec string, cluster bool) ([]string, error) {
	all := allFaults(cluster)
	if spec == "" || spec == "all" {
		return all, nil
	}
	var out []string
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		var add []string
		switch {
		case part == "":
			continue
		case part == "all":
			add = all
		case strings.HasSuffix(part, ":*"):
			for _, n := range all {
				if strings.HasPrefix(n, strings.TrimSuffix(part, "*")) {
					add = append(add, n)
				}
			}
		case slices.Contains(all, part):
			add = []string{part}
		}
		if len(add) == 0 && part == natsLeaderKill {
			return nil, fmt.Errorf("--points: %s needs --cluster N (the campaign kills only NATS nodes it started itself)", part)
		}
		if len(add) == 0 {
			return nil, fmt.Errorf("--points: %q is not a fault (want all, worker:*, coordinator:*, disk:* or some of: %s)", part, strings.Join(all, ", "))
		}
		for _, n := range add {
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	return out, nil
}

// fault is one round's plan: everything random about the round, drawn from
// the campaign's seed before anything runs, so a seed always gives the same
// sequence of faults and trees.
type fault struct {
	Round  int           `json:"round"` // from 1
	Point  string        `json:"point"`
	Hit    int64         `json:"hit,omitempty"`   // the armed point's hit that kills
	Delay  time.Duration `json:"delay,omitempty"` // random faults: from the start of the tree
	Victim int           `json:"victim"`          // the worker (index) a random fault hits
	Tree   params        `json:"tree"`
}

func (f fault) String() string {
	s := f.Point
	switch {
	case f.Hit > 0:
		s += fmt.Sprintf(" (hit %d)", f.Hit)
	case f.Delay > 0:
		s += fmt.Sprintf(" after %s", f.Delay)
	}
	if strings.HasPrefix(f.Point, "worker-") {
		s += fmt.Sprintf(" on w%d", f.Victim)
	}
	return s
}

// schedule draws a campaign's rounds: the faults in a shuffled order, every
// one once per len(points) rounds, with their hits, delays, victims and
// trees.
func schedule(seed uint64, rounds int, points []string, workers int, run string) []fault {
	rng := rand.New(rand.NewPCG(seed, 0x63726173685f6c62))
	out := make([]fault, 0, rounds)
	var order []string
	for i := range rounds {
		if len(order) == 0 {
			order = slices.Clone(points)
			rng.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
		}
		f := fault{Round: i + 1, Point: order[0], Victim: rng.IntN(workers)}
		order = order[1:]
		switch {
		case strings.Contains(f.Point, "zst"):
			f.Hit = 1
		case strings.Contains(f.Point, ":"):
			f.Hit = 1 + rng.Int64N(2)
		default:
			f.Delay = time.Duration(50+rng.IntN(1000)) * time.Millisecond
		}
		f.Tree = params{Seed: rng.Uint64N(1_000_000), Agents: 2 + rng.IntN(4), Depth: 1 + rng.IntN(2), Turn: 1 + rng.IntN(2),
			Run: run + "r" + strconv.Itoa(i)}
		out = append(out, f)
	}
	return out
}
