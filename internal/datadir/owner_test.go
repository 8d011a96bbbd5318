package datadir

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestOnlyThisPackageSpellsTheLayout walks the module's non-test Go files
// and fails on any string literal naming a data dir entry inside a
// filepath.Join: the layout has one owner, this package.
func TestOnlyThisPackageSpellsTheLayout(t *testing.T) {
	names := map[string]bool{Lock: true, NATSURL: true, NATSStore: true, Rollouts: true,
		MirrorState: true, MirrorEpochs: true, Quarantine: true, Damaged: true, Index: true}
	root := filepath.Join("..", "..")
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); strings.HasPrefix(n, ".") && path != root || n == "testdata" {
				return filepath.SkipDir
			}
			if abs, _ := filepath.Abs(path); abs == mustAbs(t, ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Join" {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "filepath" {
				return true
			}
			for _, a := range call.Args {
				if lit, ok := a.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if s, _ := strconv.Unquote(lit.Value); names[s] {
						t.Errorf("%s: spells the data dir entry %q: use internal/datadir", fset.Position(lit.Pos()), s)
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("checked only %d files: the walk did not find the module", checked)
	}
}

func mustAbs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
