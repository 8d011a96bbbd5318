//go:build !unix

package serve

import (
	"errors"
	"os"
)

var errWouldBlock = errors.New("lock held")

func flock(*os.File) error { return errors.New("data dir locks need a unix system") }

func funlock(*os.File) {}
