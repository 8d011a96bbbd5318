package auth_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/logbook-agents/logbook/internal/stream"
	"github.com/logbook-agents/logbook/internal/stream/auth"
)

// With users configured, a client without credentials, with an unknown
// nkey, or with a wrong password is refused at connect.
func TestStrangersRefused(t *testing.T) {
	r := startRig(t)
	stranger, _, err := auth.NewNKey()
	if err != nil {
		t.Fatal(err)
	}
	strangerFile := filepath.Join(r.dir, "stranger.nk")
	if err := auth.WriteSecret(strangerFile, stranger); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]stream.Credentials{
		"no credentials":  {},
		"unknown nkey":    {NKeyFile: strangerFile},
		"wrong password":  {User: uAlice, Password: "not-it"},
		"unknown user":    {User: "mallory", Password: "x"},
		"token, no users": {Token: "guess"},
	} {
		nc, _, err := r.tryDial(c)
		if err == nil {
			nc.Close()
			t.Errorf("%s: connected", name)
			continue
		}
		if !errors.Is(err, nats.ErrAuthorization) && !strings.Contains(strings.ToLower(err.Error()), "authorization") {
			t.Errorf("%s: %v, want an authorization error", name, err)
		}
	}
	pw, err := os.ReadFile(filepath.Join(r.dir, "alice.pw"))
	if err != nil {
		t.Fatal(err)
	}
	nc, _, err := r.tryDial(stream.Credentials{User: uAlice, Password: string(pw)})
	if err != nil {
		t.Fatalf("right password: %v", err)
	}
	nc.Close()
}

// An agent writes its rollouts, takes its leases, records its thread
// (through the coordinator), sends mail and reads its own mailbox, with no
// permission violation.
func TestAgentDoesItsWork(t *testing.T) {
	r := startRig(t)
	for _, user := range []string{uAgent, uScoped} {
		b, _, v := r.bus(t, user)
		ctx := ctxT(t, 20*time.Second)
		rid := "r-" + user
		if cur := write(t, b, "t1", rid); cur != "r-"+uAgent {
			t.Fatalf("%s: record thread t1: %q, want the first writer's r-%s", user, cur, uAgent)
		}
		if e, err := r.coord.Threads().Get(ctx, "t1"); err != nil || string(e.Value()) != "r-"+uAgent {
			t.Fatalf("%s: THREADS t1: %v", user, err)
		}
		es, err := b.ReadAll(ctx, rid, 1)
		if err != nil || len(es) != 2 {
			t.Fatalf("%s: read back: %d records, %v", user, len(es), err)
		}
		if _, _, err := b.PublishMail(ctx, "t1", "t2", "m-"+user, []byte(`{"x":1}`)); err != nil {
			t.Fatalf("%s: mail: %v", user, err)
		}
		if _, _, err := r.coord.PublishMail(ctx, "t2", "t1", "to-"+user, []byte(`{"y":2}`)); err != nil {
			t.Fatal(err)
		}
		mb, err := b.Mailbox(ctx, "t1", 5*time.Second)
		if err != nil {
			t.Fatalf("%s: mailbox: %v", user, err)
		}
		got := 0
		if err := mb.Take(ctx, 1, 3*time.Second, func(m *stream.Mail) error { got++; return m.Ack(ctx) }); err != nil || got != 1 {
			t.Fatalf("%s: take mail: %d, %v", user, got, err)
		}
		if pending, err := b.MailPending(ctx, "t1", "to-"+user); err != nil || pending {
			t.Fatalf("%s: mail still pending after its ack: %v %v", user, pending, err)
		}
		if _, err := b.ReadLease(ctx, "t1"); err != nil {
			t.Fatalf("%s: read lease: %v", user, err)
		}
		if err := mb.Close(ctx); err != nil {
			t.Fatalf("%s: close its mailbox: %v", user, err)
		}
		// A worker: heartbeat, take an offer the coordinator made, ack it.
		if err := b.Heartbeat(ctx, stream.WorkerInfo{ID: "w1", Capacity: 1}); err != nil {
			t.Fatalf("%s: heartbeat: %v", user, err)
		}
		if w, ok, err := b.Worker(ctx, "w1"); err != nil || !ok || w.Capacity != 1 {
			t.Fatalf("%s: read its own heartbeat back: %v %v %v", user, w, ok, err)
		}
		if _, err := r.coord.Offer(ctx, "t-"+user, "test"); err != nil {
			t.Fatal(err)
		}
		offers, err := b.OpenOffers(ctx)
		if err != nil {
			t.Fatalf("%s: bind to the offers: %v", user, err)
		}
		taken, err := offers.Take(ctx, 1, 3*time.Second)
		if err != nil || len(taken) != 1 || taken[0].Thread != "t-"+user {
			t.Fatalf("%s: take an offer: %v %v", user, taken, err)
		}
		if err := taken[0].Ack(ctx); err != nil {
			t.Fatalf("%s: ack an offer: %v", user, err)
		}
		// Its own tools' traffic on its application subjects.
		if user == uScoped {
			sub, err := b.Conn().SubscribeSync("tools.echo")
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Conn().Publish("tools.echo", []byte("hi")); err != nil {
				t.Fatal(err)
			}
			if _, err := sub.NextMsg(3 * time.Second); err != nil {
				t.Fatalf("%s: its application subject: %v", user, err)
			}
			_ = sub.Unsubscribe()
		}
		v.none(t, user+" doing its work")
	}
}

