// Package mirror keeps a data dir's local copy of the bus: one JSONL file
// per rollout, appended from the ROLLOUTS stream, fsynced before the mirror
// says so, compressed when cold (DESIGN §5, the chapter's 10.4.1 and 10.12).
// `coordinator serve` runs it; the index (internal/index) projects its
// files. Order of truth: JetStream >= mirror >= index, at every moment.
//
// # Files
//
//	DIR/rollouts/<rollout_id>.jsonl       whole validated records, one per line, the
//	                                      bytes of each line exactly as its pack held it
//	DIR/rollouts/<rollout_id>.jsonl.zst   the same lines, seekable zstd (rollout.WriteZst),
//	                                      for a cold rollout; never both for long (below)
//	DIR/rollouts/<file>.broken[.N]        the bytes of a torn tail, cut off before an append
//	DIR/rollouts/.tmp.*                   a compression or re-materialization in progress
//	DIR/mirror.state                      the watermark: two slots 4096 bytes apart,
//	                                      each "<crc> <json>\n", the JSON
//	                                      {"version":1,"gen":G,"seq":N,"stream_created":T,...}
//	DIR/mirror.epochs                     the epoch journal: lines "<crc> <json>\n", the JSON
//	                                      {"seq":N,"epochs":{"<rollout_id>":E,...}} (epochs.go)
//	DIR/quarantine/<seq>.msg, <seq>.json  a refused message: its payload byte for byte,
//	                                      and its subject, headers, kind and reason
//	DIR/quarantine/damaged/<file>.<time>  a damaged mirror file set aside, with <that>.reason
//
// rollouts/, quarantine/ and quarantine/damaged/ are 0700 and every file
// in them (and mirror.state, mirror.epochs) 0600, whatever the data dir's
// mode or the umask: transcripts are private.
//
// seq is the last stream sequence of ROLLOUTS mirrored: every message up to
// it is in a mirror file or in quarantine/, durably. The rest of the data
// dir (index.db, nats/, nats.url, LOCK) belongs to the index and to serve.
//
// # Mirroring
//
// An ordered consumer reads ROLLOUTS from seq+1. Messages are taken in
// batches: a batch takes what the bus has ready (the consumer's pending
// count says so), up to BatchMessages or BatchBytes, and ends when the bus
// has nothing more. For each message, in stream order:
//
//  1. check it alone: a valid pack (stream.DecodePack: headers, msg id,
//     payload CRC, one line per ordinal) on rollout.<id> with a valid id;
//     every line a record (rollout.DecodeLine) with the ordinal its place
//     says, a crc that matches, a JSON payload, valid IDs
//     (stream.CheckRecordIDs, the writer's own rules); a canonical
//     session_meta (ordinal 1) naming this rollout;
//  2. check it against the mirror file: its first ordinal must be at most
//     the next one the file expects; if it is not, what the file lacks is
//     re-read from the bus first (below, Lost lines), and only a gap the
//     bus cannot fill is an ordinal_gap; ordinals the file
//     already holds must be byte-equal to the file's lines (else
//     ordinal_conflict) and are skipped: that is the redelivery after a
//     crash between an append and the watermark; a pack that adds
//     ordinals with an epoch lower than the highest the rollout's accepted
//     packs ever carried (the epoch journal below) is stale_epoch (the epoch
//     half of stream.Tail.Follows, the rule writers find their tail by); a pack
//     whose epoch is above the last lease revision issued
//     (stream.Bus.LeaseRevision, read again only when an epoch exceeds the
//     last value read) is future_epoch, so one forged epoch cannot fence a
//     thread for good; a pack with a record over the record limit writers
//     enforce (stream.Bus.CheckRecordSizes) is too_large;
//  3. append the remaining lines to the file in one write.
//
// Then, once per batch: fsync every mirror file and quarantine file it
// wrote, all at once (and rollouts/ when a file was created), append the
// rollouts whose highest accepted epoch it raised to the epoch journal and
// fsync it, write the watermark, and only then tell the index to catch up the rollouts it
// touched. The watermark write goes to the slot that does not hold the
// current watermark (gen % 2) and is fdatasynced; a reader takes the valid
// slot (its crc, CRC-32C of the JSON, matches) with the higher gen, so a
// write torn by a crash leaves the previous watermark. The index runs beside the mirror and never
// holds it up. A failing batch (a disk error, the bus gone) counts for nothing: the
// rollouts it touched are reloaded from their files, the epochs its packs
// carried are forgotten (they were not accepted: its retry must not find
// them stale against their successors in the same batch), and the consumer
// starts again from the watermark.
//
// # Epochs
//
// The lines of a mirror file do not carry the epoch of the pack they came
// in, so the highest accepted epoch of each rollout is kept in
// mirror.epochs, through FS: a batch's entry (seq = its last sequence) is
// fsynced before its watermark, a re-read from the bus (refetch) journals
// its epoch at the watermark before its lines. Open folds the entries
// (the highest E per rollout), cuts off an unterminated last entry and the
// entries past the watermark (a batch that never wrote it), and compacts a
// journal with many more entries than rollouts. A damaged journal (a crc
// mismatch, an entry that does not parse, an entry below the watermark
// after one past it) is set aside into quarantine/damaged/ with its
// reason; it, or a missing journal with a watermark above 0, is rebuilt
// from the bus by the valid-tail rule (stream.Bus.ValidPacks: the epoch of
// the last pack accepted at or below the watermark, for every mirror
// file) before Run consumes anything, retried while the bus cannot answer.
// It is never taken as empty.
//
// # Write and fsync errors
//
// Errors are sticky per file. After a failed write or fsync the kernel may
// hold the lines in its page cache only, and report the next fsync clean;
// a retry that found them "already mirrored" would write a watermark over
// data that never reached the disk. So a failed batch cuts every mirror
// file it opened (and the epoch journal, when its entry failed) back to
// the size it had when the batch opened it (the size the last watermark
// vouched for) and fsyncs it; a file that cannot be
// cut back is remembered, and no batch runs (no watermark is written) until
// it is. The retry then writes the lines again. The mirror files go through
// FS, the one seam to the file system (the OS's by default; tests inject
// EIO and ENOSPC on write, fsync and rename through it). A full disk fails
// the batch with "no space left on device" naming the file; Status.Err
// holds it (serve's /healthz says degraded) until a batch succeeds. Files
// kept aside (.broken, reasons) are written by temp file, fsync and rename:
// a failed repair leaves nothing behind.
//
// # Quarantine
//
// Anything can publish on rollout.*. A message that fails a check goes to
// quarantine/ with its kind (bad_pack, invalid_id, crc_mismatch,
// bad_record, wrong_rollout, ordinal_gap, ordinal_conflict, stale_epoch, future_epoch, too_large,
// mirror_damaged),
// is counted in Status and logged, and never reaches a mirror file; the
// watermark moves past it. A message is refused whole: one bad line and
// none of its lines are mirrored. Later messages of the same rollout are
// judged on their own: one that continues the file is mirrored.
//
// # Torn tails
//
// Before the first append to a file in a process, its tail is read. An
// unterminated or unparsable last line (a write cut short) is copied to
// <file>.broken (or .broken.2 ...), fsynced, and cut off (truncate, fsync).
// Other damage is not the mirror's to guess about, nor a reason to stop
// the others: a mirror file damaged at its tail (a crc mismatch, no
// ordinal), a .jsonl.zst that cannot be read (truncated), or a directory
// or other non-file at a mirror file's name is set aside: moved into
// quarantine/damaged/ with its reason, and the rollout rebuilt from the
// bus (up to the watermark; the consumer brings the rest) while every
// other rollout keeps flowing. Until it is rebuilt (the bus may no longer
// hold all of it), Status.Damaged names it and serve's /healthz says
// degraded. I/O errors (EIO, a full disk) are not damage: they fail the
// batch and are retried.
//
// # Lost lines
//
// Lines lost below the watermark (a file cut short at a line boundary
// while the coordinator was stopped, a file set aside) are read again from
// the bus (stream.Bus.ReadRollout from the file's last ordinal + 1): at
// start-up, for every mirror file whose rollout's last message on the bus
// holds a later ordinal (one message get per rollout), and whenever a
// message arrives past the file's end. Only records of messages at or
// below the watermark are re-read; junk packs are skipped as the consumer
// quarantined them; the re-read stops at the first gap or damage on the
// bus. Re-read records are fsynced before the batch goes on.
//
// # Cold files
//
// A rollout whose .jsonl was not modified for ColdAfter (default 10
// minutes) and that no canonical session_meta names in its history_base (a
// reference fork or a revert: DESIGN §6) is compressed: write the
// .jsonl.zst under a temp name, fsync, verify it (its last line through the
// seek table, and its whole content decompressed, against the JSONL),
// rename, fsync rollouts/, remove the .jsonl, fsync rollouts/. Appends are
// not held up meanwhile: a compression whose rollout changed while it ran
// is dropped. Reads decompress transparently (rollout.File). An append to a
// compressed rollout, or a new reference to it, re-materializes it first:
// decompress to a temp file, fsync, rename to .jsonl, fsync, remove the
// .jsonl.zst, fsync. References are learnt from the first line of every
// mirror file at start-up (nothing is compressed before that scan ends)
// and from every canonical session_meta mirrored since.
//
// # Crashes
//
// A crash at any step leaves the .jsonl or the .jsonl.zst complete. Open
// repairs the rest before anything reads the files: temp files are
// removed; a rollout found both plain and compressed keeps the file that
// holds the other whole (the plain one when they are equal) and removes the
// other. Messages past the watermark are received again and land as
// described above. Crash points (internal/faults) sit after a message is
// received, in the middle of an append, between the fsync and the
// watermark, and around each rename.
//
// # Verification
//
// VerifyBus compares every mirror file with the bus as the bus reader
// (stream.Bus.ReadRollout) returns it: each mirrored record byte-equal, no
// mirror file holding more than the bus. `coordinator verify --data` runs
// it against a served data dir.
package mirror
