#!/usr/bin/env bash
# make run: the most complete story Logbook can tell today.
#
# A coordinator with its embedded NATS takes in an agent tree whose processes
# died at the worst moments, is itself SIGKILLed, recovers every thread, and
# shows the lineage tree, the child results still unconfirmed, and a resume
# that re-runs nothing. Then live simulated agents run a tree on it while one
# of their workers is SIGKILLed right after a side effect.
set -euo pipefail
cd "$(dirname "$0")/.."
C=${LOGBOOK_COORDINATOR:-./bin/coordinator}
SIM=${LOGBOOK_AGENT_SIM:-./bin/agent-sim}
DATA=$(mktemp -d -t logbook-run.XXXXXX)
WORLD=$(mktemp -d -t logbook-world.XXXXXX) # the simulated world keeps its ledger outside the data dir
SERVE_PID=
SIM_PIDS=()
cleanup() {
	for p in "${SIM_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	[ -n "$SERVE_PID" ] && kill "$SERVE_PID" 2>/dev/null
	for _ in $(seq 1 50); do [ -n "$SERVE_PID" ] && kill -0 "$SERVE_PID" 2>/dev/null || break; sleep 0.1; done
	rm -rf "$DATA" "$WORLD"
}
trap cleanup EXIT
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

# wait_for WHAT TRIES CMD...: runs CMD every 0.1 s until it succeeds, up to
# TRIES times; every 2 s or so it says on stderr that it is still waiting, so the demo
# is never silent for long (on a loaded machine catching up takes a while).
wait_for() {
	local what=$1 tries=$2 i said=$SECONDS
	shift 2
	for i in $(seq 1 "$tries"); do
		"$@" >/dev/null 2>&1 && return 0
		if [ $((SECONDS - said)) -ge 2 ]; then
			echo "   … still waiting for $what" >&2
			said=$SECONDS
		fi
		sleep 0.1
	done
	return 1
}

# while_saying WHAT CMD...: runs CMD (its output already redirected by the
# caller) and, every 2 s or so until it ends, says on stderr that WHAT is
# still going; returns CMD's status.
while_saying() {
	local what=$1 pid said=$SECONDS
	shift
	"$@" &
	pid=$!
	while kill -0 "$pid" 2>/dev/null; do
		if [ $((SECONDS - said)) -ge 2 ]; then
			echo "   … still $what" >&2
			said=$SECONDS
		fi
		sleep 0.1
	done
	wait "$pid"
}

serve() {
	rm -f "$DATA/nats.url" # a killed coordinator leaves its old URL behind
	$C serve --data "$DATA" --nats-listen 127.0.0.1:0 --listen 127.0.0.1:0 --lease-ttl 3s >>"$DATA/serve.log" 2>&1 &
	SERVE_PID=$!
	disown "$SERVE_PID" # its SIGKILL is part of the story, not a job to report
	started() { [ -s "$DATA/nats.url" ] && $C threads --data "$DATA" --limit 1; }
	wait_for "the coordinator to start" 300 started && return 0
	echo "coordinator did not start:"; cat "$DATA/serve.log"; exit 1
}

step "1. Offline: the chapter's 25-record example replays as the chapter says"
echo "   expected: model-large, on-request, cwd /repo, window 2; world /repo + staging; history ="
echo "   the first request + the compaction's summary + the staging turn; the production turn rolled back"
$C replay testdata/examples/chapter-rollback-1.jsonl | sed -n '/^Settings/,/^Dangling/p' | sed '$d'

step "2. Start a coordinator (embedded NATS with JetStream, fsync before ack) on a fresh data dir"
echo "   armed to SIGKILL itself half-way through writing the 8th message its mirror takes off the bus"
echo "   (crash point mirror.mid-append: a torn line in a mirror file)"
LOGBOOK_CRASH=mirror.mid-append:8 serve
echo "   bus at $(cat "$DATA/nats.url"), data dir $DATA"

step "3. An agent tree whose processes died mid-work arrives on the bus; then six Codex sessions, and the coordinator dies"
echo "   release-P shipped 1.4.2 through three children: A (build) finished; B (deploy) died"
echo "   with its deploy call in flight; P died after logging C's task and before publishing it."
$C import --data "$DATA" testdata/examples/release-tree | tail -1 | sed 's/^/   /'
echo "   importing the six Codex sessions (4,760 records) while the coordinator dies under the import:"
import_codex() { $C import --data "$DATA" testdata/codex-real >"$DATA/import.log" 2>&1; }
if while_saying "importing" import_codex; then
	echo "   import: finished before the crash"
else
	echo "   import: failed within seconds, as it must: the bus went away. What was acknowledged is safe;"
	echo "   the rest is published when the import is run again."
fi
dead() { ! kill -0 "$SERVE_PID" 2>/dev/null; }
wait_for "the coordinator to die" 100 dead || true
SERVE_PID=
grep -h 'faults:' "$DATA/serve.log" | sed 's/^/   coordinator: /'

step "4. Restart: the mirror cuts the torn line, resumes from its watermark, the index catches up"
serve
grep -h 'torn' "$DATA/serve.log" | head -1 | sed 's/.*msg="\([^"]*\)".*/   \1/'
echo "   importing again publishes only what never landed (nothing twice):"
for dir in testdata/examples/release-tree testdata/codex-real; do
	out=$($C import --data "$DATA" "$dir" 2>&1 | tail -3) || true
	if [ "${out% 0 failed}" = "$out" ]; then
		# A thread the killed import was writing stays leased for one TTL
		# (3 s here) past its death, and is refused until then: say why on
		# stderr, wait, and import again.
		echo "   … the import refused some files; retrying after the lease TTL:" >&2
		sed 's/^/     /' <<<"$out" >&2
		sleep 4
		out=$($C import --data "$DATA" "$dir" 2>&1 | tail -3) || true
	fi
	case "$out" in
	*" 0 failed") echo "   $dir: every record now on the bus, none twice (what had landed was skipped)" ;;
	*) echo "   $out"; exit 1 ;;
	esac
