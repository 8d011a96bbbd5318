-- index.db as schema version 2 wrote it (before the lineage and ledger projections),
-- with one indexed rollout: TestOpenOlderSchema opens it.

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
	wm_last_crc        TEXT NOT NULL DEFAULT ''
);
CREATE INDEX rollouts_thread ON rollouts(thread_id, created_at);

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
	rollouts           INTEGER NOT NULL DEFAULT 0
);
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
	PRIMARY KEY (rollout_id, ordinal, kind)
) WITHOUT ROWID;
CREATE INDEX edges_parent ON edges(parent_thread_id);
CREATE INDEX edges_child ON edges(child_thread_id);

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
	PRIMARY KEY (rollout_id, ordinal)
) WITHOUT ROWID;
CREATE INDEX messages_msg ON messages(msg_id);
CREATE INDEX messages_key ON messages(idempotency_key);
CREATE INDEX messages_to ON messages(to_thread);
CREATE INDEX messages_from ON messages(from_thread);

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
INSERT INTO rollouts (rollout_id, thread_id, schema_version, history_mode, created_at, updated_at, records, wm_ordinal, wm_offset)
	VALUES ('r-release-P', 'release-P', 1, 'legacy', '2026-11-29T10:00:00.000Z', '2026-11-29T10:05:00.000Z', 3, 3, 600);
INSERT INTO threads (thread_id, created_at, updated_at, current_rollout_id, rollouts)
	VALUES ('release-P', '2026-11-29T10:00:00.000Z', '2026-11-29T10:05:00.000Z', 'r-release-P', 1);
PRAGMA user_version = 2;
