package stream

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// boundedKV is a bucket whose every one-shot call is bounded by the call
// timeout and retried on transient failures (Bus.Call). Watches are left
// as they are: they live as long as their context.
type boundedKV struct {
	jetstream.KeyValue
	bus *Bus
}

func (kv *boundedKV) what(op string) string { return kv.Bucket() + " " + op }

func (kv *boundedKV) Get(ctx context.Context, key string) (e jetstream.KeyValueEntry, err error) {
	err = kv.bus.retry(ctx, kv.what("get"), func(ctx context.Context) (err error) {
		e, err = kv.KeyValue.Get(ctx, key)
		return err
	})
	return e, err
}

func (kv *boundedKV) GetRevision(ctx context.Context, key string, revision uint64) (e jetstream.KeyValueEntry, err error) {
	err = kv.bus.retry(ctx, kv.what("get revision"), func(ctx context.Context) (err error) {
		e, err = kv.KeyValue.GetRevision(ctx, key, revision)
		return err
	})
	return e, err
}

func (kv *boundedKV) Put(ctx context.Context, key string, value []byte) (rev uint64, err error) {
	err = kv.bus.retry(ctx, kv.what("put"), func(ctx context.Context) (err error) {
		rev, err = kv.KeyValue.Put(ctx, key, value)
		return err
	})
	return rev, err
}

func (kv *boundedKV) PutString(ctx context.Context, key string, value string) (uint64, error) {
	return kv.Put(ctx, key, []byte(value))
}

// Create retried after a first attempt that landed reports
// jetstream.ErrKeyExists: callers read the key to tell.
func (kv *boundedKV) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (rev uint64, err error) {
	err = kv.bus.retry(ctx, kv.what("create"), func(ctx context.Context) (err error) {
		rev, err = kv.KeyValue.Create(ctx, key, value, opts...)
		return err
	})
	return rev, err
}

// Update retried after a first attempt that landed reports a revision
// mismatch: callers read the key to tell.
func (kv *boundedKV) Update(ctx context.Context, key string, value []byte, revision uint64) (rev uint64, err error) {
	err = kv.bus.retry(ctx, kv.what("update"), func(ctx context.Context) (err error) {
		rev, err = kv.KeyValue.Update(ctx, key, value, revision)
		return err
	})
	return rev, err
}

func (kv *boundedKV) Delete(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	return kv.bus.retry(ctx, kv.what("delete"), func(ctx context.Context) error {
		return kv.KeyValue.Delete(ctx, key, opts...)
	})
}

func (kv *boundedKV) Purge(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	return kv.bus.retry(ctx, kv.what("purge"), func(ctx context.Context) error {
		return kv.KeyValue.Purge(ctx, key, opts...)
	})
}

// Keys reads every key within one bounded call, retried as a whole. The
// library's own Keys ends only when the watcher delivers its last initial
// value, which a leader lost mid-listing may never do; this one stops at
// the call timeout.
func (kv *boundedKV) Keys(ctx context.Context, opts ...jetstream.WatchOpt) ([]string, error) {
	opts = append(opts, jetstream.IgnoreDeletes(), jetstream.MetaOnly())
	return kv.keys(ctx, func(ctx context.Context) (jetstream.KeyWatcher, error) { return kv.KeyValue.WatchAll(ctx, opts...) })
}

// ListKeys is Keys listed from memory; no keys is an empty list.
func (kv *boundedKV) ListKeys(ctx context.Context, opts ...jetstream.WatchOpt) (jetstream.KeyLister, error) {
	keys, err := kv.Keys(ctx, opts...)
	if err != nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, err
	}
	return listed(keys), nil
}

func (kv *boundedKV) ListKeysFiltered(ctx context.Context, filters ...string) (jetstream.KeyLister, error) {
	keys, err := kv.keys(ctx, func(ctx context.Context) (jetstream.KeyWatcher, error) {
		return kv.KeyValue.WatchFiltered(ctx, filters, jetstream.IgnoreDeletes(), jetstream.MetaOnly())
	})
	if err != nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, err
	}
	return listed(keys), nil
}

// keys collects the keys a watcher's initial values name (sorted, each
// once); none is jetstream.ErrNoKeysFound, as the library says it.
func (kv *boundedKV) keys(ctx context.Context, watch func(context.Context) (jetstream.KeyWatcher, error)) ([]string, error) {
	var keys []string
	err := kv.bus.retry(ctx, kv.what("keys"), func(ctx context.Context) error {
		w, err := watch(ctx)
		if err != nil {
			return err
		}
		defer w.Stop() //nolint:errcheck // stopping a watcher we are done with
		keys = keys[:0]
		for {
			select {
			case e, ok := <-w.Updates():
				if !ok {
					return errListingCut
				}
				if e == nil {
					return nil // the end of the initial values
				}
				keys = append(keys, e.Key())
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	})
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, jetstream.ErrNoKeysFound
	}
	slices.Sort(keys)
	return slices.Compact(keys), nil
}

func (kv *boundedKV) History(ctx context.Context, key string, opts ...jetstream.WatchOpt) (h []jetstream.KeyValueEntry, err error) {
	err = kv.bus.retry(ctx, kv.what("history"), func(ctx context.Context) (err error) {
		h, err = kv.KeyValue.History(ctx, key, opts...)
		return err
	})
	return h, err
}

func (kv *boundedKV) Status(ctx context.Context) (st jetstream.KeyValueStatus, err error) {
	err = kv.bus.retry(ctx, kv.what("status"), func(ctx context.Context) (err error) {
		st, err = kv.KeyValue.Status(ctx)
		return err
	})
	return st, err
}

func (kv *boundedKV) PurgeDeletes(ctx context.Context, opts ...jetstream.KVPurgeOpt) error {
	return kv.bus.retry(ctx, kv.what("purge deletes"), func(ctx context.Context) error {
		return kv.KeyValue.PurgeDeletes(ctx, opts...)
	})
}

// errListingCut: a watcher closed before its initial values ended (retried).
var errListingCut = fmt.Errorf("stream: key listing cut short: %w", nats.ErrTimeout)

// listed is a KeyLister over keys already read.
type listed []string

func (l listed) Keys() <-chan string {
	ch := make(chan string, len(l))
	for _, k := range l {
		ch <- k
	}
	close(ch)
	return ch
}

func (l listed) Stop() error { return nil }
