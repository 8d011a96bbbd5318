//go:build !linux

package mirror

import "os"

func datasync(f *os.File) error { return f.Sync() }
