package stream

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestFencingExternal runs the fencing scenarios on a bus the environment
// names: e2e's cluster configured from deploy/nats-cluster (TLS, accounts,
// permissions). The bus is set up (R3) with the coordinator's credentials;
// the writers connect with an agent's, so the scenarios also show that an
// agent's permissions are enough for everything a writer does.
//
//	LOGBOOK_FENCING_NATS        the cluster's URLs
//	LOGBOOK_FENCING_SETUP_NKEY  a coordinator's nkey seed file
//	LOGBOOK_FENCING_NKEY        an agent's nkey seed file
//	LOGBOOK_FENCING_TLS_CA      the CA of the cluster's certificates
func TestFencingExternal(t *testing.T) {
	url := os.Getenv("LOGBOOK_FENCING_NATS")
	if url == "" {
		t.Skip("LOGBOOK_FENCING_NATS not set (e2e's TestClusterFromTemplate sets it)")
	}
	ca := os.Getenv("LOGBOOK_FENCING_TLS_CA")
	dial := func(seed string) *nats.Conn {
		t.Helper()
		opts, err := Credentials{NKeyFile: seed, TLSCA: ca}.Options()
		if err != nil {
			t.Fatal(err)
		}
		nc, err := Dial(url, "fencing-external", quiet(), append(opts, nats.MaxReconnects(-1))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	js, err := jetstream.New(dial(os.Getenv("LOGBOOK_FENCING_SETUP_NKEY")))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the cluster to accept R3 streams", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return Setup(ctx, js, SetupConfig{Replicas: 3, LeaseTTL: fenceLeaseTTL}) == nil
	})
	agent := os.Getenv("LOGBOOK_FENCING_NKEY")
	open := func() *Bus {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		b, err := Open(ctx, dial(agent), Options{Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	busA, busB := open(), open()
	if cfg := mustStream(t, busA, StreamRollouts).Config; cfg.Replicas != 3 {
		t.Fatalf("ROLLOUTS has %d replicas", cfg.Replicas)
	}
	t.Run("zombie-resumer-race", func(t *testing.T) {
		for i := 0; i < raceRounds(); i++ {
			raceZombieResumer(t, busA, busB, id("ext-race-th", i), id("ext-race-ro", i))
		}
	})
	t.Run("retry-landed", func(t *testing.T) { retryLanded(t, busA, "ext") })
	t.Run("dedupe-trap", func(t *testing.T) { dedupeTrap(t, busA, true) })
}
