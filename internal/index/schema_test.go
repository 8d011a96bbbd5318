package index

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logbook-agents/logbook/internal/datadir"
)

// TestOpenOlderSchema: an index.db of schema version 2 (testdata, as that
// build wrote it) is refused by a Reader, and Open replaces it with an
// index of this version filled from the mirror, which answers the lineage
// as the full scan does; nothing of the old file is left beside it.
func TestOpenOlderSchema(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	g := newAgentGen(3)
	g.tree(2)
	g.write(t, dir)
	ddl, err := os.ReadFile("testdata/schema-v2.sql")
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", datadir.IndexPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, string(ddl)); err != nil {
		t.Fatal(err)
	}
	db.Close()
	var se *SchemaError
	if _, err := OpenReader(ctx, datadir.IndexPath(dir)); !errors.Is(err, ErrSchema) || !errors.As(err, &se) || se.Found != 2 {
		t.Fatalf("a reader of a version 2 index: %v", err)
	}
	ix := openDir(t, dir)
	catchUp(t, ix)
	ix.Close()
	if !sameAnswer(t, "opened over version 2", indexAnswer(t, dir), scanAnswer(t, dir)) {
		t.Fatal("the index rebuilt over an older one answers otherwise than the full scan")
	}
	left, err := filepath.Glob(filepath.Join(dir, datadir.Index+".broken*"))
	if err != nil || len(left) != 0 {
		t.Errorf("the older index was kept aside: %v %v", left, err)
	}
	if _, err := OpenReader(ctx, datadir.IndexPath(dir)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains((&SchemaError{Path: "x", Found: 2}).Error(), "reindex") {
		t.Error("the schema error does not say what to do")
	}
}
