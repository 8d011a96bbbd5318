package tree

// Fill gives the full facts of a subtree's members: of the members that are
// threads (the others are children only a parent names), their facts, and
// the deliveries to members and the child results of members. Facts of
// other threads and deliveries or results that concern no member are
// ignored.
type Fill func(members []string) (Input, error)

// AssembleSubtree builds the subtree of thread id (an id or a unique prefix,
// as Find resolves it) as Assemble builds the whole tree and Find picks it,
// from less: the outline holds every thread's place in the tree, and fill
// is asked for the full facts of the subtree's members only.
//
// The outline's threads need only ID, ParentThreadID, Created, Spawns and,
// where ParentThreadID is empty, ForkedFromID (what links a node), and its
// Problems are every problem found reading the rollouts: the shape of a
// subtree depends on the whole tree (a cycle, a conflicting parent, a
// child only a parent names), and the problems and orphans reported with
// it are the whole tree's, as with Find. The tree returned has the subtree
// as its only root and holds only its members.
func AssembleSubtree(outline Input, id string, fill Fill, opt Options) (*Tree, error) {
	whole := shapeOf(outline)
	root, err := whole.Find(id)
	if err != nil {
		return nil, err
	}
	t := &Tree{Roots: []*Node{root}, Orphans: whole.Orphans, Problems: whole.Problems, nodes: map[string]*Node{}}
	var members []string
	var walk func(n *Node)
	walk = func(n *Node) {
		t.nodes[n.ThreadID] = n
		members = append(members, n.ThreadID)
		for _, c := range n.Children {
			walk(c)
		}
	}
	walk(root)
	in, err := fill(members)
	if err != nil {
		return nil, err
	}
	for _, f := range in.Threads {
		if n := t.nodes[f.ID]; n != nil {
			n.fill(f)
		}
	}
	for _, d := range in.Deliveries {
		if t.nodes[d.ToThread] != nil {
			t.Deliveries = append(t.Deliveries, d)
		}
	}
	for _, cr := range in.ChildResults {
		if t.nodes[cr.Parent] != nil {
			t.ChildResults = append(t.ChildResults, cr)
		}
	}
	t.judge(opt)
	return t, nil
}
