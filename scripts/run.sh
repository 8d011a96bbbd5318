#!/usr/bin/env bash
# make run: the most complete story Logbook can tell today.
#
# A coordinator with its embedded NATS takes in an agent tree whose processes
# died at the worst moments, is itself SIGKILLed, recovers every thread, and
# shows the lineage tree, the child results still unconfirmed, and a resume
# that re-runs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
C=./bin/coordinator
DATA=$(mktemp -d -t logbook-run.XXXXXX)
SERVE_PID=
cleanup() {
	[ -n "$SERVE_PID" ] && kill "$SERVE_PID" 2>/dev/null
	for _ in $(seq 1 50); do [ -n "$SERVE_PID" ] && kill -0 "$SERVE_PID" 2>/dev/null || break; sleep 0.1; done
	rm -rf "$DATA"
}
trap cleanup EXIT
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

serve() {
	rm -f "$DATA/nats.url" # a killed coordinator leaves its old URL behind
	$C serve --data "$DATA" --nats-listen 127.0.0.1:0 --listen 127.0.0.1:0 >>"$DATA/serve.log" 2>&1 &
	SERVE_PID=$!
	disown "$SERVE_PID" # its SIGKILL is part of the story, not a job to report
	for _ in $(seq 1 100); do
		[ -s "$DATA/nats.url" ] && $C threads --data "$DATA" --limit 1 >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "coordinator did not start:"; cat "$DATA/serve.log"; exit 1
}

step "1. Offline: the chapter's 25-record example replays as the chapter says"
echo "   expected: history = summary + staging turn, model-large, on-request, world /repo + staging, window 2"
$C replay testdata/examples/chapter-rollback-1.jsonl | sed -n '/^Settings/,/^Token/p'

step "2. Start a coordinator (embedded NATS with JetStream, fsync before ack) on a fresh data dir"
echo "   armed to SIGKILL itself when its mirror takes the 15th message off the bus (crash point mirror.after-ack)"
LOGBOOK_CRASH=mirror.after-ack:15 serve
echo "   bus at $(cat "$DATA/nats.url"), data dir $DATA"

step "3. An agent tree whose processes died mid-work arrives on the bus; then six Codex sessions, and the coordinator dies"
echo "   release-P shipped 1.4.2 through three children: A (build) finished; B (deploy) died"
echo "   with its deploy call in flight; P died after logging C's task and before publishing it."
$C import --data "$DATA" testdata/examples/release-tree | tail -1
$C import --data "$DATA" testdata/codex-real >"$DATA/import.log" 2>&1 || true
for _ in $(seq 1 100); do kill -0 "$SERVE_PID" 2>/dev/null || break; sleep 0.1; done
SERVE_PID=
grep -h 'faults:' "$DATA/serve.log" | sed 's/^/   coordinator: /'
sed 's/^/   import: /' "$DATA/import.log" | tail -1

step "4. Restart: the mirror resumes from its watermark, the index catches up; JetStream >= mirror >= index"
serve
echo "   importing again publishes only what never landed (nothing twice):"
$C import --data "$DATA" testdata/codex-real | tail -1 | sed 's/^/   /'
for _ in $(seq 1 100); do $C verify --data "$DATA" >/dev/null 2>&1 && break; sleep 0.2; done
$C verify --data "$DATA" | grep -E 'Mirror|Index|index' | sed 's/^/   /'
$C threads --data "$DATA" --limit 4 | grep -v 'next page' 

step "5. The lineage tree, rebuilt from the rollouts"
$C tree --data "$DATA" release-P

step "6. Which child results are still unconfirmed?"
$C unconfirmed --data "$DATA"

step "7. Resume B: its stale turn is aborted, its deploy is unknown — listed, never re-run"
$C resume --data "$DATA" release-B </dev/null
echo
echo "   A person checks staging and records what they found:"
$C reconcile --data "$DATA" release-B --call call-deploy --outcome executed --evidence "staging reports version 1.4.2"

step "8. Resume P: MAIL proves C's task was never published; only that is re-sent (same msg_id)"
$C resume --data "$DATA" release-P --retry-proven-not-executed </dev/null

step "9. The tree after recovery"
$C tree --data "$DATA" release-P
echo
echo "Nothing was executed twice: replay re-reads facts, it never re-runs side effects."
