package mirror

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/stream"
)

// DefaultColdAfter is how long a rollout stays idle before it is compressed.
const DefaultColdAfter = 10 * time.Minute

// Batch limits: a batch ends when the bus has nothing more pending or at
// either limit, whichever comes first.
const (
	DefaultBatchMessages = 1024
	DefaultBatchBytes    = 32 << 20
)

// Indexer is what the mirror tells about new records: the index's
// CatchUpRollouts (internal/index), with the rollouts a batch touched. It
// is called after the records are durable, never before; done is called
// once per rollout, after what was indexed of it is committed.
type Indexer interface {
	CatchUpRollouts(ctx context.Context, rolloutIDs []string, done func(rolloutID string, n int, err error)) error
}

// Config configures a Mirror.
type Config struct {
	Dir string // the data dir; required
	// ColdAfter is the idle time after which an unreferenced rollout is
	// compressed; 0 means DefaultColdAfter, negative never compresses.
	ColdAfter     time.Duration
	BatchMessages int // 0: DefaultBatchMessages
	BatchBytes    int // 0: DefaultBatchBytes
	Index         Indexer
	Logger        *slog.Logger // nil: slog.Default()
	// OnCommit, when set, is called after each batch is durable (mirror
	// files fsynced, watermark written). Benchmarks and tests use it.
	OnCommit func(Commit)
	// FS is the file system the mirror files are appended through; nil
	// is the operating system's. Tests inject faults through it.
	FS FS
}

// Commit describes one durable batch.
type Commit struct {
	Seq      uint64           // the watermark now
	Messages int              // messages in the batch
	Synced   time.Time        // when the mirror files' fsync returned
	Rollouts map[string]int64 // rollout -> last ordinal now in its mirror file
	Stored   []time.Time      // the JetStream store time of each message of the batch
}

// Status is what a running mirror reports; serve shows it.
type Status struct {
	Watermark uint64 `json:"watermark"` // last stream sequence mirrored
	// Pending is how many messages the bus held beyond the last one
	// received, when it was received.
	Pending     uint64 `json:"pending"`
	Messages    uint64 `json:"messages"`    // messages mirrored since start
	Records     uint64 `json:"records"`     // records appended since start
	Duplicates  uint64 `json:"duplicates"`  // records received again and found already mirrored
	Batches     uint64 `json:"batches"`     // durable batches since start
	Quarantined uint64 `json:"quarantined"` // messages refused since start
	// QuarantinedByKind counts this run's refusals by kind.
	QuarantinedByKind map[string]uint64 `json:"quarantined_by_kind"`
	// QuarantineFiles is the number of refused messages in quarantine/,
	// earlier runs included.
	QuarantineFiles int    `json:"quarantine_files"`
	TornRepaired    uint64 `json:"torn_repaired"`   // torn tails truncated (kept in .broken)
	Compressed      uint64 `json:"compressed"`      // rollouts compressed to .jsonl.zst
	Rematerialized  uint64 `json:"rematerialized"`  // .jsonl.zst turned back into .jsonl
	Indexed         uint64 `json:"indexed"`         // records the index caught up after the mirror
	Err             string `json:"error,omitempty"` // the last failure, "" once a batch succeeds
	IndexErr        string `json:"index_error,omitempty"`
	// Damaged names the rollouts whose mirror file was set aside as
	// damaged and is not yet rebuilt from the bus, with the reason.
	Damaged   map[string]string `json:"damaged,omitempty"`
	SetAside  uint64            `json:"set_aside"` // damaged files moved to quarantine/damaged/ since start
	Refetched uint64            `json:"refetched"` // records re-read from the bus into a file that lacked them
	Running   bool              `json:"running"`
}

// Mirror keeps a data dir's mirror files: one JSONL file per rollout, from
// the ROLLOUTS stream (see the package doc).
type Mirror struct {
	cfg  Config
	dir  string // data dir
	rdir string // rollouts/
	qdir string // quarantine/
	log  *slog.Logger
	// issued reads the last lease revision (stream.Bus.LeaseRevision); set
	// by Run. maxIssued is the last value read, used only by the consumer.
	issued    func(context.Context) (uint64, error)
	maxIssued uint64

	mu    sync.Mutex // guards the fields below; never held while taking a rollout's lock
	ros   map[string]*ro
	refs  map[string]bool // rollouts named by a canonical history_base
	st    Status
	wm    state           // the watermark as last written
	sf    *stateFile      // written only by the consumer
	ej    *epochJournal   // written only by the consumer
	dirty map[string]bool // rollouts for the index to catch up
	wake  chan struct{}   // the indexer's doorbell
	// unclean holds mirror files a failed batch wrote past their last
	// fsynced size, with that size, until they are cut back to it and
	// fsynced; no watermark is written while one is left (only the
	// consumer touches it).
	unclean map[string]int64
	bus     *stream.Bus     // set by Run: the rebuilds read from it
	runCtx  context.Context // Run's
}

