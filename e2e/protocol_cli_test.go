package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/logbook-agents/logbook/internal/dedupe"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
)

// TestProtocolWorkedExample runs docs/PROTOCOL.md's worked example as the
// document prints it: every ```sh block of its "Worked example" section, in
// order, in one `sh -eu`, with the nats CLI from .tools/ and no Logbook code
// on the agent side. A Go parent sends the task first and receives the
// result after. Then the mirror holds the example's lines byte for byte, the
// zombie's pack is quarantined as stale_epoch, replay shows the turn, and
// `tree` and `unconfirmed` show the edge and both deliveries confirmed. So
// the document cannot drift from the code.
func TestProtocolWorkedExample(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the coordinator binary and the nats CLI")
	}
	cli := natsCLI(t)
	doc := readProtocolDoc(t)
	script := workedExample(t, doc)
	bin := coordinatorBin(t)
	srv := serveOnFreePorts(t, bin)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nc, err := nats.Connect(srv.natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	bus, err := stream.Open(ctx, nc, stream.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}

	// The Go parent: spawns cli-child in a turn and sends it the task.
	parent := openGoThread(t, ctx, bus, "go-parent", "go-parent-r1")
	parent.append(t, ctx, func(b *rollout.Builder) rollout.Record { return b.TaskStarted("p1") })
	parent.append(t, ctx, func(b *rollout.Builder) rollout.Record {
		return b.Event(rollout.ThreadSpawned{Type: rollout.EventThreadSpawned, ChildThreadID: "cli-child", AgentRole: "summarize"})
	})
	task := rollout.InterAgentSent{MsgID: "msg-task-1", IdempotencyKey: "task:cli-child", ToThread: "cli-child", Kind: rollout.MsgTask,
		Body: json.RawMessage(`{"task":"summarize the diff"}`)}
	if _, err := dedupe.SendMail(ctx, parent.w, bus, "go-parent", task); err != nil {
		t.Fatal(err)
	}
	b := rollout.Builder{Next: parent.w.Next()}
	if _, err := parent.w.EndTurn(ctx, b.TaskComplete("p1"), nil); err != nil {
		t.Fatal(err)
	}

	// The child: the document's commands, verbatim.
	work := t.TempDir()
	cmd := exec.Command("sh", "-c", "set -eu\n"+script)
	cmd.Dir = work
	cmd.Env = append(cleanEnv(), "PATH="+filepath.Dir(cli)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"NATS_URL="+srv.natsURL, "HOME="+work, "XDG_CONFIG_HOME="+filepath.Join(work, ".config"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the worked example failed: %v\n%s", err, out)
	}

	got := parent.receive(t, ctx, 1)
	if len(got) != 1 || got[0].MsgID != "msg-result-1" || got[0].FromThread != "cli-child" || got[0].Kind != rollout.MsgResult ||
		got[0].InReplyTo != "msg-task-1" || string(got[0].Body) != `{"summary":"3 files changed, no API break"}` {
		t.Fatalf("the Go parent received %+v\nthe example printed:\n%s", got, out)
	}
	parent.close(t, ctx)
	if pending, err := bus.MailPending(ctx, "cli-child", "msg-task-1"); err != nil || pending {
		t.Fatalf("the task is still in MAIL after the example acknowledged it (%v)", err)
	}

	a := newRawAgent(t, srv.natsURL)
	srv.mirrored(t, a)
	var want []byte
	for _, f := range []string{"pack1.jsonl", "pack2.jsonl", "pack3.jsonl", "pack4.jsonl"} {
		p, err := os.ReadFile(filepath.Join(work, f))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, p...)
	}
	mirrorFile := filepath.Join(srv.dir, "rollouts", "cli-child-r1.jsonl")
	if mirrored, err := os.ReadFile(mirrorFile); err != nil || !bytes.Equal(mirrored, want) {
		t.Fatalf("the mirror file (%v):\n%s\nwant the example's packs:\n%s", err, mirrored, want)
	}
	q := srv.quarantined(t)
	if len(q) != 1 {
		t.Fatalf("quarantine/ holds %d messages, want the zombie's one: %+v", len(q), q)
	}
	for _, e := range q {
		if e.Kind != "stale_epoch" || e.Subject != "rollout.cli-child-r1" {
			t.Fatalf("the zombie's pack was quarantined as %s on %s, want stale_epoch (%s)", e.Kind, e.Subject, e.Reason)
		}
	}

	var st struct {
		ThreadID       string `json:"thread_id"`
		ParentThreadID string `json:"parent_thread_id"`
		Turns          []struct {
			TurnID string `json:"turn_id"`
			Status string `json:"status"`
			User   bool   `json:"user"`
		} `json:"turns"`
	}
	if err := json.Unmarshal(runCoordinator(t, bin, "replay", mirrorFile, "--json"), &st); err != nil {
		t.Fatal(err)
	}
	if st.ThreadID != "cli-child" || st.ParentThreadID != "go-parent" || len(st.Turns) != 1 ||
		st.Turns[0].TurnID != "turn-1" || st.Turns[0].Status != "completed" || !st.Turns[0].User {
		t.Fatalf("replay of the example's rollout: %+v", st)
	}
	var tr struct {
		Roots []struct {
			ThreadID string `json:"thread_id"`
			Children []struct {
				ThreadID       string `json:"thread_id"`
				ParentThreadID string `json:"parent_thread_id"`
				RolloutID      string `json:"rollout_id"`
			} `json:"children"`
		} `json:"roots"`
		Problems []json.RawMessage `json:"problems"`
	}
	if err := json.Unmarshal(runCoordinator(t, bin, "tree", "--data", srv.dir, "--json"), &tr); err != nil {
		t.Fatal(err)
	}
	if len(tr.Roots) != 1 || tr.Roots[0].ThreadID != "go-parent" || len(tr.Roots[0].Children) != 1 ||
		tr.Roots[0].Children[0].ThreadID != "cli-child" || tr.Roots[0].Children[0].RolloutID != "cli-child-r1" || len(tr.Problems) != 0 {
		t.Fatalf("tree --data: %+v", tr)
	}
	if r := unconfirmedReport(t, bin, srv.dir); r.Confirmed != 2 || len(r.Deliveries) != 0 || len(r.ChildResults) != 0 {
		t.Fatalf("unconfirmed --data: %+v, want the task and the result confirmed", r)
	}
	runCoordinator(t, bin, "verify", "--data", srv.dir)

	// The sizes and crcs the prose gives are those of the files the
	// commands wrote.
	claims := regexp.MustCompile("crc\\s+`([0-9a-f]{8})`,\\s+([0-9]+)\\s+bytes").FindAllStringSubmatch(doc, -1)
	files := []string{"pack1.jsonl", "pack2.jsonl", "pack3.jsonl", "pack4.jsonl", "zombie.jsonl"}
	if len(claims) != len(files) {
		t.Fatalf("the example states %d pack crcs, want %d", len(claims), len(files))
	}
	for i, f := range files {
		p, err := os.ReadFile(filepath.Join(work, f))
		if err != nil {
			t.Fatal(err)
		}
		if c := crc32c(p); c != claims[i][1] || fmt.Sprint(len(p)) != claims[i][2] || c != rollout.Checksum(p) {
			t.Errorf("%s: crc %s, %d bytes; the document says %s, %s bytes", f, c, len(p), claims[i][1], claims[i][2])
		}
	}
}

