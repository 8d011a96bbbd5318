package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// Input helpers shared by the commands that read rollout files.

// openRollout opens a .jsonl or .jsonl.zst rollout file; its error names the
// path once and says what is wrong in plain words.
func openRollout(path string) (*rollout.File, error) {
	f, err := rollout.OpenFile(path)
	if err == nil {
		return f, nil
	}
	return nil, fileError(path, err)
}

// fileError rewrites an *fs.PathError ("open x: no such file or directory")
// as "x: no such file"; other errors already name the file.
func fileError(path string, err error) error {
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		return err
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s: no such file", path)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%s: permission denied", path)
	}
	return fmt.Errorf("%s: %v", path, pe.Err)
}

// notRollout explains a log in which replay found no session_meta: what
// its first line is, since that is usually the answer (another file format,
// or a first line that was damaged).
func notRollout(log rollout.Log) error {
	name := log.Name()
	cur, err := log.Forward(0)
	if err != nil {
		return fileError(name, err)
	}
	defer cur.Close()
	e, err := cur.Next()
	var ce *rollout.CorruptionError
	switch {
	case errors.Is(err, io.EOF):
		return fmt.Errorf("%s: empty file: not a rollout (no session_meta record)", name)
	case errors.As(err, &ce):
		return fmt.Errorf("%s line %d: not a rollout record (%s: %s); no session_meta record found: not a rollout, or its first line is damaged",
			name, ce.Line, rollout.KindName(ce.Kind), ce.Detail)
	case err != nil:
		return err
	}
	return fmt.Errorf("%s: no session_meta record (line %d is a %s record): not a rollout, or its head was lost", name, e.Line, e.Type)
}
