package index

import (
	"context"
	"database/sql"
)

// stmtCache keeps the writer's statements prepared across transactions: a
// catch-up runs the same few dozen statements for every rollout, and
// preparing them is most of the cost of a small batch. Statements are
// prepared on the DB (its one connection) between transactions, since the
// transaction holds that connection; within one, a statement not prepared
// yet is prepared for the transaction and queued for the next warm.
// Guarded by Index.mu.
type stmtCache struct {
	db    *sql.DB
	ready map[string]*sql.Stmt
	want  map[string]bool
}

func newStmtCache(db *sql.DB) *stmtCache {
	return &stmtCache{db: db, ready: map[string]*sql.Stmt{}, want: map[string]bool{}}
}

// warm prepares the statements transactions asked for; call it with no
// transaction open.
func (c *stmtCache) warm(ctx context.Context) {
	for q := range c.want {
		if s, err := c.db.PrepareContext(ctx, q); err == nil {
			c.ready[q] = s
		}
		delete(c.want, q)
	}
}

func (c *stmtCache) close() {
	for _, s := range c.ready {
		s.Close()
	}
}

// stmtTx is a transaction whose queries go through the cache. It is a
// queryer.
type stmtTx struct {
	tx    *sql.Tx
	cache *stmtCache
	local map[string]*sql.Stmt
}

func (c *stmtCache) begin(tx *sql.Tx) *stmtTx {
	return &stmtTx{tx: tx, cache: c, local: map[string]*sql.Stmt{}}
}

func (s *stmtTx) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := s.local[query]; ok {
		return st, nil
	}
	var st *sql.Stmt
	if base, ok := s.cache.ready[query]; ok {
		st = s.tx.StmtContext(ctx, base)
	} else {
		var err error
		if st, err = s.tx.PrepareContext(ctx, query); err != nil {
			return nil, err
		}
		s.cache.want[query] = true
	}
	s.local[query] = st
	return st, nil
}

func (s *stmtTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st, err := s.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

func (s *stmtTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := s.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

func (s *stmtTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	st, err := s.stmt(ctx, query)
	if err != nil {
		return s.tx.QueryRowContext(ctx, query, args...) // fails the same way, as a Row
	}
	return st.QueryRowContext(ctx, args...)
}

// close releases the transaction's statements (not the cached ones).
func (s *stmtTx) close() {
	for _, st := range s.local {
		st.Close()
	}
}
