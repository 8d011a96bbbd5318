package replay

import (
	"encoding/json"
	"time"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// midTurnLog is one long turn compacted between two model samplings (the
// chapter's example two, section 10.6.1), followed by a turn the process
// crashed in with a deploy call in flight.
func midTurnLog() []rollout.Record {
	t0 := time.Date(2026, 11, 29, 11, 0, 0, 0, time.UTC)
	i := 0
	b := &rollout.Builder{Now: func() time.Time { i++; return t0.Add(time.Duration(i) * time.Second) }}
	w3 := 3
	open := []rollout.OpenCall{}
	tc := rollout.TurnContext{TurnID: "investigate", Model: "model-large", ApprovalPolicy: "on-request", Cwd: "/repo"}
	return []rollout.Record{
		b.Meta(rollout.SessionMeta{ID: "thread-M", RolloutID: "rollout-M", Source: rollout.Source{Kind: "sim"}, Cwd: "/repo", HistoryMode: rollout.HistoryLegacy}),
		b.TaskStarted("investigate"),
		b.UserMessage("找出登录超时的根因"),
		b.TurnContext(tc),
		b.World(true, map[string]any{"cwd": "/repo", "sandbox": "workspace-write", "tools": []string{"shell", "search"}}),
		b.Message("user", "找出登录超时的根因"),
		b.Call("call-search-1", "search", `{"q":"login timeout"}`, ""),
		b.Output("call-search-1", "…90K tokens of search results…"),
		b.TokenCount(105000, 105000),
		// Mid-turn compaction: the old window is summarised, the current user
		// message kept, and the baselines written again.
		b.Compacted(rollout.Compacted{
			Message: "摘要：搜索结果显示重试逻辑在超时后未退避",
			ReplacementHistory: []json.RawMessage{
				rollout.MessageItem("user", "找出登录超时的根因"),
				rollout.MessageItem("assistant", "摘要：搜索结果显示重试逻辑在超时后未退避"),
			},
			WindowNumber: &w3,
			OpenCalls:    &open,
		}),
		b.World(true, map[string]any{"cwd": "/repo", "sandbox": "workspace-write", "tools": []string{"shell", "search"}}),
		b.TurnContext(tc),
		b.Message("assistant", "根因：重试没有退避；建议加入指数退避"),
		b.TokenCount(124000, 19000),
		b.TaskComplete("investigate"),
		b.TaskStarted("deploy"),
		b.UserMessage("修好并发布到 staging"),
		b.TurnContext(rollout.TurnContext{TurnID: "deploy", Model: "model-large", ApprovalPolicy: "on-request", Cwd: "/repo"}),
		b.World(false, map[string]any{"environment": "staging"}),
		b.Message("user", "修好并发布到 staging"),
		b.Call("call-deploy-1", "deploy", `{"target":"staging","version":"1.4.2"}`, "deploy-staging-1.4.2"),
		// The process is killed here: the deploy may or may not have happened.
	}
}
