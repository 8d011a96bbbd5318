package auth_test

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/logbook-agents/logbook/internal/stream/auth"
)

var update = flag.Bool("update", false, "rewrite deploy/nats-cluster/permissions.conf")

const clusterDir = "../../../deploy/nats-cluster"

// permissions.conf is what the code says the roles may do.
func TestPermissionsConfInStep(t *testing.T) {
	path := filepath.Join(clusterDir, "permissions.conf")
	want := auth.PermissionsConf()
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("%s differs from the roles in the code: go test ./internal/stream/auth -run TestPermissionsConfInStep -update", path)
	}
}

// node.conf with a users.conf of every role (unscoped and a scoped agent)
// loads in nats-server, and each user gets exactly the code's permissions.
func TestNodeConfLoads(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"node.conf", "permissions.conf"} {
		b, err := os.ReadFile(filepath.Join(clusterDir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var entries []auth.User
	var conf strings.Builder
	conf.WriteString("include \"permissions.conf\"\nLOGBOOK_USERS = [\n")
	for i, scope := range []auth.Scope{{}, {}, {}, {Threads: []string{"t1"}, Rollouts: []string{"r1"}}} {
		role := auth.Roles[min(i, 2)]
		_, pub, err := auth.NewNKey()
		if err != nil {
			t.Fatal(err)
		}
		e := auth.User{Name: string(role), Role: role, NKey: pub, Scope: scope}
		entries = append(entries, e)
		conf.WriteString(auth.UserConf(e))
	}
	conf.WriteString("]\n")
	if err := os.WriteFile(filepath.Join(dir, "users.conf"), []byte(conf.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"LOGBOOK_NODE": `"n1"`, "LOGBOOK_LISTEN": `"127.0.0.1:-1"`, "LOGBOOK_CLUSTER_LISTEN": `"127.0.0.1:-1"`,
		"LOGBOOK_ROUTES": `["nats-route://127.0.0.1:1"]`, "LOGBOOK_STORE": `"` + dir + `"`,
		"LOGBOOK_TLS_CERT": `"c.pem"`, "LOGBOOK_TLS_KEY": `"k.pem"`, "LOGBOOK_TLS_CA": `"ca.pem"`,
	} {
		t.Setenv(k, v)
	}
	opts := &server.Options{}
	// The TLS files do not exist here: only the rest is checked (e2e loads it all).
	err := opts.ProcessConfigFile(filepath.Join(dir, "node.conf"))
	if err != nil && !strings.Contains(err.Error(), "tls") && !strings.Contains(err.Error(), "open c.pem") {
		t.Fatal(err)
	}
	if opts.ServerName != "n1" || !opts.JetStream || !opts.SyncAlways || opts.MaxPayload != 8<<20 {
		t.Errorf("node.conf: name %q jetstream %v sync always %v max payload %d", opts.ServerName, opts.JetStream, opts.SyncAlways, opts.MaxPayload)
	}
	if len(opts.Nkeys) != len(entries) {
		t.Fatalf("%d nkey users, want %d (err %v)", len(opts.Nkeys), len(entries), err)
	}
	for i, nk := range opts.Nkeys {
		want := auth.Permissions(entries[i].Role, entries[i].Scope)
		if nk.Nkey != entries[i].NKey || !reflect.DeepEqual(nk.Permissions, want) {
			t.Errorf("user %d (%s): permissions from the conf\n%+v\nwant\n%+v", i, entries[i].Name, perms(nk.Permissions), perms(want))
		}
		if nk.Account == nil || nk.Account.Name != "LOGBOOK" {
			t.Errorf("user %d: account %v, want LOGBOOK", i, nk.Account)
		}
	}
}

func perms(p *server.Permissions) string {
	if p == nil {
		return "nil"
	}
	s := ""
	if p.Publish != nil {
		s += "pub " + strings.Join(p.Publish.Allow, " ") + " deny " + strings.Join(p.Publish.Deny, " ")
	}
	if p.Subscribe != nil {
		s += " sub " + strings.Join(p.Subscribe.Allow, " ")
	}
	if p.Response != nil {
		s += " resp " + p.Response.Expires.String()
	}
	return s
}