// What an agent's credentials must not do fails with a permission error,
// and the bus is unchanged.
func TestAgentCannotWreck(t *testing.T) {
	r := startRig(t)
	coordBus := r.coord
	write(t, coordBus, "victim", "r-victim")
	if _, _, err := coordBus.PublishMail(context.Background(), "x", "victim", "m1", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := coordBus.Mailbox(ctxT(t, 5*time.Second), "victim", 0); err != nil {
		t.Fatal(err)
	}
	for _, user := range []string{uAgent, uScoped} {
		t.Run(user, func(t *testing.T) {
			b, nc, v := r.bus(t, user)
			js := b.JetStream()
			api := "$JS.API."
			v.denied(t, "purge ROLLOUTS", api+"STREAM.PURGE.ROLLOUTS", func(ctx context.Context) error {
				s, err := js.Stream(ctx, stream.StreamRollouts)
				if err != nil {
					return err
				}
				return s.Purge(ctx)
			})
			v.denied(t, "purge a rollout", api+"STREAM.PURGE.ROLLOUTS", func(ctx context.Context) error {
				s, err := js.Stream(ctx, stream.StreamRollouts)
				if err != nil {
					return err
				}
				return s.Purge(ctx, jetstream.WithPurgeSubject(stream.RolloutSubject("r-victim")))
			})
			v.denied(t, "purge MAIL", api+"STREAM.PURGE.MAIL", func(ctx context.Context) error {
				s, err := js.Stream(ctx, stream.StreamMail)
				if err != nil {
					return err
				}
				return s.Purge(ctx)
			})
			v.denied(t, "delete ROLLOUTS", api+"STREAM.DELETE.ROLLOUTS", func(ctx context.Context) error {
				return js.DeleteStream(ctx, stream.StreamRollouts)
			})
			v.denied(t, "delete MAIL", api+"STREAM.DELETE.MAIL", func(ctx context.Context) error {
				return js.DeleteStream(ctx, stream.StreamMail)
			})
			v.denied(t, "delete a message", api+"STREAM.MSG.DELETE.ROLLOUTS", func(ctx context.Context) error {
				s, err := js.Stream(ctx, stream.StreamRollouts)
				if err != nil {
					return err
				}
				return s.DeleteMsg(ctx, 1)
			})
			v.denied(t, "delete the workers' consumer", api+"CONSUMER.DELETE.WORK."+stream.WorkConsumer, func(ctx context.Context) error {
				return js.DeleteConsumer(ctx, stream.StreamWork, stream.WorkConsumer)
			})
			v.denied(t, "change the workers' consumer", api+"CONSUMER.CREATE.WORK."+stream.WorkConsumer, func(ctx context.Context) error {
				_, err := js.CreateOrUpdateConsumer(ctx, stream.StreamWork, jetstream.ConsumerConfig{Durable: stream.WorkConsumer,
					FilterSubject: "work.>", AckPolicy: jetstream.AckExplicitPolicy, MaxDeliver: 1})
				return err
			})
			v.denied(t, "delete a bucket's consumer", api+"CONSUMER.DELETE.KV_LEASES.x", func(ctx context.Context) error {
				return js.DeleteConsumer(ctx, "KV_LEASES", "x")
			})
			v.denied(t, "update a stream", api+"STREAM.UPDATE.ROLLOUTS", func(ctx context.Context) error {
				_, err := js.UpdateStream(ctx, stream.RolloutsConfig(1))
				return err
			})
			v.denied(t, "create a stream", api+"STREAM.CREATE.EVIL", func(ctx context.Context) error {
				_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "EVIL", Subjects: []string{"evil.>"}})
				return err
			})
			v.denied(t, "read ROLLOUTS with a consumer", api+"CONSUMER.CREATE.ROLLOUTS", func(ctx context.Context) error {
				_, err := js.CreateConsumer(ctx, stream.StreamRollouts, jetstream.ConsumerConfig{FilterSubject: "rollout.>"})
				return err
			})
			v.denied(t, "write a THREADS pointer", "$KV.THREADS.victim", func(ctx context.Context) error {
				_, err := b.Threads().Put(ctx, "victim", []byte("r-forged"))
				return err
			})
			v.denied(t, "delete a THREADS pointer", "$KV.THREADS.victim", func(ctx context.Context) error {
				return b.Threads().Delete(ctx, "victim")
			})
			v.denied(t, "publish outside the allowed subjects", "logbook.evil", func(ctx context.Context) error {
				if err := nc.Publish("logbook.evil", []byte("x")); err != nil {
					return err
				}
				if err := nc.FlushWithContext(ctx); err != nil {
					return err
				}
				return errors.New("no error is returned for a plain publish")
			})
			if user == uScoped {
				v.denied(t, "take another thread's lease", "$KV.LEASES.victim", func(ctx context.Context) error {
					_, err := b.TakeLease(ctx, "victim", stream.LeaseOptions{Holder: "evil", Force: true})
					return err
				})
				v.denied(t, "open another thread's mailbox", api+"CONSUMER.CREATE.MAIL.mail-victim", func(ctx context.Context) error {
					_, err := b.Mailbox(ctx, "victim", 0)
					return err
				})
				v.denied(t, "delete another thread's mailbox", api+"CONSUMER.DELETE.MAIL.mail-victim", func(ctx context.Context) error {
					return js.DeleteConsumer(ctx, stream.StreamMail, stream.MailConsumerName("victim"))
				})
				v.denied(t, "heartbeat as another worker", "$KV.WORKERS.w-victim", func(ctx context.Context) error {
					return b.Heartbeat(ctx, stream.WorkerInfo{ID: "w-victim", Capacity: 1})
				})
				v.denied(t, "subscribe beyond its application subjects", "other.x", func(ctx context.Context) error {
					sub, err := nc.SubscribeSync("other.x")
					if err != nil {
						return err
					}
					defer sub.Unsubscribe()
					if err := nc.FlushWithContext(ctx); err != nil {
						return err
					}
					return errors.New("no error is returned for a plain subscribe")
				})
			}
		})
	}
	// Nothing changed.
	ctx := ctxT(t, 10*time.Second)
	for _, name := range []string{stream.StreamRollouts, stream.StreamMail} {
		s, err := coordBus.JetStream().Stream(ctx, name)
		if err != nil {
			t.Fatalf("%s after the attempts: %v", name, err)
		}
		if s.CachedInfo().State.Msgs == 0 {
			t.Fatalf("%s emptied", name)
		}
	}
	if e, err := coordBus.Threads().Get(ctx, "victim"); err != nil || string(e.Value()) != "r-victim" {
		t.Fatalf("THREADS victim after the attempts: %v", err)
	}
	if _, err := coordBus.JetStream().Consumer(ctx, stream.StreamMail, stream.MailConsumerName("victim")); err != nil {
		t.Fatalf("victim's mailbox consumer after the attempts: %v", err)
	}
}

