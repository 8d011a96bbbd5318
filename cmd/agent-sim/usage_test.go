package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestUsageErrors: flags a command cannot run with are usage errors (exit
// 2, one line naming the flag) caught before anything starts.
func TestUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"worker", "--nats", "nats://127.0.0.1:1", "--think", "-1s"}, "--think"},
		{[]string{"crash", "--rounds", "1", "--cluster", "2"}, "--cluster"},
		{[]string{"crash", "--rounds", "1", "--cluster", "3", "--nats", "nats://127.0.0.1:1"}, "--cluster"},
		{[]string{"crash", "--rounds", "1", "--points", "nats-leader-kill"}, "--cluster"},
		{[]string{"nats-node", "--name", "n1"}, "--store"},
		{[]string{"nats-node", "--name", "n1", "--store", "x", "--routes", "nats://127.0.0.1:1", "--fsync", "sometimes"}, "--fsync"},
	} {
		var stdout, stderr bytes.Buffer
		code := execute(context.Background(), c.args, &stdout, &stderr)
		if code != exitUsage || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), c.want) || stdout.Len() != 0 {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want exit 2 naming %s", c.args, code, stderr.String(), stdout.String(), c.want)
		}
	}
}
