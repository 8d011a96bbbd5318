package serve

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/stream"
	"github.com/logbook-agents/logbook/internal/stream/auth"
)

// Security is how serve guards its listeners (docs/SECURITY.md).
type Security struct {
	// AuthFile is the users file of the embedded server (--auth); empty
	// means no authentication, allowed on loopback only.
	AuthFile string
	// TLSCert, TLSKey and TLSCA: with the embedded server, its certificate,
	// key and (mutual TLS) the CA client certificates must chain to.
	// With --nats they are client options, in Client.
	TLSCert, TLSKey, TLSCA string
	// Client is how the coordinator connects to --nats.
	Client stream.Credentials
	// HTTPTokenFile holds the bearer token the HTTP API requires
	// (--http-token); empty means none, allowed on loopback only.
	HTTPTokenFile string
}

// IsLoopback reports whether host (of a listen address) is loopback only:
// a loopback IP or "localhost". An empty host means every interface.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// checkExposure refuses a listener beyond loopback without credentials,
// before anything starts.
func checkExposure(cfg Config) error {
	if cfg.NATSURL == "" {
		host, _, err := stream.ParseListen(defaultString(cfg.NATSListen, "127.0.0.1:4222"))
		if err != nil {
			return fmt.Errorf("serve: --nats-listen: %w", err)
		}
		if !IsLoopback(host) && cfg.Security.AuthFile == "" {
			return fmt.Errorf("serve: --nats-listen %s is not a loopback address: give --auth FILE (the users who may connect, see docs/SECURITY.md) or listen on 127.0.0.1", cfg.NATSListen)
		}
	}
	host, _, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		return fmt.Errorf("serve: --listen %q: %w", cfg.Listen, err)
	}
	if !IsLoopback(host) && cfg.Security.HTTPTokenFile == "" {
		return fmt.Errorf("serve: --listen %s is not a loopback address: give --http-token FILE (the bearer token the HTTP API requires) or listen on 127.0.0.1", cfg.Listen)
	}
	sec := cfg.Security
	if cfg.NATSURL != "" && sec.AuthFile != "" {
		return errors.New("serve: --auth configures the embedded server; with --nats, users are the cluster's configuration (deploy/nats-cluster)")
	}
	if cfg.NATSURL == "" && sec.Client.Given() {
		return errors.New("serve: --creds, --nkey, --user, --password and --token are for --nats; the embedded server takes --auth FILE")
	}
	if cfg.NATSURL == "" && (sec.TLSCert != "") != (sec.TLSKey != "") {
		return errors.New("serve: TLS for the embedded server needs both --tls-cert and --tls-key")
	}
	if cfg.NATSURL == "" && sec.TLSCA != "" && sec.TLSCert == "" {
		return errors.New("serve: --tls-ca (mutual TLS) needs --tls-cert and --tls-key for the embedded server")
	}
	return nil
}

func defaultString(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// embedded is the authentication of the embedded server: its users and
// TLS, and the identities serve makes for itself at each start.
type embedded struct {
	users   []*server.User
	nkeys   []*server.NkeyUser
	tls     *server.TLSConfigOpts
	self    nkeys.KeyPair // the coordinator's own in-process identity
	cliSeed []byte        // the local operator's seed, for DATA/nats.nk
}

// loadEmbedded reads --auth and the TLS files. Without --auth it returns
// no users (no authentication).
func loadEmbedded(sec Security) (*embedded, error) {
	e := &embedded{}
	if sec.TLSCert != "" {
		tc, err := auth.ServerTLS(sec.TLSCert, sec.TLSKey, sec.TLSCA)
		if err != nil {
			return nil, fmt.Errorf("serve: %w", err)
		}
		e.tls = tc
	}
	if sec.AuthFile == "" {
		return e, nil
	}
	users, err := auth.LoadUsers(sec.AuthFile)
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	e.users, e.nkeys = users.ServerUsers()
	if e.self, err = nkeys.CreateUser(); err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	pub, _ := e.self.PublicKey()
	e.nkeys = append(e.nkeys, &server.NkeyUser{Nkey: pub, Permissions: auth.Permissions(auth.RoleCoordinator, auth.Scope{})})
	seed, public, err := auth.NewNKey()
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	e.cliSeed = seed
	e.nkeys = append(e.nkeys, &server.NkeyUser{Nkey: public, Permissions: auth.Permissions(auth.RoleOperator, auth.Scope{})})
	return e, nil
}

// connectOptions are the coordinator's in-process connection options.
func (e *embedded) connectOptions(log *slog.Logger) []nats.Option {
	opts := []nats.Option{nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		log.Warn("bus error", "err", err) // a permission violation says only this
	})}
	if e.self == nil {
		return opts
	}
	pub, _ := e.self.PublicKey()
	return append(opts, nats.Nkey(pub, e.self.Sign))
}

