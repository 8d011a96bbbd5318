// Package e2e holds tests that run the real binaries, kill them with
// SIGKILL, and check the system's invariants afterwards (DESIGN §2). It has
// no code of its own: everything is in its _test.go files.
//
// The protocol tests (protocol_test.go, protocol_cli_test.go) are the agent
// side of docs/PROTOCOL.md: one speaks it with core NATS requests built by
// hand, the other runs the document's worked example with the nats CLI
// (.tools/nats, installed by `make natscli`; a CLI that cannot be installed
// fails that test).
//
// The recovery suite (recovery_*_test.go) runs live agents (coordinator
// serve, agent-sim world and workers) through the faults of a real
// deployment and checks the result against the simulator's ground truth
// (the world's ledger, each thread's acknowledged records, the plan): a
// worker SIGKILLed with a deploy in flight (the chapter's section 10.13, as
// `coordinator show`, `tree` and `unconfirmed` show it while broken and
// after recovery), the coordinator SIGKILLed and restarted under the
// workers, the ROLLOUTS stream leader of a three-node cluster shut down
// mid-run, and a worker partitioned from the bus by a blackholed TCP proxy
// past its lease TTL. `go test -run Recovery ./e2e/` runs them (about 45 s
// on 2 cores).
//
// The mirror's crash campaign (mirror_crash_test.go) runs a short version
// in `go test ./...` (skipped with -short) and a long one with
// `make crash-mirror` (-crash.rounds, -crash.named, -crash.seed). The agent
// crash campaign, `agent-sim crash`, runs 10 rounds in
// TestCrashCampaignShort and 3 against an external bus in
// TestCrashCampaignOnExternalBus (crash_campaign_test.go), and long ones
// with `make crash` (docs/RELIABILITY.md).
package e2e
