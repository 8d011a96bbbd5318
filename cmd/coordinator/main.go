// Command coordinator is Logbook's daemon and CLI: it makes trees of AI agents
// recoverable from their append-only rollout logs. See docs/CLI.md.
package main

import (
	"context"
	"os"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
