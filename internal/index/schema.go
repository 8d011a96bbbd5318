package index

// SchemaVersion is stored in PRAGMA user_version. An index.db of another
// version is not read or written: Open sets it aside and rebuilds the index
// from the mirror; a Reader refuses it (coordinator reindex rebuilds it).
// Version 3 added the lineage and ledger projections (calls, problems,
// deliveries, the view prefix rows, the thread's chain and counts).
const SchemaVersion = 3

// schema is the DDL of index.db. Every table but threads (and its FTS
// shadow) is keyed by (rollout_id, ordinal or seq): a row is a projection of
// one record, or of one turn, of one rollout. Columns are NOT NULL with
// empty defaults so comparisons never meet NULL.
const schema = `
CREATE TABLE rollouts (
	rollout_id         TEXT PRIMARY KEY,
	thread_id          TEXT NOT NULL DEFAULT '',
	schema_version     INTEGER NOT NULL DEFAULT 0,
	lines              INTEGER NOT NULL DEFAULT 0,
	history_mode       TEXT NOT NULL DEFAULT '',
	parent_thread_id   TEXT NOT NULL DEFAULT '',
	forked_from_id     TEXT NOT NULL DEFAULT '',
	source             TEXT NOT NULL DEFAULT '',
	agent_role         TEXT NOT NULL DEFAULT '',
	meta_cwd           TEXT NOT NULL DEFAULT '',
	base_rollout_id    TEXT NOT NULL DEFAULT '',
	base_end_ordinal   INTEGER NOT NULL DEFAULT 0,
	base_end_offset    INTEGER NOT NULL DEFAULT 0,
	sealed_by          TEXT NOT NULL DEFAULT '',
	sealed_ordinal     INTEGER NOT NULL DEFAULT 0,
	created_at         TEXT NOT NULL DEFAULT '',
	updated_at         TEXT NOT NULL DEFAULT '',
	title              TEXT NOT NULL DEFAULT '',
	title_from_event   INTEGER NOT NULL DEFAULT 0,
	first_message      TEXT NOT NULL DEFAULT '',
	model              TEXT NOT NULL DEFAULT '',
	cwd                TEXT NOT NULL DEFAULT '',
	status             TEXT NOT NULL DEFAULT '',
	records            INTEGER NOT NULL DEFAULT 0,
	turns              INTEGER NOT NULL DEFAULT 0,
	open_turn          INTEGER NOT NULL DEFAULT 0,
	cur_turn           INTEGER NOT NULL DEFAULT 0,
	saw_task_started   INTEGER NOT NULL DEFAULT 0,
	checkpoint_ordinal INTEGER NOT NULL DEFAULT 0,
	checkpoint_offset  INTEGER NOT NULL DEFAULT 0,
	wm_ordinal         INTEGER NOT NULL DEFAULT 0,
	wm_offset          INTEGER NOT NULL DEFAULT 0,
	wm_last_offset     INTEGER NOT NULL DEFAULT 0,
	wm_last_crc        TEXT NOT NULL DEFAULT '',
	first_ts           TEXT NOT NULL DEFAULT '',
	last_ts            TEXT NOT NULL DEFAULT '',
	copy_rollout_id    TEXT NOT NULL DEFAULT '',
	copy_end_ordinal   INTEGER NOT NULL DEFAULT 0,
	base_error         TEXT NOT NULL DEFAULT '',
	base_pending       INTEGER NOT NULL DEFAULT 0,
	view_turns         INTEGER NOT NULL DEFAULT 0,
	open_calls         INTEGER NOT NULL DEFAULT 0,
	interrupted        INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX rollouts_thread ON rollouts(thread_id, created_at);
CREATE INDEX rollouts_pending ON rollouts(base_rollout_id) WHERE base_pending = 1;

CREATE TABLE threads (
	seq                INTEGER PRIMARY KEY,
	thread_id          TEXT NOT NULL UNIQUE,
	parent_thread_id   TEXT NOT NULL DEFAULT '',
	forked_from_id     TEXT NOT NULL DEFAULT '',
	source             TEXT NOT NULL DEFAULT '',
	agent_role         TEXT NOT NULL DEFAULT '',
	title              TEXT NOT NULL DEFAULT '',
	first_message      TEXT NOT NULL DEFAULT '',
	model              TEXT NOT NULL DEFAULT '',
	cwd                TEXT NOT NULL DEFAULT '',
	created_at         TEXT NOT NULL DEFAULT '',
	updated_at         TEXT NOT NULL DEFAULT '',
	status             TEXT NOT NULL DEFAULT '',
	current_rollout_id TEXT NOT NULL DEFAULT '',
	rollouts           INTEGER NOT NULL DEFAULT 0,
	chain              TEXT NOT NULL DEFAULT '',
	chain_problems     TEXT NOT NULL DEFAULT '',
	first_ts           TEXT NOT NULL DEFAULT '',
	base_error         TEXT NOT NULL DEFAULT '',
	tree_parent        TEXT NOT NULL DEFAULT '',
	node               TEXT NOT NULL DEFAULT ''
);
CREATE INDEX threads_problems ON threads(thread_id) WHERE chain_problems <> '' OR base_error <> '';
CREATE INDEX threads_page ON threads(created_at DESC, thread_id DESC);

CREATE VIRTUAL TABLE threads_fts USING fts5(
	thread_id, title, first_message, cwd, model,
	content='threads', content_rowid='seq', tokenize='trigram'
);
CREATE TRIGGER threads_fts_insert AFTER INSERT ON threads BEGIN
	INSERT INTO threads_fts(rowid, thread_id, title, first_message, cwd, model)
	VALUES (new.seq, new.thread_id, new.title, new.first_message, new.cwd, new.model);
END;
CREATE TRIGGER threads_fts_delete AFTER DELETE ON threads BEGIN
	INSERT INTO threads_fts(threads_fts, rowid, thread_id, title, first_message, cwd, model)
	VALUES ('delete', old.seq, old.thread_id, old.title, old.first_message, old.cwd, old.model);
END;
CREATE TRIGGER threads_fts_update AFTER UPDATE ON threads
WHEN old.thread_id IS NOT new.thread_id OR old.title IS NOT new.title OR old.first_message IS NOT new.first_message
	OR old.cwd IS NOT new.cwd OR old.model IS NOT new.model BEGIN
	INSERT INTO threads_fts(threads_fts, rowid, thread_id, title, first_message, cwd, model)
	VALUES ('delete', old.seq, old.thread_id, old.title, old.first_message, old.cwd, old.model);
	INSERT INTO threads_fts(rowid, thread_id, title, first_message, cwd, model)
	VALUES (new.seq, new.thread_id, new.title, new.first_message, new.cwd, new.model);
END;

CREATE TABLE turns (
	rollout_id     TEXT NOT NULL,
	seq            INTEGER NOT NULL,
	turn_id        TEXT NOT NULL,
	start_ordinal  INTEGER NOT NULL,
	start_offset   INTEGER NOT NULL,
	started_at     TEXT NOT NULL DEFAULT '',
	user           INTEGER NOT NULL DEFAULT 0,
	outcome        TEXT NOT NULL DEFAULT '',
	reason         TEXT NOT NULL DEFAULT '',
	end_ordinal    INTEGER NOT NULL DEFAULT 0,
	rolled_back    INTEGER NOT NULL DEFAULT 0,
	rolled_back_by INTEGER NOT NULL DEFAULT 0,
	status         TEXT NOT NULL,
	PRIMARY KEY (rollout_id, seq)
) WITHOUT ROWID;
CREATE INDEX turns_id ON turns(rollout_id, turn_id);
CREATE INDEX turns_effect ON turns(rollout_id, rolled_back, user, seq);
CREATE INDEX turns_status ON turns(rollout_id, status, start_ordinal);

CREATE TABLE items (
	rollout_id  TEXT NOT NULL,
	ordinal     INTEGER NOT NULL,
	byte_offset INTEGER NOT NULL,
	turn_seq    INTEGER NOT NULL,
	type        TEXT NOT NULL,
	role        TEXT NOT NULL DEFAULT '',
	call_id     TEXT NOT NULL DEFAULT '',
	name        TEXT NOT NULL DEFAULT '',
	excerpt     TEXT NOT NULL DEFAULT '',
	in_effect   INTEGER NOT NULL DEFAULT 1,
	PRIMARY KEY (rollout_id, ordinal)
) WITHOUT ROWID;
CREATE INDEX items_call ON items(call_id) WHERE call_id <> '';

CREATE TABLE edges (
	rollout_id       TEXT NOT NULL,
	ordinal          INTEGER NOT NULL,
	kind             TEXT NOT NULL,
	parent_thread_id TEXT NOT NULL,
	child_thread_id  TEXT NOT NULL,
	evidence         TEXT NOT NULL,
	agent_role       TEXT NOT NULL DEFAULT '',
	in_effect        INTEGER NOT NULL DEFAULT 1,
	redundant        INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (rollout_id, ordinal, kind)
) WITHOUT ROWID;
CREATE INDEX edges_parent ON edges(parent_thread_id);
CREATE INDEX edges_child ON edges(child_thread_id);
CREATE INDEX edges_spawned ON edges(rollout_id, ordinal) WHERE evidence = 'thread_spawned' AND redundant = 0;

CREATE TABLE messages (
	rollout_id      TEXT NOT NULL,
	ordinal         INTEGER NOT NULL,
	thread_id       TEXT NOT NULL,
	direction       TEXT NOT NULL,
	msg_id          TEXT NOT NULL,
	idempotency_key TEXT NOT NULL DEFAULT '',
	from_thread     TEXT NOT NULL DEFAULT '',
	to_thread       TEXT NOT NULL DEFAULT '',
	kind            TEXT NOT NULL DEFAULT '',
	in_reply_to     TEXT NOT NULL DEFAULT '',
	turn_seq        INTEGER NOT NULL,
	at              TEXT NOT NULL DEFAULT '',
	in_effect       INTEGER NOT NULL DEFAULT 1,
	origin_rollout  TEXT NOT NULL DEFAULT '',
	origin_ordinal  INTEGER NOT NULL DEFAULT 0,
	copied          INTEGER NOT NULL DEFAULT 0,
	outcome         TEXT NOT NULL DEFAULT '',
	evidence        TEXT NOT NULL DEFAULT '',
	by              TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (rollout_id, ordinal)
) WITHOUT ROWID;
CREATE INDEX messages_msg ON messages(msg_id);
CREATE INDEX messages_key ON messages(to_thread, idempotency_key);
CREATE INDEX messages_reply ON messages(in_reply_to) WHERE in_reply_to <> '';
CREATE INDEX messages_receipts ON messages(thread_id) WHERE direction = 'received' AND ordinal > 0;
CREATE INDEX messages_origin ON messages(origin_rollout, origin_ordinal, rollout_id) WHERE ordinal < 0;

CREATE TABLE settings (
	rollout_id TEXT NOT NULL,
	ordinal    INTEGER NOT NULL,
	model      TEXT NOT NULL DEFAULT '',
	cwd        TEXT NOT NULL DEFAULT '',
	in_effect  INTEGER NOT NULL DEFAULT 1,
	PRIMARY KEY (rollout_id, ordinal)
) WITHOUT ROWID;

CREATE TABLE checkpoints (
	rollout_id  TEXT NOT NULL,
	ordinal     INTEGER NOT NULL,
	byte_offset INTEGER NOT NULL,
	in_effect   INTEGER NOT NULL DEFAULT 1,
	PRIMARY KEY (rollout_id, ordinal)
) WITHOUT ROWID;

CREATE TABLE calls (
	rollout_id TEXT NOT NULL,
	call_id    TEXT NOT NULL,
	ordinal    INTEGER NOT NULL,
	open       INTEGER NOT NULL,
	PRIMARY KEY (rollout_id, call_id)
) WITHOUT ROWID;

CREATE INDEX calls_open ON calls(rollout_id) WHERE open = 1;

CREATE TABLE problems (
	rollout_id TEXT NOT NULL,
	ordinal    INTEGER NOT NULL,
	kind       TEXT NOT NULL,
	detail     TEXT NOT NULL,
	PRIMARY KEY (rollout_id, ordinal)
) WITHOUT ROWID;

CREATE TABLE deliveries (
	msg_id             TEXT NOT NULL,
	to_thread          TEXT NOT NULL,
	idempotency_key    TEXT NOT NULL DEFAULT '',
	from_thread        TEXT NOT NULL DEFAULT '',
	kind               TEXT NOT NULL DEFAULT '',
	in_reply_to        TEXT NOT NULL DEFAULT '',
	state              TEXT NOT NULL,
	reason             TEXT NOT NULL DEFAULT '',
	sends              INTEGER NOT NULL DEFAULT 0,
	receipts           INTEGER NOT NULL DEFAULT 0,
	receipts_in_effect INTEGER NOT NULL DEFAULT 0,
	cr_task            TEXT NOT NULL DEFAULT '',
	cr_result          TEXT NOT NULL DEFAULT '',
	cr_parent          TEXT NOT NULL DEFAULT '',
	cr_child           TEXT NOT NULL DEFAULT '',
	cr_state           TEXT NOT NULL DEFAULT '',
	cr_reason          TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (msg_id, to_thread)
) WITHOUT ROWID;
CREATE INDEX deliveries_state ON deliveries(state, msg_id, to_thread);
CREATE INDEX deliveries_to ON deliveries(to_thread, msg_id);
CREATE INDEX deliveries_from ON deliveries(from_thread, msg_id, to_thread);
CREATE INDEX deliveries_cr ON deliveries(cr_task, cr_result, cr_parent, cr_child) WHERE cr_state <> '';
`

