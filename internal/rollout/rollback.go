package rollout

import (
	"errors"
	"math"
	"strconv"
)

// RollbackTurns reads the num_turns of a thread_rolled_back payload, the one
// reading every projection uses. A count beyond int64 rolls back everything,
// as any count above the turns in effect does; a missing, non-integer, zero
// or negative count is 0, and a marker of 0 cuts nothing (replay warns).
func RollbackTurns(payload []byte) int64 {
	v := Lookup(payload, "num_turns")
	n, err := strconv.ParseInt(string(v), 10, 64)
	var ne *strconv.NumError
	if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) && n > 0 {
		return math.MaxInt64
	}
	if err != nil || n < 0 {
		return 0
	}
	return n
}
