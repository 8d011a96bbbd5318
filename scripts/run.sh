#!/usr/bin/env bash
# make run: the most complete story Logbook can tell today.
# Foundation stage: verify and replay rollouts offline (no bus yet).
set -euo pipefail
cd "$(dirname "$0")/.."
C=./bin/coordinator
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "1. Verify the example rollouts and six real Codex sessions (ordinals, crc, torn tails)"
$C verify testdata/examples/*.jsonl testdata/codex-real/sessions/*/*/*/*.jsonl

step "2. Replay the chapter's 25-record example, which ends in a rollback of 1 turn"
echo "   expected (chapter 10.3.1): history = summary + staging turn, model-large, on-request,"
echo "   world state /repo + staging, window 2; the production turn rolled back"
$C replay testdata/examples/chapter-rollback-1.jsonl

step "3. A thread killed mid-turn with a deploy in flight: the call is unknown, never retried"
$C replay testdata/examples/mid-turn-compaction.jsonl | sed -n '/^Turns/,$p'

step "4. Damage: a corrupt line inside the dependency region fails a strict replay..."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
awk 'NR==18{print "{\"timestamp\":\"x\",\"ordin"; next} {print}' testdata/examples/chapter-rollback-1.jsonl > "$tmp/damaged.jsonl"
$C replay "$tmp/damaged.jsonl" && exit 1 || echo "   (exit $? as expected)"
echo "...and --salvage continues past it with a warning:"
$C replay --salvage "$tmp/damaged.jsonl" | sed -n '/^Warnings/,$p'

step "5. The fast path agrees with the naive fold on a real Codex session with a compaction"
f=$(ls testdata/codex-real/sessions/*/*/*/*019c8a59*.jsonl)
diff <($C replay --json "$f" | sed '/"replay"/,$d') <($C replay --json --naive "$f" | sed '/"replay"/,$d') && echo "   identical state ($(wc -l < "$f") records)"