// rolloutTables are the tables whose rows belong to one rollout, keyed by
// rollout_id; rows of a rollout are deleted together when it is reset.
var rolloutTables = []string{"items", "turns", "edges", "messages", "settings", "checkpoints", "calls", "problems", "rollouts"}

// comparedTables lists every table a fresh projection must reproduce, with
// the columns compared and their order. threads.seq is left out: it is the
// FTS rowid and depends on the order rollouts were first indexed.
var comparedTables = []struct{ name, cols, order string }{
	{"rollouts", "*", "rollout_id"},
	{"threads", "thread_id, parent_thread_id, forked_from_id, source, agent_role, title, first_message, model, cwd, created_at, updated_at, status, current_rollout_id, rollouts, chain, chain_problems, first_ts, base_error, tree_parent, node", "thread_id"},
	{"turns", "*", "rollout_id, seq"},
	{"items", "*", "rollout_id, ordinal"},
	{"edges", "*", "rollout_id, ordinal, kind"},
	{"messages", "*", "rollout_id, ordinal"},
	{"settings", "*", "rollout_id, ordinal"},
	{"checkpoints", "*", "rollout_id, ordinal"},
	{"calls", "*", "rollout_id, call_id"},
	{"problems", "*", "rollout_id, ordinal"},
	{"deliveries", "*", "msg_id, to_thread"},
}