// withToken requires "Authorization: Bearer <token>" on every request
// when the token file is given.
func withToken(h http.Handler, tokenFile string) (http.Handler, error) {
	if tokenFile == "" {
		return h, nil
	}
	b, err := os.ReadFile(tokenFile)
	if err != nil {
		return nil, fmt.Errorf("serve: --http-token: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if len(token) < 16 {
		return nil, fmt.Errorf("serve: --http-token %s: the token is %d characters, want at least 16", tokenFile, len(token))
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="logbook"`)
			http.Error(w, "unauthorized: this coordinator's HTTP API needs its bearer token", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}), nil
}

// writeLocalKey writes DATA/nats.nk (0600), the seed of this run's local
// operator identity, when the embedded server has users: commands run on
// this machine through the data dir use it. Without --auth, any stale one
// is removed.
func writeLocalKey(dir string, e *embedded) error {
	path := datadir.KeyPath(dir)
	if e == nil || e.cliSeed == nil {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("serve: %w", err)
		}
		return nil
	}
	// Temp file (created 0600), fsync, rename: never readable by others.
	f, err := os.CreateTemp(dir, "."+datadir.NATSKey+".tmp*")
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer os.Remove(f.Name())
	_, err = f.Write(append(append([]byte{}, e.cliSeed...), '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("serve: local key %s: %w", path, err)
	}
	return nil
}

func removeLocalKey(dir string, e *embedded) {
	if e != nil && e.cliSeed != nil {
		os.Remove(datadir.KeyPath(dir))
	}
}

// LocalTLS is DATA/nats.tls: the TLS files a command run through the data
// dir connects with to an embedded server that speaks TLS only. It trusts
// the server's own certificate (a certificate in the trust pool is trusted
// as it is, whoever signed it) and, under mutual TLS (--tls-ca), presents
// it as its client certificate, so the certificate must allow client
// authentication too (no extended key usage, or clientAuth among them).
type LocalTLS struct {
	Trust string `json:"trust"`          // the server's certificate
	Cert  string `json:"cert,omitempty"` // mutual TLS: the client certificate
	Key   string `json:"key,omitempty"`
}

// writeLocalTLS writes DATA/nats.tls when the embedded server has TLS (and
// removes a stale one otherwise).
func writeLocalTLS(dir string, cfg Config) error {
	path := datadir.TLSPath(dir)
	sec := cfg.Security
	if cfg.NATSURL != "" || sec.TLSCert == "" {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("serve: %w", err)
		}
		return nil
	}
	abs := func(p string) string {
		if a, err := filepath.Abs(p); err == nil {
			return a
		}
		return p
	}
	lt := LocalTLS{Trust: abs(sec.TLSCert)}
	if sec.TLSCA != "" {
		lt.Cert, lt.Key = abs(sec.TLSCert), abs(sec.TLSKey)
	}
	b, _ := json.Marshal(lt)
	if err := writeFileAtomic(path, append(b, '\n')); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}
