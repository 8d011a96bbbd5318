#!/usr/bin/env bash
# make run: the most complete story Logbook can tell today.
#
# A coordinator with its embedded NATS takes in an agent tree whose processes
# died at the worst moments, is itself SIGKILLed, recovers every thread, and
# shows the lineage tree, the child results still unconfirmed, and a resume
# that re-runs nothing. Then live simulated agents run a tree (a root, two
# children, a grandchild) on it; their worker is SIGKILLed right after a
# side effect (a deploy) and before its result is logged. The tree while
# broken (statuses, unconfirmed child results, the turn interrupted and the
# call unknown, the world's own ledger), a second worker's recovery, and the
# tree after it (the turn aborted, the call reconciled by the world's probe,
# executed once) are shown, and where the rollouts are. The seed is fixed:
# the same story every run (e2e/TestDemoTellsTheSameStory runs it twice).
# LOGBOOK_KEEP=1 keeps the data dir and the world's files afterwards.
set -Eeuo pipefail
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
	if [ -n "${LOGBOOK_KEEP:-}" ]; then
		echo "kept: the data dir $DATA, the world's ledger and logs in $WORLD" >&2
	else
		rm -rf "$DATA" "$WORLD"
	fi
}
trap cleanup EXIT
# Under set -e a failing command ends the script: say which one, never end silently.
trap 'echo "run.sh: line $LINENO failed (status $?): $BASH_COMMAND" >&2' ERR
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
# The torn line is cut when the mirror next appends to that rollout: the
# message it was writing, taken off the bus again from the watermark. That
# happens just after start-up, so wait for it rather than race it.
repaired() { grep -q 'torn tail repaired' "$DATA/serve.log"; }
if wait_for "the mirror to repair the torn line" 300 repaired; then
	grep -h 'torn tail repaired' "$DATA/serve.log" | head -1 | sed 's/.*msg="\([^"]*\)".*/   \1/'
else
	echo "the mirror never repaired the torn line:"; cat "$DATA/serve.log"; exit 1
fi
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

step "10. Live agents: a simulated world, a worker, and a seeded tree: a root, two children, a grandchild"
SEED=18456
echo "   agent-sim run --seed $SEED --agents 4 --depth 2 --turns 3: root R spawns R-0 and R-1; R-0 spawns R-0-0."
echo "   With this seed the only side effects are each parent's last step (a call \"apply\": its deploy), so the"
echo "   first one is R-0's, after R-0-0 and R-1 are done. (R stands for the root's id, s${SEED}n4d2t3x<nonce>;"
echo "   … for the ids that differ on every run.)"
echo "   Worker w1 runs them all and is armed to SIGKILL itself right after its first side effect, before"
echo "   the result is logged: R-0's deploy happens in the world, and w1 dies before its log says so."
URL=$(cat "$DATA/nats.url")
"$SIM" world --nats "$URL" --ledger "$WORLD/ledger.jsonl" >"$WORLD/world.log" 2>&1 &
SIM_PIDS+=($!)
disown $!
"$SIM" worker --nats "$URL" --id w1 --crash after_effect >"$WORLD/w1.log" 2>&1 &
W1=$!
SIM_PIDS+=($W1)
disown "$W1"
"$SIM" run --nats "$URL" --seed $SEED --agents 4 --depth 2 --turns 3 >"$WORLD/run.log" 2>&1 &
RUN=$!
w1_dead() { ! kill -0 "$W1" 2>/dev/null || ! kill -0 "$RUN" 2>/dev/null; }
wait_for "w1 to reach its crash point" 600 w1_dead || { echo "   w1 never crashed"; cat "$WORLD/w1.log"; exit 1; }
grep -q 'crash point reached' "$WORLD/w1.log" || { echo "   w1 ended without crashing:"; cat "$WORLD/w1.log" "$WORLD/run.log"; exit 1; }
echo "   w1 was SIGKILLed after a side effect and before logging its result"

# Ids carry the run's nonce (s<seed>n4d2t3x<nonce>): shown as R; ULIDs
# (rollouts, msg ids, calls, turns) vary between runs: shown as ….
live() { sed -E "s/run-s${SEED}n4d2t3x[a-z0-9]+/the run/g; s/s${SEED}n4d2t3x[a-z0-9]+/R/g; s/[0-9A-HJKMNP-TV-Z]{26}/…/g"; }
# retable re-aligns a table whose cells are 2+ spaces apart (after live
# shortened them), keeping each line's indent.
retable() {
	awk 'function width(s,  k) { k = gsub(/…/, "&", s); return length(s) - k * (length("…") - 1) }
	{ match($0, /^ */); ind[NR] = substr($0, 1, RLENGTH); n[NR] = split(substr($0, RLENGTH + 1), f, /  +/)
		for (i = 1; i <= n[NR]; i++) { c[NR, i] = f[i]; if (n[NR] > 1 && width(f[i]) > w[i]) w[i] = width(f[i]) } }
	END { for (r = 1; r <= NR; r++) { out = ind[r]
		for (i = 1; i < n[r]; i++) { out = out c[r, i]; for (k = width(c[r, i]); k < w[i] + 2; k++) out = out " " }
		print out c[r, n[r]] } }'
}
ROOT=
found_root() {
	ROOT=$($C threads --data "$DATA" --search "s${SEED}n4d2t3x" --json | sed -nE "s/.*\"thread_id\": \"(s${SEED}n4d2t3x[a-z0-9]+)\".*/\1/p" | head -1)
	[ -n "$ROOT" ]
}
# show_turns prints the Turns and Dangling calls sections of coordinator
# show R-0, each table aligned again.
show_turns() {
	local out
	out=$($C show --data "$DATA" "$ROOT-0") || return 1
	for sec in Turns Dangling; do
		sed -n "/^$sec/,/^\$/p" <<<"$out" | sed '/^$/d' | live | sed 's/^/   /' | retable
		echo
	done
}
# Broken and settled: R-0's interrupted turn and unknown call are in the
# mirror, and its dead holder's lease has expired (3 s).
broken() {
	found_root || return 1
	local t
	t=$($C tree --data "$DATA" "$ROOT" --json) || return 1
	grep -q '"unknown_calls": 1' <<<"$t" && ! grep -q '"status": "active"' <<<"$t"
}
wait_for "the mirror to show w1's last writes and its leases to expire" 600 broken || { echo "   the tree never showed the crash"; exit 1; }

