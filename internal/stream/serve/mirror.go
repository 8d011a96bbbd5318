package serve

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/logbook-agents/logbook/internal/index"
	"github.com/logbook-agents/logbook/internal/stream"
	"github.com/logbook-agents/logbook/internal/stream/mirror"
)

// The index is what the mirror tells about durable records.
var _ mirror.Indexer = (*index.Index)(nil)

// mirrorRun is the mirror and the index running inside serve.
type mirrorRun struct {
	m      *mirror.Mirror
	ix     *index.Index // nil when the index could not be opened
	ixErr  string
	cancel context.CancelFunc
	done   chan error // Run's result, once
	log    *slog.Logger
}

// startMirror prepares the mirror (repairs left by a crash), opens the index
// and catches it up with the mirror files, then starts mirroring. An index
// that cannot be opened is logged and left out: the mirror runs without it
// (the index may lag, never block the log).
func startMirror(ctx context.Context, cfg Config, bus *stream.Bus, log *slog.Logger) (*mirrorRun, error) {
	mr := &mirrorRun{log: log, done: make(chan error, 1)}
	mcfg := mirror.Config{Dir: cfg.DataDir, ColdAfter: cfg.ColdAfter, Logger: log, OnCommit: cfg.MirrorCommit}
	start := time.Now()
	m, err := mirror.Open(ctx, mcfg)
	if err != nil {
		return nil, err
	}
	opened := time.Since(start)
	start = time.Now()
	ix, err := index.Open(ctx, cfg.DataDir, index.Options{Logger: log})
	if err == nil {
		var rep index.CatchUpReport
		rep, err = ix.CatchUp(ctx, nil)
		if err != nil {
			ix.Close()
			ix = nil
		} else {
			log.Info("index caught up with the mirror", "rollouts", rep.Rollouts, "records", rep.Records,
				"reset", len(rep.Reset), "problems", len(rep.Problems), "took", time.Since(start).Round(time.Millisecond),
				"mirror_open", opened.Round(time.Millisecond))
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			m.Close()
			return nil, ctx.Err()
		}
		log.Error("index unavailable; mirroring without it (coordinator reindex rebuilds it)", "err", err)
		mr.ixErr = err.Error()
	} else {
		m.SetIndex(ix)
		mr.ix = ix
	}
	mr.m = m
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	mr.cancel = cancel
	go func() { mr.done <- m.Run(rctx, bus) }()
	return mr, nil
}

// stop stops the mirror, then closes the index and the mirror.
func (mr *mirrorRun) stop() {
	mr.cancel()
	err := <-mr.done
	mr.done <- err
	if mr.ix != nil {
		if err := mr.ix.Close(); err != nil {
			mr.log.Warn("closing the index", "err", err)
		}
	}
	if err := mr.m.Close(); err != nil {
		mr.log.Warn("closing the mirror's watermark file", "err", err)
	}
	mr.log.Info("mirror stopped", "watermark", mr.m.Watermark())
}

// status serves GET /status: the mirror's counters and the index's state.
func (mr *mirrorRun) status(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(struct {
		Mirror   mirror.Status `json:"mirror"`
		IndexErr string        `json:"index_error,omitempty"`
	}{mr.m.Status(), mr.ixErr})
}

// degraded is why the mirror or the index is not doing its work, "" when
// both are: the mirror's last failure (a full disk says "no space left on
// device" and names the file), each rollout whose damaged file was set
// aside and is not yet rebuilt, or the index being unavailable.
func (mr *mirrorRun) degraded() string {
	var why []string
	st := mr.m.Status()
	if st.Err != "" {
		why = append(why, "mirror: "+st.Err)
	}
	for _, id := range slices.Sorted(maps.Keys(st.Damaged)) {
		why = append(why, "rollout "+id+": mirror file damaged: "+st.Damaged[id])
	}
	if mr.ixErr != "" {
		why = append(why, "index unavailable: "+mr.ixErr)
	}
	return strings.Join(why, "; ")
}
