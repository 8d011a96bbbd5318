package tree

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
)

// ErrBadCursor: a tree cursor this tree did not hand out, or one made for
// another subtree or state.
var ErrBadCursor = errors.New("tree: invalid cursor")

// PageQuery asks for a page of a tree's nodes in tree order (each node
// before its children, children oldest first), so a big tree can be read a
// bounded piece at a time.
type PageQuery struct {
	Root  string // the subtree of this node (a thread id in the tree); "" the whole tree
	State string // only nodes with this status (Active, Idle, NeedsAttention); "" all
	Limit int    // nodes per page; 0: all
	After string // the NextCursor of the previous page; "" for the first
}

// PageNode is a node of a page, at its depth below the page's roots.
type PageNode struct {
	*Node
	Depth int
}

// Page is one page of nodes.
type Page struct {
	Nodes      []PageNode
	NextCursor string // "" on the last page
}

type pageCursor struct {
	V      int    `json:"v"`
	Thread string `json:"t"`
	Q      uint32 `json:"q"`
}

func (q PageQuery) hash() uint32 {
	h := fnv.New32a()
	h.Write([]byte("tree\x00" + q.Root + "\x00" + q.State))
	return h.Sum32()
}

// Page lists the nodes of a page. The cursor names the last node listed:
// the next page starts right after it in tree order.
func (t *Tree) Page(q PageQuery) (Page, error) {
	var page Page
	switch q.State {
	case "", Active, Idle, NeedsAttention:
	default:
		return page, fmt.Errorf("tree: state %q: use %s, %s or %s", q.State, Active, NeedsAttention, Idle)
	}
	after := ""
	if q.After != "" {
		var c pageCursor
		b, err := base64.RawURLEncoding.DecodeString(q.After)
		if err == nil {
			err = json.Unmarshal(b, &c)
		}
		if err != nil || c.V != 1 || c.Thread == "" {
			return page, fmt.Errorf("%w: %q is not a tree cursor", ErrBadCursor, q.After)
		}
		if c.Q != q.hash() {
			return page, fmt.Errorf("%w: the cursor belongs to another THREAD or --state; page with the same ones", ErrBadCursor)
		}
		after = c.Thread
	}
	roots := t.Roots
	if q.Root != "" {
		n := t.nodes[q.Root]
		if n == nil {
			return page, fmt.Errorf("%w %s", ErrUnknownThread, q.Root)
		}
		roots = []*Node{n}
	}
	seen := after == ""
	more := false
	var walk func(n *Node, depth int) bool
	walk = func(n *Node, depth int) bool {
		if seen && (q.State == "" || n.Status == q.State) {
			if q.Limit > 0 && len(page.Nodes) == q.Limit {
				more = true
				return false
			}
			page.Nodes = append(page.Nodes, PageNode{n, depth})
		}
		if n.ThreadID == after {
			seen = true
		}
		for _, c := range n.Children {
			if !walk(c, depth+1) {
				return false
			}
		}
		return true
	}
	for _, r := range roots {
		if !walk(r, 0) {
			break
		}
	}
	if !seen {
		return Page{}, fmt.Errorf("%w: it names thread %s, which is not in this tree", ErrBadCursor, after)
	}
	if more {
		b, _ := json.Marshal(pageCursor{V: 1, Thread: page.Nodes[len(page.Nodes)-1].ThreadID, Q: q.hash()})
		page.NextCursor = base64.RawURLEncoding.EncodeToString(b)
	}
	return page, nil
}