// TestProtocolCRCCheckValues: the CRC-32C check values docs/PROTOCOL.md
// gives, for the bitwise definition the tests use and for the code's.
func TestProtocolCRCCheckValues(t *testing.T) {
	doc := readProtocolDoc(t)
	for in, want := range map[string]string{"123456789": "e3069283", "": "00000000"} {
		if got := crc32c([]byte(in)); got != want || rollout.Checksum([]byte(in)) != want {
			t.Errorf("crc32c(%q) = %s, rollout.Checksum %s, want %s", in, got, rollout.Checksum([]byte(in)), want)
		}
		if !strings.Contains(doc, "`"+want+"`") {
			t.Errorf("the document does not give the check value %s", want)
		}
	}
}

func readProtocolDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../docs/PROTOCOL.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// workedExample is every ```sh block of the "## Worked example" section,
// joined in order.
func workedExample(t *testing.T, doc string) string {
	t.Helper()
	_, sec, ok := strings.Cut(doc, "\n## Worked example\n")
	if !ok {
		t.Fatal("docs/PROTOCOL.md has no \"## Worked example\" section")
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	var blocks []string
	for {
		_, rest, ok := strings.Cut(sec, "```sh\n")
		if !ok {
			break
		}
		block, after, ok := strings.Cut(rest, "```\n")
		if !ok {
			t.Fatal("docs/PROTOCOL.md: an unterminated ```sh block in the worked example")
		}
		blocks = append(blocks, block)
		sec = after
	}
	if len(blocks) < 8 {
		t.Fatalf("the worked example has %d sh blocks, want at least 8", len(blocks))
	}
	return strings.Join(blocks, "\n")
}

// natsCLI is the nats CLI in .tools/, installed by `make natscli` when it is
// missing. A tool that cannot be installed fails the test: this check may
// not pass by not running.
func natsCLI(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, ".tools", "nats")
	if _, err := os.Stat(path); err != nil {
		cmd := exec.Command("make", "-C", root, "natscli")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("the nats CLI is not in .tools/ and `make natscli` failed: %v\n%s", err, out)
		}
	}
	out, err := exec.Command(path, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", path, err, out)
	}
	t.Logf("nats CLI %s", strings.TrimSpace(string(out)))
	return path
}

// cleanEnv is the environment without the NATS_* variables the CLI would
// read instead of the test's.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NATS_") && !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			env = append(env, kv)
		}
	}
	return env
}
