package serve

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/stream"
)

// TestDataDirPrivateModes holds docs/CLI.md to its word: in a data dir
// pre-created 0755, under a permissive umask, every directory serve
// creates is 0700 and every file 0600, the embedded server's store (which
// holds every record) included, while it serves and after a clean stop.
func TestDataDirPrivateModes(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	info, stop := start(t, Config{DataDir: dir, NATSListen: "127.0.0.1:0", Listen: "127.0.0.1:0"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, err := nats.Connect(info.NATSURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	bus, err := stream.Open(ctx, nc, stream.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	writeRollout(t, ctx, bus, "ro-modes", 3)
	publishRaw(t, ctx, js, "ro-junk", 1, 1, []byte("not json")) // a quarantine entry
	poll(t, 20*time.Second, "the mirror and its quarantine", func() bool {
		_, e1 := os.Stat(datadir.PlainPath(dir, "ro-modes"))
		q, _ := os.ReadDir(datadir.QuarantineDir(dir))
		return e1 == nil && len(q) > 0
	})
	checkModes(t, dir, "while serving")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	checkModes(t, dir, "after a clean stop")
}

// checkModes walks the data dir: directories 0700, files 0600.
func checkModes(t *testing.T, dir, when string) {
	t.Helper()
	var bad []string
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		if st.Mode().Perm() != want {
			rel, _ := filepath.Rel(dir, p)
			bad = append(bad, rel+" "+st.Mode().Perm().String())
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Errorf("%s, %d of %d entries not 0700/0600:\n%s", when, len(bad), n, strings.Join(bad, "\n"))
	}
}