done
wait_for "the mirror and the index to catch up" 600 $C verify --data "$DATA" || true
echo "   JetStream >= mirror >= index, byte for byte:"
$C verify --data "$DATA" | grep -E 'Mirror|Index|index' | sed 's/^/   /'
echo
echo "   The four most recent threads (the Codex sessions were sanitized: their titles are redacted):"
$C threads --data "$DATA" --limit 4 | grep -v 'next page' | sed 's/^/   /'

step "5. The lineage tree, rebuilt from the rollouts"
$C tree --data "$DATA" release-P

step "6. Which child results are still unconfirmed?"
$C unconfirmed --data "$DATA"

# (how many message gets a resume needed to find its tail varies with timing: not shown)
step "7. Resume B: its stale turn is aborted, its deploy is unknown — listed, never re-run"
$C resume --data "$DATA" release-B </dev/null | sed -E "s/, [0-9]+ message gets//"
echo
echo "   A person checks staging and records what they found:"
$C reconcile --data "$DATA" release-B --call call-deploy --outcome executed --evidence "staging reports version 1.4.2"

step "8. Resume P: MAIL proves C's task was never published; only that is re-sent (same msg_id)"
$C resume --data "$DATA" release-P --retry-proven-not-executed </dev/null | sed -E "s/, [0-9]+ message gets//"

step "9. The tree after recovery"
$C tree --data "$DATA" release-P
echo
echo "   B is settled: its deploy is recorded as executed, on a person's evidence, and was never re-run."
echo "   P and C still need attention, and that is the point: P waits for two child results nobody has"
echo "   sent (B died before sending its own; C's task is on the bus now, but no agent has taken it)."
echo "   Nothing pretends otherwise. An operator restarts B's and C's agents: C receives its task once"
echo "   (its msg_id is kept), and 'coordinator unconfirmed' lists what is still missing until then."

step "10. Live agents: a simulated world, two workers, and a seeded tree of agents (seed 7)"
echo "   worker w1 is armed to SIGKILL itself right after its first side effect, before the result is logged"
URL=$(cat "$DATA/nats.url")
"$SIM" world --nats "$URL" --ledger "$WORLD/ledger.jsonl" >"$WORLD/world.log" 2>&1 &
SIM_PIDS+=($!)
disown $!
"$SIM" worker --nats "$URL" --id w1 --crash after_effect >"$WORLD/w1.log" 2>&1 &
W1=$!
SIM_PIDS+=($W1)
disown "$W1"
"$SIM" run --nats "$URL" --seed 7 --agents 12 --depth 2 --turns 3 >"$WORLD/run.log" 2>&1 &
RUN=$!
w1_dead() { ! kill -0 "$W1" 2>/dev/null || ! kill -0 "$RUN" 2>/dev/null; }
wait_for "w1 to reach its crash point" 600 w1_dead || { echo "   w1 never crashed"; cat "$WORLD/w1.log"; exit 1; }
grep -q 'crash point reached' "$WORLD/w1.log" && echo "   w1 was SIGKILLed after a side effect and before logging its result"
"$SIM" worker --nats "$URL" --id w2 >"$WORLD/w2.log" 2>&1 &
SIM_PIDS+=($!)
disown $!
echo "   w2 joins: the coordinator offers it w1's threads once their leases expire; it resumes them"
run_done() { ! kill -0 "$RUN" 2>/dev/null; }
wait_for "the tree to complete" 1800 run_done || true
if ! wait "$RUN"; then
	echo "   the run failed:"; cat "$WORLD/run.log" "$WORLD"/w*.log; exit 1
fi
sed -E 's/^tree ([^ ]+) \(seed ([0-9]+)\): ([0-9]+ threads, [0-9]+ turns), [0-9]+ records, ([0-9]+ messages), ([0-9]+ side effects) \(([0-9]+) executed twice, ([0-9]+) re-requested\).*/   tree \1: \3, \4, \5; executed twice: \6; re-run by an agent: \7/; s/(s7n12d2t3x)[a-z0-9]+/\1…/' "$WORLD/run.log"
ROOT=$(sed -nE 's/^tree ([^ ]+) .*/\1/p' "$WORLD/run.log")
caught_up() { $C tree --data "$DATA" "$ROOT" --json | grep -q '"status": "needs_attention"' && return 1; $C verify --data "$DATA"; }
wait_for "the mirror and the index to catch up" 600 caught_up || true

step "11. The live tree, from the rollouts: every thread done, the crashed call settled by the world's probe"
echo "   (thread ids carry the seed and the tree's shape; the run's nonce is shown as …)"
$C tree --data "$DATA" "$ROOT" | sed -E 's/(s7n12d2t3x)[a-z0-9]+/\1…/g; s/; rollout [0-9A-Z]{26}//'
n=$($C unconfirmed --data "$DATA" --json | grep -c "\"$ROOT" || true)
probed=$(cat "$DATA"/rollouts/*.jsonl | grep '"type":"reconciled"' | grep -c '"by":"probe:world"' || true)
echo
echo "   calls left without a result by w1's death, settled by the world's probe (reconciled, not re-run): $probed"
echo "   unconfirmed child results and deliveries in the live tree: $n"
echo
echo "Nothing was executed twice: replay re-reads facts, it never re-runs side effects."
