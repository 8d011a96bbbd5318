package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeEmbeddedTLS: `serve --auth --tls-cert --tls-key --tls-ca` makes
// the embedded server speak TLS only and ask for client certificates
// chaining to the CA (mutual TLS). The coordinator itself keeps serving
// (its in-process identity); an operator with its nkey, the CA and a client
// certificate runs commands; without the CA the server's certificate is not
// trusted, without a client certificate the server refuses it.
func TestServeEmbeddedTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	dir := t.TempDir()
	ca, cert, key := certs(t, dir)
	users := filepath.Join(dir, "users.json")
	op := filepath.Join(dir, "op.nk")
	bin := coordinatorBin(t)
	runCoordinator(t, bin, "credentials", "new", "--role", "operator", "--name", "op", "--out", op, "--auth", users)
	data := filepath.Join(dir, "data")
	srv := startChild(t, bin, nil, "serve", "--data", data, "--nats-listen", "127.0.0.1:0", "--listen", "127.0.0.1:0",
		"--auth", users, "--tls-cert", cert, "--tls-key", key, "--tls-ca", ca)
	natsAddr, httpAddr := boundAddrs(t, srv, data)
	waitHealthy(t, srv, httpAddr, 60*time.Second)
	url := natsAddr // tls://host:port: nats.url names the scheme clients must use
	if !strings.HasPrefix(url, "tls://") {
		t.Errorf("nats.url of a TLS-only server: %q, want tls://", url)
	}
	try := func(extra ...string) (string, error) {
		args := append([]string{"workers", "--nats", url, "--nkey", op, "--timeout", "5s"}, extra...)
		out, err := exec.Command(bin, args...).CombinedOutput()
		return string(out), err
	}
	if out, err := try("--tls-ca", ca, "--tls-cert", cert, "--tls-key", key); err != nil {
		t.Fatalf("operator over mutual TLS: %v\n%s\nserve:\n%s", err, out, lastLines(srv.stderr.String(), 20))
	}
	if out, err := try(); err == nil {
		t.Errorf("a plain connection to a TLS-only server succeeded:\n%s", out)
	}
	if out, err := try("--tls-cert", cert, "--tls-key", key); err == nil || !strings.Contains(out, "certificate") {
		t.Errorf("without the CA, the server's certificate was trusted: %v\n%s", err, out)
	}
	if out, err := try("--tls-ca", ca); err == nil {
		t.Errorf("without a client certificate, mutual TLS let it in:\n%s", out)
	}
	if out, err := exec.Command(bin, "verify", "--data", data).CombinedOutput(); err != nil {
		t.Errorf("verify --data (the local key, over TLS): %v\n%s", err, out)
	}
}
