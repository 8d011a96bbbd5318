package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/logbook-agents/logbook/internal/stream"
)

// TestRecoveryStreamLeaderKilled: a tree run on a three-node cluster (R3
// streams) while the ROLLOUTS stream leader is shut down hard in the middle
// of it. The run completes on the two nodes left; no record a writer was told
// was acknowledged is lost (each thread's mirror file holds them, and the
// mirror equals JetStream); nothing was executed twice; the tree equals the
// ground truth.
func TestRecoveryStreamLeaderKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("a 3-node cluster and real processes")
	}
	b, c := startSimCluster(t, "3s")
	nc, err := nats.Connect(c.URLs(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	info := func() *jetstream.StreamInfo {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, stream.StreamRollouts)
		if err != nil {
			return nil
		}
		i, err := s.Info(ctx)
		if err != nil {
			return nil
		}
		return i
	}

	run := b.startRun(t, "--seed", "17", "--agents", "12", "--depth", "2", "--turns", "3")
	var before *jetstream.StreamInfo
	if !poll(60*time.Second, func() bool {
		before = info()
		return run.finished() || before != nil && before.Cluster != nil && before.Cluster.Leader != "" && before.State.Msgs >= 60
	}) || run.finished() {
		t.Fatalf("the run did not get going before the leader could be killed (finished: %v, err %v)", run.finished(), run.err)
	}
	leader := before.Cluster.Leader
	killed := time.Now()
	c.Kill(leader)
	t.Logf("ROLLOUTS leader %s shut down at %d messages", leader, before.State.Msgs)

	s := run.wait(t, b)
	t.Logf("the run completed %v after the kill", time.Since(killed).Round(time.Millisecond))
	if after := info(); after == nil || after.Cluster == nil || after.Cluster.Leader == leader || after.Cluster.Leader == "" {
		t.Errorf("no new ROLLOUTS leader: %+v", after)
	}
	if s.ExecutedTwice != 0 || s.Threads != s.Planned {
		t.Fatalf("summary %+v", s)
	}
	b.checkAgainstTruth(t, s)
}
