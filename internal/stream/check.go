package stream

import "github.com/logbook-agents/logbook/internal/rollout"

// CheckRecordIDs validates the IDs a record read from the bus carries that
// become subject tokens or file names, exactly as Append checks them before
// publishing (see the package doc, Writing). It returns the record's
// session_meta when it is one. Errors wrap ErrInvalidRecord, and
// rollout.ErrInvalidID for an invalid ID. The mirror uses it: nothing on the
// bus is trusted, whoever published it.
func CheckRecordIDs(r *rollout.Record) (*rollout.SessionMeta, error) {
	var p prepared
	if err := checkIDs(&p, r); err != nil {
		return nil, err
	}
	return p.meta, nil
}
