package auth_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/crypto/bcrypt"

	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
	"github.com/logbook-agents/logbook/internal/stream/auth"
)

func quiet() *slog.Logger {
	if os.Getenv("LOGBOOK_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// rig is an embedded server with a users file of every role, set up and
// answering thread records as a coordinator does.
type rig struct {
	dir   string
	url   string
	seeds map[string]string // user name -> seed file
	ns    *server.Server
	coord *stream.Bus
}

// The users of the rig.
const (
	uCoord    = "coord"
	uOperator = "op"
	uAgent    = "agent"  // unscoped
	uScoped   = "worker" // threads t1 and t-worker, worker w1, application subjects tools.>
	uAlice    = "alice"  // operator with a password
)

func startRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{dir: t.TempDir(), seeds: map[string]string{}}
	users := &auth.Users{Version: auth.UsersVersion}
	for _, u := range []struct {
		name  string
		role  auth.Role
		scope auth.Scope
	}{
		{uCoord, auth.RoleCoordinator, auth.Scope{}},
		{uOperator, auth.RoleOperator, auth.Scope{}},
		{uAgent, auth.RoleAgent, auth.Scope{}},
		{uScoped, auth.RoleAgent, auth.Scope{Threads: []string{"t1", "t-" + uScoped}, Workers: []string{"w1"},
			Publish: []string{"tools.>"}, Subscribe: []string{"tools.>"}}},
	} {
		seed, pub, err := auth.NewNKey()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(r.dir, u.name+".nk")
		if err := auth.WriteSecret(path, seed); err != nil {
			t.Fatal(err)
		}
		r.seeds[u.name] = path
		if err := users.Add(auth.User{Name: u.name, Role: u.role, NKey: pub, Scope: u.scope}); err != nil {
			t.Fatal(err)
		}
	}
	// The cheapest bcrypt cost: the server checks the password in this
	// process, and at credentials new's cost that takes seconds under the
	// race detector on a loaded machine (the connect then times out).
	const pw = "alice-test-password-0123456789"
	h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	hash := string(h)
	if err := os.WriteFile(filepath.Join(r.dir, "alice.pw"), []byte(pw), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := users.Add(auth.User{Name: uAlice, Role: auth.RoleOperator, Password: hash}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(r.dir, "users.json")
	if err := users.Save(file); err != nil {
		t.Fatal(err)
	}
	loaded, err := auth.LoadUsers(file)
	if err != nil {
		t.Fatal(err)
	}
	su, nk := loaded.ServerUsers()
	ns, err := stream.StartServer(stream.ServerConfig{StoreDir: filepath.Join(r.dir, "nats"), Listen: "127.0.0.1:0",
		Fsync: stream.FsyncInterval, Logger: quiet(), Users: su, NKeys: nk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	r.ns, r.url = ns, ns.ClientURL()

	nc, _ := r.dial(t, stream.Credentials{NKeyFile: r.seeds[uCoord]})
	js, _ := jetstream.New(nc)
	ctx := ctxT(t, 30*time.Second)
	if err := stream.Setup(ctx, js, stream.SetupConfig{LeaseTTL: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if r.coord, err = stream.Open(ctx, nc, stream.Options{Logger: quiet()}); err != nil {
		t.Fatal(err)
	}
	sub, err := r.coord.ServeThreadRecords(quiet())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return r
}

// violations collects the permission violations the server reports to a
// connection (they arrive asynchronously: a denied request just never gets
// its answer).
type violations chan error

func (r *rig) dial(t *testing.T, c stream.Credentials) (*nats.Conn, violations) {
	t.Helper()
	nc, v, err := r.tryDial(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc, v
}

func (r *rig) tryDial(c stream.Credentials) (*nats.Conn, violations, error) {
	opts, err := c.Options()
	if err != nil {
		return nil, nil, err
	}
	v := make(violations, 64)
	opts = append(opts, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrPermissionViolation) {
			select {
			case v <- err:
			default:
			}
		}
	}))
	// A bcrypt check under the race detector on a loaded machine takes
	// seconds: give the connect more than Dial's default.
	opts = append(opts, nats.Timeout(20*time.Second))
	nc, err := stream.Dial(r.url, "test", quiet(), opts...)
	return nc, v, err
}

func (r *rig) bus(t *testing.T, user string) (*stream.Bus, *nats.Conn, violations) {
	t.Helper()
	nc, v := r.dial(t, stream.Credentials{NKeyFile: r.seeds[user]})
	b, err := stream.Open(ctxT(t, 10*time.Second), nc, stream.Options{Logger: quiet(), CallTimeout: time.Second})
	if err != nil {
		t.Fatalf("%s: open the bus: %v", user, err)
	}
	return b, nc, v
}

// none fails if the server reported a violation.
func (v violations) none(t *testing.T, what string) {
	t.Helper()
	select {
	case err := <-v:
		t.Fatalf("%s: %v", what, err)
	default:
	}
}

// denied runs op, which must fail, and waits for the server's permission
// violation naming subject.
func (v violations) denied(t *testing.T, what, subject string, op func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	if err := op(ctx); err == nil {
		t.Fatalf("%s: succeeded", what)
	}
	deadline := time.After(3 * time.Second)
	for {
		select {
		case err := <-v:
			if strings.Contains(err.Error(), `"`+subject) {
				t.Logf("%s: %v", what, err)
				return
			}
		case <-deadline:
			t.Fatalf("%s: no permission violation for %s", what, subject)
		}
	}
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func meta(thread, rolloutID string) rollout.Record {
	return rollout.New(time.Now(), 0, rollout.TypeSessionMeta, rollout.MustJSON(rollout.SessionMeta{
		ID: thread, RolloutID: rolloutID, Source: rollout.Source{Kind: "sim"}, Cwd: "/w",
		HistoryMode: rollout.HistoryLegacy, SchemaVersion: rollout.Version}))
}

func userMsg(text string) rollout.Record {
	return rollout.New(time.Now(), 0, rollout.TypeEventMsg, rollout.MustJSON(map[string]string{"type": rollout.EventUserMessage, "message": text}))
}

// write takes thread's lease on b, writes a rollout of two records, and
// records it in THREADS (a thread recorded already keeps its rollout).
func write(t *testing.T, b *stream.Bus, thread, rolloutID string) string {
	t.Helper()
	ctx := ctxT(t, 20*time.Second)
	l, err := b.TakeLease(ctx, thread, stream.LeaseOptions{Holder: "test"})
	if err != nil {
		t.Fatalf("lease %s: %v", thread, err)
	}
	defer l.Release(context.Background())
	w, err := b.OpenWriter(ctx, l, rolloutID, stream.WriterOptions{})
	if err != nil {
		t.Fatalf("writer %s: %v", rolloutID, err)
	}
	for _, rec := range []rollout.Record{meta(thread, rolloutID), userMsg("hello")} {
		if _, err := w.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatalf("write %s: %v", rolloutID, err)
	}
	cur, err := b.RecordThread(ctx, thread, rolloutID)
	if err != nil {
		t.Fatalf("record thread %s: %v", thread, err)
	}
	return cur
}
