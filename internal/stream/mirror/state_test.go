package mirror

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/logbook-agents/logbook/internal/datadir"
)

// TestStateSlots: a torn write of the watermark damages only its own slot,
// and the previous watermark is read back.
func TestStateSlots(t *testing.T) {
	dir := t.TempDir()
	sf, err := openState(dir)
	if err != nil || sf.cur.Seq != 0 {
		t.Fatalf("new state: %+v, %v", sf, err)
	}
	for seq := uint64(1); seq <= 5; seq++ {
		s := sf.cur
		s.Seq = seq * 10
		if err := sf.write(s); err != nil {
			t.Fatal(err)
		}
	}
	sf.close()
	path := filepath.Join(dir, datadir.MirrorState)
	if st, _ := os.Stat(path); st.Size() != stateSize {
		t.Fatalf("size %d", st.Size())
	}
	sf, err = openState(dir)
	if err != nil || sf.cur.Seq != 50 {
		t.Fatalf("reopened: %+v, %v", sf.cur, err)
	}
	slot := int64(sf.cur.Gen%2) * slotSize
	sf.close()
	// Tear the newest slot: the one before it is the watermark.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte(`{"torn`), slot+20); err != nil {
		t.Fatal(err)
	}
	sf, err = openState(dir)
	if err != nil || sf.cur.Seq != 40 {
		t.Fatalf("after a torn slot: %+v, %v; want seq 40", sf.cur, err)
	}
	sf.close()
	// Both torn: no watermark to trust.
	if _, err := f.WriteAt([]byte(`{"torn`), (slotSize-slot)+20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := openState(dir); !errors.Is(err, ErrState) {
		t.Fatalf("both slots torn: %v, want ErrState", err)
	}
}