// The coordinator's thread-record service records only a rollout whose
// first record is the thread's session_meta, and never moves a pointer.
func TestRecordThreadChecks(t *testing.T) {
	r := startRig(t)
	b, _, _ := r.bus(t, uAgent)
	write(t, b, "t9", "r9")
	ctx := ctxT(t, 10*time.Second)
	// r9 names t9, not t10.
	if _, err := b.RecordThread(ctx, "t10", "r9"); !errors.Is(err, stream.ErrRecordRefused) {
		t.Fatalf("record t10 -> r9 (names t9): %v", err)
	}
	if _, err := b.RecordThread(ctx, "t11", "nothing-here"); !errors.Is(err, stream.ErrRecordRefused) {
		t.Fatalf("record a rollout not on the bus: %v", err)
	}
	write(t, b, "t9b", "r9b")
	if cur, err := b.RecordThread(ctx, "t9", "r9b"); err != nil || cur != "r9" {
		t.Fatalf("re-record t9 -> r9b: %q %v, want r9 kept", cur, err)
	}
}

// The operator and the coordinator do their work (the CLI's commands run as
// operator in cmd/coordinator's TestServeWithCredentials, serve's mirror as
// coordinator) but delete no stream and purge nothing they do not need.
func TestOperatorAndCoordinatorLimits(t *testing.T) {
	r := startRig(t)
	write(t, r.coord, "th", "r-th")
	for _, user := range []string{uOperator, uCoord} {
		t.Run(user, func(t *testing.T) {
			b, _, v := r.bus(t, user)
			js := b.JetStream()
			ctx := ctxT(t, 20*time.Second)
			// What they need: list THREADS (an ordered consumer), write it,
			// read rollouts, leases.
			keys, err := b.Threads().ListKeys(ctx)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for range keys.Keys() {
				n++
			}
			if n == 0 {
				t.Fatal("ListKeys: no keys")
			}
			if _, err := b.Threads().Create(ctx, "new-"+user, []byte("r-x")); err != nil {
				t.Fatalf("THREADS create: %v", err)
			}
			if es, err := b.ReadAll(ctx, "r-th", 1); err != nil || len(es) != 2 {
				t.Fatalf("read: %d %v", len(es), err)
			}
			write(t, b, "th-"+user, "r-"+user)
			if user == uOperator {
				s, err := js.Stream(ctx, stream.StreamRollouts)
				if err != nil {
					t.Fatal(err)
				}
				if err := s.Purge(ctx, jetstream.WithPurgeSubject(stream.RolloutSubject("r-"+user))); err != nil {
					t.Fatalf("gc's purge of one rollout: %v", err)
				}
			}
			v.none(t, user+" doing its work")
			api := "$JS.API."
			v.denied(t, "delete ROLLOUTS", api+"STREAM.DELETE.ROLLOUTS", func(ctx context.Context) error {
				return js.DeleteStream(ctx, stream.StreamRollouts)
			})
			v.denied(t, "purge MAIL", api+"STREAM.PURGE.MAIL", func(ctx context.Context) error {
				s, err := js.Stream(ctx, stream.StreamMail)
				if err != nil {
					return err
				}
				return s.Purge(ctx)
			})
			v.denied(t, "purge LEASES", api+"STREAM.PURGE.KV_LEASES", func(ctx context.Context) error {
				s, err := js.Stream(ctx, "KV_"+stream.BucketLeases)
				if err != nil {
					return err
				}
				return s.Purge(ctx)
			})
			v.denied(t, "delete a message", api+"STREAM.MSG.DELETE.ROLLOUTS", func(ctx context.Context) error {
				s, err := js.Stream(ctx, stream.StreamRollouts)
				if err != nil {
					return err
				}
				return s.DeleteMsg(ctx, 1)
			})
			v.denied(t, "update a stream", api+"STREAM.UPDATE.ROLLOUTS", func(ctx context.Context) error {
				_, err := js.UpdateStream(ctx, stream.RolloutsConfig(1))
				return err
			})
			if user == uCoord {
				v.denied(t, "purge ROLLOUTS", api+"STREAM.PURGE.ROLLOUTS", func(ctx context.Context) error {
					s, err := js.Stream(ctx, stream.StreamRollouts)
					if err != nil {
						return err
					}
					return s.Purge(ctx)
				})
			} else {
				v.denied(t, "create a stream", api+"STREAM.CREATE.EVIL", func(ctx context.Context) error {
					_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "EVIL", Subjects: []string{"evil.>"}})
					return err
				})
			}
		})
	}
}