// ro is a rollout's mirror file as the mirror knows it. mu is held while
// the file changes (a batch appending, a compression, a re-materialization)
// and guards the fields. repr is held exclusively while the file changes
// representation (the renames and removals of compression and
// re-materialization) and shared while the index reads the file, so that
// the index never finds it gone between naming and opening it.
type ro struct {
	mu    sync.Mutex
	repr  sync.RWMutex
	id    string
	known bool // next and zst are loaded
	// aside is why the rollout's file was set aside (moved to
	// quarantine/damaged/), "" when it was not or has been rebuilt.
	aside string
	next  int64 // the ordinal the file expects next
	// epoch is the highest epoch of the rollout's accepted packs
	// (stream.Tail.Follows): by a batch whose watermark was written, or
	// re-read from below the watermark (refetch). It is loaded from the
	// epoch journal at Open and journaled before the watermark that covers
	// it (epochs.go). A failed batch's packs never raise it (batch.epochs).
	epoch  uint64
	zst    bool // only the .jsonl.zst exists
	gen    uint64
	broken string // the tail is damaged beyond a torn line: why
}

// Open prepares a data dir's mirror: it creates rollouts/ and quarantine/,
// reads the watermark, and repairs what a crash can leave (temp files, a
// rollout both plain and compressed). Torn tails are repaired later, before
// the next append to their file.
func Open(ctx context.Context, cfg Config) (*Mirror, error) {
	if cfg.Dir == "" {
		return nil, errors.New("mirror: no data dir")
	}
	if cfg.ColdAfter == 0 {
		cfg.ColdAfter = DefaultColdAfter
	}
	if cfg.BatchMessages <= 0 {
		cfg.BatchMessages = DefaultBatchMessages
	}
	if cfg.BatchBytes <= 0 {
		cfg.BatchBytes = DefaultBatchBytes
	}
	m := &Mirror{
		cfg: cfg, dir: cfg.Dir, log: cfg.Logger,
		rdir: datadir.RolloutsDir(cfg.Dir), qdir: datadir.QuarantineDir(cfg.Dir),
		ros: map[string]*ro{}, refs: map[string]bool{}, dirty: map[string]bool{},
		wake: make(chan struct{}, 1),
	}
	if m.log == nil {
		m.log = slog.Default()
	}
	if m.cfg.FS == nil {
		fs, err := diskFaultFS()
		if err != nil {
			return nil, err
		}
		if fs == nil {
			fs = &osFS{}
		}
		m.cfg.FS = fs
	}
	m.st.QuarantinedByKind = map[string]uint64{}
	for _, d := range []string{m.rdir, m.qdir} {
		// 0700 whatever the data dir's mode or the umask: transcripts
		// are private (and their files are created 0600).
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("mirror: %w", err)
		}
		if err := os.Chmod(d, 0o700); err != nil {
			return nil, fmt.Errorf("mirror: %w", err)
		}
	}
	var err error
	if m.sf, err = openState(m.dir); err != nil {
		return nil, err
	}
	m.wm = m.sf.cur
	m.st.Watermark = m.wm.Seq
	epochs, err := m.loadEpochs()
	if err != nil {
		m.sf.close()
		return nil, err
	}
	for id, e := range epochs {
		m.ros[id] = &ro{id: id, epoch: e}
	}
	if m.st.QuarantineFiles, err = countQuarantine(m.qdir); err != nil {
		m.sf.close()
		return nil, fmt.Errorf("mirror: %w", err)
	}
	if err := m.recoverFiles(ctx); err != nil {
		m.sf.close()
		return nil, err
	}
	return m, nil
}

// Close releases the watermark file. Call it after Run has returned.
func (m *Mirror) Close() error {
	m.ej.closeFile()
	return m.sf.close()
}

// loadEpochs opens the epoch journal (see epochJournal).
func (m *Mirror) loadEpochs() (map[string]uint64, error) {
	ej, epochs, err := m.openEpochs(m.wm.Seq)
	if err != nil {
		return nil, err
	}
	m.ej = ej
	return epochs, nil
}

// SetIndex attaches the index after Open (which repairs the files the index
// reads at its own start-up). Call it before Run.
func (m *Mirror) SetIndex(ix Indexer) { m.cfg.Index = ix }

// Watermark is the last stream sequence mirrored.
func (m *Mirror) Watermark() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.wm.Seq
}

// Status returns a snapshot of the counters.
func (m *Mirror) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.st
	s.QuarantinedByKind = maps.Clone(m.st.QuarantinedByKind)
	s.Damaged = maps.Clone(m.st.Damaged)
	return s
}

// rollout returns the state of a rollout, created unknown on first use.
func (m *Mirror) rollout(id string) *ro {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.ros[id]
	if r == nil {
		r = &ro{id: id}
		m.ros[id] = r
	}
	return r
}

func (m *Mirror) count(f func(s *Status)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f(&m.st)
}

// Paths of a rollout's files.
func (m *Mirror) plainPath(id string) string { return filepath.Join(m.rdir, id+datadir.JSONLExt) }
func (m *Mirror) zstPath(id string) string   { return m.plainPath(id) + zstExt }
