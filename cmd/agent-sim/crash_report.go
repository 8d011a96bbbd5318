package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/logbook-agents/logbook/internal/dedupe"
)

// campaign is what `agent-sim crash` prints: the table, or with --json
// the same as data.
type campaign struct {
	Seed       uint64                 `json:"seed"`
	Rounds     int                    `json:"rounds"`
	Planned    int                    `json:"rounds_planned"`
	Workers    int                    `json:"workers"`
	LeaseTTL   string                 `json:"lease_ttl"`
	Bus        string                 `json:"bus"`
	Dir        string                 `json:"dir,omitempty"`
	Faults     map[string]*faultTally `json:"faults"`
	Totals     checkStats             `json:"totals"`
	TreeEqual  int                    `json:"rounds_tree_equal"`
	FastNaive  int                    `json:"rounds_fast_equals_naive"`
	Ordered    int                    `json:"rounds_index_le_mirror_le_jetstream"`
	Restarts   map[string]int         `json:"unexpected_exits_restarted"`
	Final      []string               `json:"final_checks"`
	Violations []violation            `json:"violations"`
	ElapsedSec float64                `json:"elapsed_s"`
	Detail     []*roundResult         `json:"round_detail,omitempty"`
}

type faultTally struct {
	Rounds     int `json:"rounds"`
	Killed     int `json:"killed"` // killed, stopped, or its armed point reached
	NotReached int `json:"not_reached"`
	Fenced     int `json:"zombies_fenced,omitempty"`
}

type violation struct {
	Round    int      `json:"round"` // from 1; 0 for the final checks
	Point    string   `json:"point"`
	Fault    string   `json:"fault"`
	Problems []string `json:"problems"`
}

func (c *campaign) add(res *roundResult) {
	c.Rounds++
	t := c.Faults[res.Point]
	if t == nil {
		t = &faultTally{}
		c.Faults[res.Point] = t
	}
	t.Rounds++
	switch res.Outcome {
	case outNotReached:
		t.NotReached++
	default:
		t.Killed++
	}
	if res.Fenced {
		t.Fenced++
	}
	s, o := &c.Totals, res.checkStats
	s.Acknowledged += o.Acknowledged
	s.Lost += o.Lost
	s.SideEffects += o.SideEffects
	s.ExecutedTwice += o.ExecutedTwice
	s.InFlight += o.InFlight
	s.Reconciled += o.Reconciled
	s.StillUnknown += o.StillUnknown
	s.Retried += o.Retried
	s.WronglyRetried += o.WronglyRetried
	for k, n := range o.Deliveries {
		s.Deliveries[k] += n
	}
	for k, n := range o.WantDeliveries {
		s.WantDeliveries[k] += n
	}
	if o.TreeEqual {
		c.TreeEqual++
	}
	if o.FastEqNaive {
		c.FastNaive++
	}
	if o.Ordered {
		c.Ordered++
	}
	if len(res.Violations) > 0 {
		c.Violations = append(c.Violations, violation{Round: res.Round, Point: res.Point, Fault: res.fault.String(), Problems: res.Violations})
	}
}

var deliveryStates = []string{dedupe.Confirmed, dedupe.Unconfirmed, dedupe.PossiblyDuplicated, dedupe.OrphanReceipt, dedupe.RolledBackReceipt}

// render writes the campaign's table.
func (c *campaign) render(w io.Writer) {
	fmt.Fprintf(w, "agent-sim crash: seed %d, %d of %d rounds, %d workers, lease TTL %s, bus %s, %.1fs\n\n",
		c.Seed, c.Rounds, c.Planned, c.Workers, c.LeaseTTL, c.Bus, c.ElapsedSec)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FAULT\tROUNDS\tKILLS\tNOT REACHED\tZOMBIES FENCED")
	names := make([]string, 0, len(c.Faults))
	for n := range c.Faults {
		names = append(names, n)
	}
	order := allFaults(true)
	sort.Slice(names, func(i, j int) bool { return indexOf(order, names[i]) < indexOf(order, names[j]) })
	var total faultTally
	for _, n := range names {
		t := c.Faults[n]
		fenced := "-"
		if n == "worker-stop" {
			fenced = fmt.Sprint(t.Fenced)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", n, t.Rounds, t.Killed, t.NotReached, fenced)
		total.Rounds += t.Rounds
		total.Killed += t.Killed
		total.NotReached += t.NotReached
	}
	fmt.Fprintf(tw, "total\t%d\t%d\t%d\t\n", total.Rounds, total.Killed, total.NotReached)
	tw.Flush()
	fmt.Fprintln(w)
	s := c.Totals
	tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INVARIANT\tFOUND")
	fmt.Fprintf(tw, "records acknowledged / lost\t%d / %d\n", s.Acknowledged, s.Lost)
	fmt.Fprintf(tw, "side effects / executed twice\t%d / %d\n", s.SideEffects, s.ExecutedTwice)
	fmt.Fprintf(tw, "calls in flight (reported unknown) / reconciled / still unknown / retried / wrongly retried\t%d / %d / %d / %d / %d\n",
		s.InFlight, s.Reconciled, s.StillUnknown, s.Retried, s.WronglyRetried)
	var ds []string
	for _, st := range deliveryStates {
		ds = append(ds, fmt.Sprintf("%s %d/%d", st, s.Deliveries[st], s.WantDeliveries[st]))
	}
	fmt.Fprintf(tw, "deliveries per state (found/ground truth)\t%s\n", strings.Join(ds, ", "))
	fmt.Fprintf(tw, "tree equal to ground truth\t%d of %d rounds\n", c.TreeEqual, c.Rounds)
	fmt.Fprintf(tw, "fast replay == naive replay\t%d of %d rounds\n", c.FastNaive, c.Rounds)
	fmt.Fprintf(tw, "index <= mirror <= JetStream (mirror byte-equal)\t%d of %d rounds\n", c.Ordered, c.Rounds)
	var rs []string
	for n, k := range c.Restarts {
		rs = append(rs, fmt.Sprintf("%s %d", n, k))
	}
	sort.Strings(rs)
	if len(rs) == 0 {
		rs = []string{"none"}
	}
	fmt.Fprintf(tw, "unexpected exits (restarted)\t%s\n", strings.Join(rs, ", "))
	for _, f := range c.Final {
		fmt.Fprintf(tw, "at the end\t%s\n", f)
	}
	fmt.Fprintf(tw, "violations\t%d\n", len(c.Violations))
	tw.Flush()
	for _, v := range c.Violations {
		fmt.Fprintf(w, "\nVIOLATION in round %d (%s), seed %d:\n", v.Round, v.Fault, c.Seed)
		for _, p := range v.Problems {
			fmt.Fprintf(w, "  %s\n", p)
		}
	}
}

// writeProgress writes the table so far to DIR/progress.txt (a campaign
// cut short still tells what it found).
func (c *campaign) writeProgress(dir string) {
	var b strings.Builder
	c.render(&b)
	os.WriteFile(filepath.Join(dir, "progress.txt"), []byte(b.String()), 0o644)
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return len(list)
}
