package replay

import (
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// paginatedLog is a paginated thread (history_mode paginated: its history is
// changed by revert, not by rollback markers) of three user turns: a plan, a
// refactor with a test run, and a risky schema change whose migration ran.
// It is the example to try `revert --before-turn migrate` and `gc` on.
func paginatedLog() []rollout.Record {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	i := 0
	b := &rollout.Builder{Now: func() time.Time { i++; return t0.Add(time.Duration(i) * time.Second) }}
	ctx := func(turn string) rollout.TurnContext {
		return rollout.TurnContext{TurnID: turn, Model: "model-large", ApprovalPolicy: "on-request", Cwd: "/repo"}
	}
	return []rollout.Record{
		b.Meta(rollout.SessionMeta{ID: "thread-R", RolloutID: "rollout-R", Source: rollout.Source{Kind: "cli"}, Cwd: "/repo", HistoryMode: rollout.HistoryPaginated}),
		b.TaskStarted("plan"),
		b.UserMessage("plan the session-store refactor"),
		b.TurnContext(ctx("plan")),
		b.World(true, map[string]any{"cwd": "/repo", "branch": "main"}),
		b.Message("user", "plan the session-store refactor"),
		b.Message("assistant", "plan: extract the store interface, then move sessions to it"),
		b.TaskComplete("plan"),
		b.TaskStarted("refactor"),
		b.UserMessage("do the refactor and run the tests"),
		b.TurnContext(ctx("refactor")),
		b.World(false, map[string]any{"branch": "refactor-store"}),
		b.Message("user", "do the refactor and run the tests"),
		b.Call("call-test-1", "shell", `{"cmd":"go test ./..."}`, ""),
		b.Output("call-test-1", "ok: 212 tests passed"),
		b.Message("assistant", "refactor done, tests pass"),
		b.TaskComplete("refactor"),
		b.TaskStarted("migrate"),
		b.UserMessage("also migrate the sessions table to the new schema"),
		b.TurnContext(ctx("migrate")),
		b.Message("user", "also migrate the sessions table to the new schema"),
		b.Call("call-migrate-1", "shell", `{"cmd":"./migrate up"}`, "migrate-sessions-v2"),
		b.Output("call-migrate-1", "migrated 18,204 rows; 3 rows failed"),
		b.Message("assistant", "migration ran with 3 failed rows"),
		b.TaskComplete("migrate"),
	}
}

// TestPaginatedExample: three completed turns, the settings of the last,
// the world state patched onto its baseline, nothing dangling.
func TestPaginatedExample(t *testing.T) {
	st, err := Fast(rollout.MemOf("rollout-R", paginatedLog()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Turns) != 3 || st.Turns[2].TurnID != "migrate" || st.Turns[2].Status != StatusCompleted || len(st.DanglingCalls) != 0 ||
		string(st.WorldState) != `{"branch":"refactor-store","cwd":"/repo"}` || st.HistoryMode != rollout.HistoryPaginated {
		t.Fatalf("state: turns %+v, dangling %v, world %s, mode %s", st.Turns, st.DanglingCalls, st.WorldState, st.HistoryMode)
	}
}
