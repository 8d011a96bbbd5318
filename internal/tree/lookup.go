package tree

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Lookup errors, as the index gives them for the same ids.
var (
	// ErrUnknownThread: no thread has that id or id prefix.
	ErrUnknownThread = errors.New("unknown thread")
	// ErrAmbiguousThread: an id prefix names more than one thread.
	ErrAmbiguousThread = errors.New("ambiguous thread id prefix")
)

// Resolve finds the key of m that is id, or else the only one that starts
// with id: the rule `show` applies through the index, for maps read from
// rollout files.
func Resolve[V any](m map[string]V, id string) (string, error) {
	if _, ok := m[id]; ok {
		return id, nil
	}
	var found []string
	if id != "" {
		for k := range m {
			if strings.HasPrefix(k, id) {
				found = append(found, k)
			}
		}
	}
	sort.Strings(found)
	switch len(found) {
	case 0:
		return "", fmt.Errorf("%w %s", ErrUnknownThread, id)
	case 1:
		return found[0], nil
	case 2:
		return "", fmt.Errorf("%w: %s matches %s and %s", ErrAmbiguousThread, id, found[0], found[1])
	}
	return "", fmt.Errorf("%w: %s matches %s, %s and %d more", ErrAmbiguousThread, id, found[0], found[1], len(found)-2)
}

// Find returns the node of thread id, or of the only thread whose id starts
// with id.
func (t *Tree) Find(id string) (*Node, error) {
	key, err := Resolve(t.nodes, id)
	if err != nil {
		return nil, err
	}
	return t.nodes[key], nil
}