step "11. While broken: nobody runs the tree. What a person sees"
echo "   The lineage tree, from the rollouts (statuses: idle, active, needs_attention):"
$C tree --data "$DATA" "$ROOT" | live | sed -E 's/; rollout [^;)]+//; s/^/   /'
echo
echo "   The child results still unconfirmed: R waits for R-0's, the run for R's:"
$C unconfirmed --data "$DATA" | grep -E "PARENT|s${SEED}n4d2t3x" | live | sed 's/^ */   /' | retable
echo
echo "   R-0's turns and the call it left open (coordinator show):"
show_turns
KEY="$ROOT-0-t3"
ledger_line() { grep "\"key\":\"$KEY\"" "$WORLD/ledger.jsonl" | tail -1 | sed -E 's/.*"executions":([0-9]+),"requests":([0-9]+).*/executed \1 time(s), asked \2 time(s)/'; }
echo "   The world's own ledger (outside Logbook) for the deploy's key R-0-t3: $(ledger_line)"

step "12. Recovery: worker w2 joins"
echo "   The coordinator offers it R-0 (its holder is dead, its lease expired); opening R-0 aborts the stale"
echo "   turn and asks the world's probe about the unknown call, by its idempotency key. Never re-run."
"$SIM" worker --nats "$URL" --id w2 >"$WORLD/w2.log" 2>&1 &
SIM_PIDS+=($!)
disown $!
run_done() { ! kill -0 "$RUN" 2>/dev/null; }
wait_for "the tree to complete" 1800 run_done || true
if ! wait "$RUN"; then
	echo "   the run failed:"; cat "$WORLD/run.log" "$WORLD"/w*.log; exit 1
fi
sed -E 's/^tree ([^ ]+) \(seed ([0-9]+)\): ([0-9]+ threads, [0-9]+ turns), [0-9]+ records, ([0-9]+ messages), ([0-9]+ side effects) \(([0-9]+) executed twice, ([0-9]+) re-requested\).*/   tree \1: \3, \4, \5; executed twice: \6; re-run by an agent: \7/' "$WORLD/run.log" | live
caught_up() { $C tree --data "$DATA" "$ROOT" --json | grep -q '"status": "needs_attention"' && return 1; $C verify --data "$DATA"; }
wait_for "the mirror and the index to catch up" 600 caught_up || true

step "13. After recovery"
$C tree --data "$DATA" "$ROOT" | live | sed -E 's/; rollout [^;)]+//; s/^/   /'
n=$($C unconfirmed --data "$DATA" --json | grep -c "s${SEED}n4d2t3x" || true)
echo "   unconfirmed child results and deliveries in the live tree: $n"
echo
echo "   R-0's turns now (its crashed turn aborted, the call no longer open):"
show_turns
R0=$($C threads --data "$DATA" --search "$ROOT-0" --json | sed -nE "s/.*\"thread_id\": \"$ROOT-0\".*/x/p; s/.*\"current_rollout_id\": \"([^\"]+)\".*/\1/p" | sed -n '/^x$/{n;p;q}')
FILE="$DATA/rollouts/$R0.jsonl"
echo "   The record the resume appended to R-0's rollout for the call (reconciled, not re-run):"
grep '"type":"reconciled","call_id"' "$FILE" | sed -E 's/.*"outcome":"([^"]*)","evidence":"([^"]*)","by":"([^"]*)".*/     the call apply (key R-0-t3): outcome \1, by \3: "\2"/' | live
echo "   The world's ledger for R-0-t3: $(ledger_line) (deployed once)"
echo
echo "   Where it all is (removed when the demo ends; LOGBOOK_KEEP=1 keeps it):"
echo "     rollouts   $DATA/rollouts/ (one JSONL file per rollout; R-0's is <its rollout id>.jsonl)"
echo "     index      $DATA/index.db (SQLite)"
echo "     bus        $URL (embedded NATS with JetStream)"
echo "     HTTP       $(cat "$DATA/http.url")/status (the coordinator's counters; no web page yet)"
echo
echo "Nothing was executed twice: replay re-reads facts, it never re-runs side effects."
