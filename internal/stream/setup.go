package stream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// DefaultLeaseTTL is the TTL of the LEASES bucket: a crashed writer's thread
// can be taken over this long after its last renewal.
const DefaultLeaseTTL = 15 * time.Second

// DedupeWindow is the Duplicates window of ROLLOUTS and MAIL.
const DedupeWindow = 2 * time.Minute

// SetupConfig says how to create the streams and buckets.
type SetupConfig struct {
	Replicas int           // 0 means 1
	LeaseTTL time.Duration // 0 means DefaultLeaseTTL
}

func (c SetupConfig) withDefaults() SetupConfig {
	if c.Replicas <= 0 {
		c.Replicas = 1
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	return c
}

// RolloutsConfig is the configuration of ROLLOUTS: every rollout forever
// (no age, size or count limit), file storage, dedupe window, direct gets.
func RolloutsConfig(replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        StreamRollouts,
		Description: "Logbook rollouts: one subject per rollout, append-only JSONL packs",
		Subjects:    []string{rolloutPrefix + ">"},
		Retention:   jetstream.LimitsPolicy,
		MaxMsgs:     -1,
		MaxBytes:    -1,
		MaxAge:      0,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
		Duplicates:  DedupeWindow,
		AllowDirect: true,
		Discard:     jetstream.DiscardOld,
	}
}

// MailConfig is the configuration of MAIL: a work queue, so a message stays
// until its receiver acknowledges it and is removed then.
func MailConfig(replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        StreamMail,
		Description: "Logbook cross-thread mail: mail.<thread_id>, kept until received",
		Subjects:    []string{mailPrefix + ">"},
		Retention:   jetstream.WorkQueuePolicy,
		MaxMsgs:     -1,
		MaxBytes:    -1,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
		Duplicates:  DedupeWindow,
		AllowDirect: true,
	}
}

func threadsConfig(replicas int) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:      BucketThreads,
		Description: "Logbook: thread id -> current rollout id",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
	}
}

func leasesConfig(replicas int, ttl time.Duration) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:      BucketLeases,
		Description: "Logbook: thread id -> writer lease; its revision is the writer's epoch",
		History:     1,
		TTL:         ttl,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
	}
}

// Setup creates ROLLOUTS, MAIL, WORK, THREADS, LEASES and WORKERS if they
// are missing, and the workers' consumer on WORK. It is idempotent; an existing one whose configuration differs on a field that
// matters (subjects, retention, storage, replicas, limits, lease TTL) is an
// ErrConfigMismatch naming the stream and the field, and is never changed.
func Setup(ctx context.Context, js jetstream.JetStream, cfg SetupConfig) error {
	cfg = cfg.withDefaults()
	for _, sc := range []jetstream.StreamConfig{RolloutsConfig(cfg.Replicas), MailConfig(cfg.Replicas), WorkConfig(cfg.Replicas)} {
		if err := ensureStream(ctx, js, sc); err != nil {
			return err
		}
	}
	for _, kc := range []jetstream.KeyValueConfig{threadsConfig(cfg.Replicas), leasesConfig(cfg.Replicas, cfg.LeaseTTL), workersConfig(cfg.Replicas, cfg.LeaseTTL)} {
		if err := ensureBucket(ctx, js, kc); err != nil {
			return err
		}
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, StreamWork, workConsumerConfig(cfg.LeaseTTL)); err != nil {
		return fmt.Errorf("stream: set up the workers' consumer on %s: %w", StreamWork, err)
	}
	return nil
}

func ensureStream(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig) error {
	s, err := js.Stream(ctx, want.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		s, err = js.CreateStream(ctx, want)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			s, err = js.Stream(ctx, want.Name) // created meanwhile, perhaps differently
		}
	}
	if err != nil {
		return fmt.Errorf("stream: set up stream %s: %w", want.Name, err)
	}
	return checkStream(want.Name, "stream", s.CachedInfo().Config, want)
}

func ensureBucket(ctx context.Context, js jetstream.JetStream, want jetstream.KeyValueConfig) error {
	_, err := js.KeyValue(ctx, want.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		_, err = js.CreateKeyValue(ctx, want)
		if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("stream: set up bucket %s: %w", want.Bucket, err)
	}
	s, err := js.Stream(ctx, "KV_"+want.Bucket)
	if err != nil {
		return fmt.Errorf("stream: set up bucket %s: %w", want.Bucket, err)
	}
	got := s.CachedInfo().Config
	return checkStream(want.Bucket, "bucket", got, jetstream.StreamConfig{
		Subjects:          []string{"$KV." + want.Bucket + ".>"},
		Retention:         jetstream.LimitsPolicy,
		MaxMsgs:           -1,
		MaxBytes:          -1,
		MaxAge:            want.TTL,
		MaxMsgsPerSubject: int64(want.History),
		Storage:           want.Storage,
		Replicas:          want.Replicas,
	})
}

// checkStream compares the fields that matter; the first difference is the
// error.
func checkStream(name, kind string, got, want jetstream.StreamConfig) error {
	unlimited := func(v int64) int64 {
		if v <= 0 {
			return -1
		}
		return v
	}
	mismatch := func(field string, g, w any) error {
		return fmt.Errorf("%w: %s %s has %s %v, Logbook needs %v (it is never changed automatically; fix or remove it)",
			ErrConfigMismatch, kind, name, field, g, w)
	}
	switch {
	case !slices.Equal(got.Subjects, want.Subjects):
		return mismatch("subjects", got.Subjects, want.Subjects)
	case got.Retention != want.Retention:
		return mismatch("retention", got.Retention, want.Retention)
	case got.Storage != want.Storage:
		return mismatch("storage", got.Storage, want.Storage)
	case max(got.Replicas, 1) != max(want.Replicas, 1):
		return mismatch("replicas", got.Replicas, want.Replicas)
	case got.MaxAge != want.MaxAge:
		return mismatch("max age", got.MaxAge, want.MaxAge)
	case unlimited(got.MaxBytes) != unlimited(want.MaxBytes):
		return mismatch("max bytes", got.MaxBytes, want.MaxBytes)
	case unlimited(got.MaxMsgs) != unlimited(want.MaxMsgs):
		return mismatch("max msgs", got.MaxMsgs, want.MaxMsgs)
	case unlimited(got.MaxMsgsPerSubject) != unlimited(want.MaxMsgsPerSubject):
		return mismatch("max msgs per subject", got.MaxMsgsPerSubject, want.MaxMsgsPerSubject)
	case got.MaxMsgSize > 0 && want.MaxMsgSize <= 0:
		return mismatch("max msg size", got.MaxMsgSize, "unlimited")
	case got.Sealed:
		return mismatch("sealed", true, false)
	}
	return nil
}
