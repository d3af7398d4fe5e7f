package jobgraph

import (
	"fmt"
	"slices"
	"strings"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// Consumer is one downstream end of a vertex's output.
type Consumer struct {
	Vertex      string
	Partitioner weirv1.Partitioner
	// Output is the side output the consumer reads; empty: the main one.
	Output string
}

// Consumers lists the vertices that read vertex's output, in declaration
// order, with the partitioner of each edge.
func Consumers(g *weirv1.JobGraph, vertex string) []Consumer {
	var out []Consumer
	for _, v := range g.GetVertices() {
		for _, in := range v.GetInputs() {
			if in.GetSource() == vertex {
				out = append(out, Consumer{Vertex: v.GetName(), Partitioner: in.GetPartitioner(), Output: in.GetOutput()})
			}
		}
	}
	return out
}

// TopologicalOrder returns the vertices so that each comes after all of its
// inputs: sources first, then by distance from the sources (the longest
// path), ties in declaration order so the result is stable. It fails, with
// an error wrapping ErrInvalidSpec, on a missing vertex, an unknown input or
// a cycle.
func TopologicalOrder(g *weirv1.JobGraph) ([]*weirv1.JobVertex, error) {
	var ps problems
	if g == nil {
		ps.add("", "job graph is missing")
		return nil, ps.err()
	}
	names := map[string]int{}
	for i, v := range g.Vertices {
		if v == nil {
			ps.add(fmt.Sprintf("vertices[%d]", i), "missing")
			continue
		}
		if _, dup := names[v.Name]; !dup {
			names[v.Name] = i
		}
	}
	for i, v := range g.Vertices {
		for j, in := range v.GetInputs() {
			path := fmt.Sprintf("vertices[%d].inputs[%d].from", i, j)
			switch u, ok := names[in.GetSource()]; {
			case !ok:
				ps.add(path, "unknown vertex %q", in.GetSource())
			case u == i:
				ps.add(path, "vertex %q cannot read its own output", v.GetName())
			}
		}
	}
	if len(ps) > 0 {
		return nil, ps.err()
	}
	edges := resolveEdges(g)
	if cycle, closing, ok := findCycle(len(g.Vertices), edges); ok {
		ps.add(fmt.Sprintf("vertices[%d].inputs[%d].from", closing.to, closing.input), "cycle: %s", cycleString(g, cycle))
		return nil, ps.err()
	}

	// Kahn's algorithm, always taking the earliest declared ready vertex,
	// yields an order in which every depth is final when first read.
	n := len(g.Vertices)
	indeg := make([]int, n)
	out := make([][]int, n)
	for _, e := range edges {
		indeg[e.to]++
		out[e.from] = append(out[e.from], e.to)
	}
	depth := make([]int, n)
	done := make([]bool, n)
	order := make([]int, 0, n)
	for len(order) < n {
		next := -1
		for i := range n {
			if !done[i] && indeg[i] == 0 {
				next = i
				break
			}
		}
		done[next] = true
		order = append(order, next)
		for _, w := range out[next] {
			indeg[w]--
			depth[w] = max(depth[w], depth[next]+1)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if depth[a] != depth[b] {
			return depth[a] - depth[b]
		}
		return a - b
	})
	result := make([]*weirv1.JobVertex, n)
	for i, idx := range order {
		result[i] = g.Vertices[idx]
	}
	return result, nil
}

// edge is an input edge by vertex indices: vertex to's inputs[input] reads
// from vertex from.
type edge struct {
	from, to, input int
}

// resolveEdges returns the edges whose source names a declared vertex other
// than the consumer, taking the first vertex of a duplicated name.
func resolveEdges(g *weirv1.JobGraph) []edge {
	names := map[string]int{}
	for i, v := range g.Vertices {
		if v == nil {
			continue
		}
		if _, dup := names[v.Name]; !dup {
			names[v.Name] = i
		}
	}
	var edges []edge
	for i, v := range g.Vertices {
		for j, in := range v.GetInputs() {
			if u, ok := names[in.GetSource()]; ok && u != i {
				edges = append(edges, edge{from: u, to: i, input: j})
			}
		}
	}
	return edges
}

// findCycle returns the vertices of a cycle in data-flow order and the edge
// that closes it, searching from vertices in declaration order so the same
// graph always reports the same cycle.
func findCycle(n int, edges []edge) (cycle []int, closing edge, found bool) {
	out := make([][]edge, n)
	for _, e := range edges {
		out[e.from] = append(out[e.from], e)
	}
	const (
		white = iota
		grey
		black
	)
	color := make([]int, n)
	var stack []int
	var visit func(v int) bool
	visit = func(v int) bool {
		color[v] = grey
		stack = append(stack, v)
		for _, e := range out[v] {
			switch color[e.to] {
			case grey:
				start := slices.Index(stack, e.to)
				cycle = append(slices.Clone(stack[start:]), e.to)
				closing = e
				return true
			case white:
				if visit(e.to) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[v] = black
		return false
	}
	for v := range n {
		if color[v] == white && visit(v) {
			return cycle, closing, true
		}
	}
	return nil, edge{}, false
}

func cycleString(g *weirv1.JobGraph, cycle []int) string {
	names := make([]string, len(cycle))
	for i, v := range cycle {
		names[i] = g.Vertices[v].GetName()
	}
	return strings.Join(names, " -> ")
}

// ConnectorKey is the configuration key that names the built-in
// connector a vertex runs when its operator is a program's own (the Go
// API's typed connectors wrap kafka-source and kafka-sink), so the checks
// of that connector apply to it too.
const ConnectorKey = "weir.connector"

// Connector is the built-in operator v runs: its operator, or the one
// its configuration names under ConnectorKey.
func Connector(v *weirv1.JobVertex) string {
	if c, ok := v.GetConfig().GetFields()[ConnectorKey]; ok {
		return c.GetStringValue()
	}
	return v.GetOperator()
}

// ChainedAfter maps each vertex that runs chained to the vertex before it
// in its chain. Vertices are chained, as in Flink, when the first's only
// consumer is the second, over a forward edge of its main output, the
// second reads nothing else, both have the same parallelism and
// slot-sharing group, and neither the job nor either vertex turned
// chaining off. Subtask i of a chain runs as one subtask: the records go
// from operator to operator by function call. The graph must be valid.
func ChainedAfter(g *weirv1.JobGraph) map[string]string {
	out := map[string]string{}
	if g.GetDisableChaining() {
		return out
	}
	byName := map[string]*weirv1.JobVertex{}
	for _, v := range g.GetVertices() {
		byName[v.GetName()] = v
	}
	for _, v := range g.GetVertices() {
		if v.GetDisableChaining() || len(v.GetInputs()) != 1 {
			continue
		}
		in := v.GetInputs()[0]
		up := byName[in.GetSource()]
		if up == nil || up.GetDisableChaining() || in.GetPartitioner() != weirv1.Partitioner_PARTITIONER_FORWARD || in.GetOutput() != "" {
			continue
		}
		if up.GetParallelism() != v.GetParallelism() || up.GetSlotSharingGroup() != v.GetSlotSharingGroup() {
			continue
		}
		if len(Consumers(g, up.GetName())) != 1 {
			continue
		}
		out[v.GetName()] = up.GetName()
	}
	return out
}

// HasBroadcastEdge reports whether g sends anything by broadcast: the
// in-flight records of such an edge cannot be split across a new
// parallelism, so a rescale's checkpoint is aligned, and so are the
// checkpoints taken while the HA store still holds the job's previous
// parallelism.
func HasBroadcastEdge(g *weirv1.JobGraph) bool {
	for _, v := range g.GetVertices() {
		for _, e := range v.GetInputs() {
			if e.GetPartitioner() == weirv1.Partitioner_PARTITIONER_BROADCAST {
				return true
			}
		}
	}
	return false
}
