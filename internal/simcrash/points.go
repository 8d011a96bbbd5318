package simcrash

import (
	"bytes"
	"strings"
)

// Named crash points. A scenario kills the process the nth time it reaches
// one of them (n is the scenario's position).
const (
	// PointBeforeEffect: a keyed call is logged and flushed, the world has
	// not been asked.
	PointBeforeEffect = "before_effect"
	// PointAfterEffect: the world carried the effect out, its output is
	// not logged.
	PointAfterEffect = "after_effect"
	// PointSentBeforePublish: inter_agent_sent is flushed, the mail is not
	// published.
	PointSentBeforePublish = "sent_before_publish"
	// PointTakenBeforeReceipt: the mail was taken from the mailbox, its
	// receipt (inter_agent_received) is not logged.
	PointTakenBeforeReceipt = "taken_before_receipt"
	// PointReceiptBeforeAck: the receipt is flushed, the mail is not
	// acknowledged (it is delivered again: possibly_duplicated).
	PointReceiptBeforeAck = "receipt_before_ack"
	// PointBetweenBarriers: a turn's body is flushed and its end
	// announced; task_complete is enqueued, not flushed.
	PointBetweenBarriers = "between_barriers"
	// PointSpawnedBeforeChild: thread_spawned is flushed in the parent;
	// the child's session_meta is not published.
	PointSpawnedBeforeChild = "spawned_before_child"
	// PointCreatedBeforeRecorded: a new thread's session_meta is on the
	// bus, its THREADS entry is not written.
	PointCreatedBeforeRecorded = "created_before_recorded"
	// PointAfterSpawn: a child is created and its task sent; the parent
	// has logged nothing since.
	PointAfterSpawn = "after_spawn"
	// PointRevertAfterSeal: a revert sealed the old rollout (its new
	// rollout written), THREADS is not switched (faults' revert.after-seal).
	PointRevertAfterSeal = "revert_after_seal"
)

// Points lists every point, in table order: the agent processes', then
// the coordinator's mirror's.
var Points = []string{PointBeforeEffect, PointAfterEffect, PointSentBeforePublish, PointTakenBeforeReceipt,
	PointReceiptBeforeAck, PointBetweenBarriers, PointSpawnedBeforeChild, PointCreatedBeforeRecorded,
	PointAfterSpawn, PointRevertAfterSeal, PointMirrorAfterAck, PointMirrorTornWrite}

// PointInfo says what each point is.
var PointInfo = map[string]string{
	PointBeforeEffect:          "a keyed call is logged and flushed; the world has not been asked",
	PointAfterEffect:           "the world carried the effect out; its output is not logged",
	PointSentBeforePublish:     "inter_agent_sent is flushed; the mail is not published",
	PointTakenBeforeReceipt:    "the mail is taken from the mailbox; its receipt is not logged",
	PointReceiptBeforeAck:      "the receipt is flushed; the mail is not acknowledged",
	PointBetweenBarriers:       "a turn's body is flushed and its end announced; task_complete is not flushed",
	PointSpawnedBeforeChild:    "thread_spawned is flushed; the child's session_meta is not published",
	PointCreatedBeforeRecorded: "a thread's session_meta is on the bus; its THREADS entry is not written",
	PointAfterSpawn:            "a child is created and its task sent; the parent logged nothing since",
	PointRevertAfterSeal:       "a revert sealed the old rollout; THREADS is not switched",
	PointMirrorAfterAck:        "the coordinator's mirror received an acknowledged message; it dies before writing it",
	PointMirrorTornWrite:       "the coordinator's mirror dies half way through appending a message",
}

// framePoint is the crash point a publish is the next step after, "" none:
// the process dies just before it writes the publish.
func framePoint(f *Frame) string {
	switch {
	case strings.HasPrefix(f.Subject, "mail.") && f.Reply != "":
		return PointSentBeforePublish
	case strings.HasPrefix(f.Subject, "$JS.ACK.MAIL."):
		return PointReceiptBeforeAck
	case strings.HasPrefix(f.Subject, "$KV.THREADS."):
		if f.HeaderValue("Nats-Expected-Last-Subject-Sequence") == "0" {
			return PointCreatedBeforeRecorded
		}
		return PointRevertAfterSeal
	case strings.HasPrefix(f.Subject, "rollout."):
		if bytes.Contains(f.Payload, []byte(`"inter_agent_received"`)) {
			return PointTakenBeforeReceipt
		}
		if f.HeaderValue("Logbook-First") == "1" && !bytes.Contains(f.Payload, []byte(`"history_base"`)) {
			if i := bytes.Index(f.Payload, []byte(`"parent_thread_id":"`)); i >= 0 && i+20 < len(f.Payload) && f.Payload[i+20] != '"' {
				return PointSpawnedBeforeChild
			}
		}
	}
	return ""
}

// frameID identifies a publish across its retries ("" for those without a
// msg id, never retried with the same bytes).
func frameID(f *Frame) string { return f.HeaderValue("Nats-Msg-Id") }
