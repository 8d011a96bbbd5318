package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/logbook-agents/logbook/internal/stream"
	"github.com/logbook-agents/logbook/internal/stream/auth"
)

var (
	natsOnce sync.Once
	natsBin  string
	natsErr  error
)

// natsServerBin builds nats-server from the module's own dependency.
func natsServerBin(t *testing.T) string {
	t.Helper()
	natsOnce.Do(func() {
		dir := filepath.Dir(coordinatorBin(t)) // removed by TestMain
		natsBin = filepath.Join(dir, "nats-server")
		out, err := exec.Command("go", "build", "-o", natsBin, "github.com/nats-io/nats-server/v2").CombinedOutput()
		if err != nil {
			natsErr = errors.New("go build nats-server: " + err.Error() + "\n" + string(out))
		}
	})
	if natsErr != nil {
		t.Fatal(natsErr)
	}
	return natsBin
}

// certs writes a CA and a node certificate it signed (server and client
// auth, for 127.0.0.1 and localhost) into dir.
func certs(t *testing.T, dir string) (ca, cert, key string) {
	t.Helper()
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "logbook test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	nodeKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "logbook node"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &nodeKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalPKCS8PrivateKey(nodeKey)
	return write("ca.pem", "CERTIFICATE", caDER), write("node.pem", "CERTIFICATE", der), write("node-key.pem", "PRIVATE KEY", keyDER)
}

// natsNode is a nats-server process.
type natsNode struct {
	name    string
	client  string // host:port read from its log
	cluster string
	proc    *child
}

var (
	clientRe  = regexp.MustCompile(`Listening for client connections on (\S+)`)
	clusterRe = regexp.MustCompile(`Listening for route connections on (\S+)`)
)

// startTemplateNode starts nats-server on confDir/node.conf with the
// template's environment; ports are the OS's choice, read back from the log.
func startTemplateNode(t *testing.T, bin, confDir, name, routes, ca, cert, key string) *natsNode {
	t.Helper()
	q := func(s string) string { return `"` + s + `"` }
	env := []string{
		"LOGBOOK_NODE=" + q(name), "LOGBOOK_LISTEN=" + q("127.0.0.1:-1"), "LOGBOOK_CLUSTER_LISTEN=" + q("127.0.0.1:-1"),
		"LOGBOOK_ROUTES=" + routes, "LOGBOOK_STORE=" + q(t.TempDir()),
		"LOGBOOK_TLS_CERT=" + q(cert), "LOGBOOK_TLS_KEY=" + q(key), "LOGBOOK_TLS_CA=" + q(ca),
	}
	n := &natsNode{name: name, proc: startChild(t, bin, env, "-c", filepath.Join(confDir, "node.conf"))}
	if !poll(30*time.Second, func() bool {
		log := n.proc.stderr.String()
		if m := clientRe.FindStringSubmatch(log); m != nil {
			n.client = m[1]
		}
		if m := clusterRe.FindStringSubmatch(log); m != nil {
			n.cluster = m[1]
		}
		return n.proc.exited() || (n.client != "" && n.cluster != "")
	}) || n.proc.exited() {
		t.Fatalf("nats-server %s did not start: %v\n%s", name, n.proc.err, n.proc.stderr)
	}
	return n
}

