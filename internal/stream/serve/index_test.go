package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/index"
)

// TestGarbageIndexRebuilt: serve with a garbage index.db keeps it aside as
// index.db.broken-<time> and runs with a fresh index, not "without index".
func TestGarbageIndexRebuilt(t *testing.T) {
	dir := t.TempDir()
	garbage := bytes.Repeat([]byte("garbage!"), 1024)
	if err := os.WriteFile(datadir.IndexPath(dir), garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	info, stop := start(t, Config{DataDir: dir, NATSListen: "127.0.0.1:0", Listen: "127.0.0.1:0"})
	resp, err := http.Get("http://" + info.HTTPAddr + "/status")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		IndexErr string `json:"index_error"`
	}
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil || st.IndexErr != "" {
		t.Fatalf("status: index_error %q (%v)", st.IndexErr, err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	kept, _ := filepath.Glob(datadir.IndexPath(dir) + ".broken-*")
	if len(kept) != 1 {
		t.Fatalf("kept aside: %v", kept)
	}
	if b, _ := os.ReadFile(kept[0]); !bytes.Equal(b, garbage) {
		t.Fatalf("%s does not hold the bad file", kept[0])
	}
	r, err := index.OpenReader(context.Background(), datadir.IndexPath(dir))
	if err != nil {
		t.Fatalf("the new index: %v", err)
	}
	r.Close()
}
