package replay

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// chapterLog is the 25-record example of the chapter (section 10.3.1) as a
// v1 rollout, ending with a rollback of n turns. The rollback of 1 is the
// chapter's own, thread-A; the variants are threads of their own (thread-A2,
// thread-A3), so the examples directory imports as it is.
func chapterLog(n int64) []rollout.Record {
	thread, ro := "thread-A", "rollout-A"
	if n > 1 {
		thread, ro = fmt.Sprintf("thread-A%d", n), fmt.Sprintf("rollout-A%d", n)
	}
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	i := 0
	b := &rollout.Builder{Now: func() time.Time { i++; return t0.Add(time.Duration(i) * time.Second) }}
	window := 2
	none := []rollout.OpenCall{}
	large := rollout.TurnContext{Model: "model-large", ApprovalPolicy: "on-request"}
	return []rollout.Record{
		/* 01 */ b.Meta(rollout.SessionMeta{ID: thread, RolloutID: ro, Source: rollout.Source{Kind: "cli"}, Cwd: "/repo", HistoryMode: rollout.HistoryLegacy}),
		/* 02 */ b.TaskStarted("fix-login"),
		/* 03 */ b.UserMessage("修复登录超时"),
		/* 04 */ b.TurnContext(withTurn(large, "fix-login")),
		/* 05 */ b.World(true, map[string]string{"cwd": "/repo", "environment": "local"}),
		/* 06 */ b.Message("user", "修复登录超时"),
		/* 07 */ b.Message("assistant", "已修改重试逻辑并通过测试"),
		/* 08 */ b.TaskComplete("fix-login"),
		/* 09 */ b.Compacted(rollout.Compacted{
			Message: "摘要：已完成登录超时修复，测试通过",
			ReplacementHistory: []json.RawMessage{
				rollout.MessageItem("user", "修复登录超时"),
				rollout.MessageItem("assistant", "摘要：已完成登录超时修复，测试通过"),
			},
			WindowNumber: &window,
			OpenCalls:    &none,
		}),
		/* 10 */ b.World(true, map[string]string{"cwd": "/repo", "environment": "local"}),
		/* 11 */ b.TaskStarted("deploy-staging"),
		/* 12 */ b.UserMessage("发布到 staging"),
		/* 13 */ b.TurnContext(withTurn(large, "deploy-staging")),
		/* 14 */ b.World(false, map[string]string{"environment": "staging"}),
		/* 15 */ b.Message("user", "发布到 staging"),
		/* 16 */ b.Call("call-deploy-staging", "deploy", `{"target":"staging"}`, "deploy-staging-1"),
		/* 17 */ b.Output("call-deploy-staging", "deployment succeeded"),
		/* 18 */ b.Message("assistant", "staging 发布完成"),
		/* 19 */ b.TaskComplete("deploy-staging"),
		/* 20 */ b.TaskStarted("deploy-production"),
		/* 21 */ b.UserMessage("继续发布 production"),
		/* 22 */ b.TurnContext(rollout.TurnContext{TurnID: "deploy-production", Model: "model-small", ApprovalPolicy: "never"}),
		/* 23 */ b.Message("assistant", "无法执行需要审批的发布"),
		/* 24 */ b.TaskComplete("deploy-production"),
		/* 25 */ b.RolledBack(n),
	}
}

func withTurn(tc rollout.TurnContext, id string) rollout.TurnContext {
	tc.TurnID = id
	return tc
}