// TestClusterFromTemplate: three nats-server processes configured from
// deploy/nats-cluster (TLS for clients and routes, the LOGBOOK account,
// users of every role with the template's permissions) run the fencing
// scenarios (internal/stream TestFencingExternal) with the writers on an
// agent's credentials; the agent cannot purge ROLLOUTS there, a client
// without credentials or without TLS is refused, and the operator imports
// through the CLI's credential and TLS flags.
func TestClusterFromTemplate(t *testing.T) {
	if testing.Short() {
		t.Skip("three nats-server processes and a go test run")
	}
	bin := natsServerBin(t)
	dir := t.TempDir()
	for _, f := range []string{"node.conf", "permissions.conf"} {
		b, err := os.ReadFile(filepath.Join("..", "deploy", "nats-cluster", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Users of every role, made as credentials new --format conf makes them.
	seeds := map[auth.Role]string{}
	var users strings.Builder
	users.WriteString("include \"permissions.conf\"\nLOGBOOK_USERS = [\n")
	for _, role := range auth.Roles {
		seed, pub, err := auth.NewNKey()
		if err != nil {
			t.Fatal(err)
		}
		seeds[role] = filepath.Join(dir, string(role)+".nk")
		if err := auth.WriteSecret(seeds[role], seed); err != nil {
			t.Fatal(err)
		}
		users.WriteString(auth.UserConf(auth.User{Name: string(role), Role: role, NKey: pub}))
	}
	users.WriteString("]\n")
	if err := os.WriteFile(filepath.Join(dir, "users.conf"), []byte(users.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ca, cert, key := certs(t, dir)

	n1 := startTemplateNode(t, bin, dir, "n1", `["nats-route://127.0.0.1:1"]`, ca, cert, key)
	seed := `["nats-route://` + n1.cluster + `"]`
	n2 := startTemplateNode(t, bin, dir, "n2", seed, ca, cert, key)
	n3 := startTemplateNode(t, bin, dir, "n3", seed, ca, cert, key)
	urls := "nats://" + n1.client + ",nats://" + n2.client + ",nats://" + n3.client

	// Strangers: no credentials, or no TLS.
	if nc, err := nats.Connect(urls, nats.Secure(tlsConfig(t, ca)), nats.Timeout(2*time.Second)); err == nil {
		nc.Close()
		t.Fatal("connected without credentials")
	}
	if nc, err := nats.Connect(urls, nats.Timeout(2*time.Second)); err == nil {
		nc.Close()
		t.Fatal("connected without TLS")
	}

	// The fencing scenarios, writers on the agent's credentials.
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-run", "^TestFencingExternal$", "-v", "github.com/logbook-agents/logbook/internal/stream")
	cmd.Env = append(os.Environ(), "LOGBOOK_FENCING_NATS="+urls, "LOGBOOK_FENCING_SETUP_NKEY="+seeds[auth.RoleCoordinator],
		"LOGBOOK_FENCING_NKEY="+seeds[auth.RoleAgent], "LOGBOOK_FENCING_TLS_CA="+ca)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestFencingExternal") {
		t.Fatalf("fencing scenarios on the template cluster: %v\n%s", err, out)
	}
	t.Logf("fencing scenarios passed on the template cluster:\n%s", grepLines(string(out), "--- "))

	// The agent cannot purge ROLLOUTS on the cluster.
	opts, err := stream.Credentials{NKeyFile: seeds[auth.RoleAgent], TLSCA: ca}.Options()
	if err != nil {
		t.Fatal(err)
	}
	denied := make(chan error, 8)
	nc, err := nats.Connect(urls, append(opts, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { denied <- err }))...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	pctx, pcancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer pcancel()
	s, err := js.Stream(pctx, stream.StreamRollouts)
	if err != nil {
		t.Fatal(err)
	}
	before := s.CachedInfo().State.Msgs
	if err := s.Purge(pctx); err == nil {
		t.Fatal("the agent purged ROLLOUTS")
	}
	select {
	case err := <-denied:
		if !errors.Is(err, nats.ErrPermissionViolation) {
			t.Fatalf("purge by an agent: %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("purge by an agent: no permission violation")
	}
	if before == 0 {
		t.Fatal("ROLLOUTS is empty after the fencing scenarios")
	}

	// The operator imports through the CLI's flags.
	r, err := exec.Command(coordinatorBin(t), "import", "--nats", urls, "--nkey", seeds[auth.RoleOperator], "--tls-ca", ca,
		"--timeout", "60s", "../testdata/codex-real").CombinedOutput()
	if err != nil || !strings.Contains(string(r), "6 files: 4,760 records published") {
		t.Fatalf("import as the operator: %v\n%s", err, r)
	}
}

func tlsConfig(t *testing.T, ca string) *tls.Config {
	t.Helper()
	opts := &tls.Config{MinVersion: tls.VersionTLS12}
	pemBytes, err := os.ReadFile(ca)
	if err != nil {
		t.Fatal(err)
	}
	opts.RootCAs = x509.NewCertPool()
	opts.RootCAs.AppendCertsFromPEM(pemBytes)
	return opts
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
