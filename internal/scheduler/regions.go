package scheduler

import (
	"fmt"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// subtask names one subtask of a vertex, whatever its attempt.
type subtask struct {
	vertex string
	index  int32
}

func (s subtask) String() string { return fmt.Sprintf("%s/%d", s.vertex, s.index) }

// pipelinedRegions splits a job's subtasks into pipelined regions: the
// sets connected by data exchange, as in Flink's region failover. Every
// edge is pipelined in a streaming job, so a region is a connected
// component of the subtask graph: a forward edge joins subtask i of the
// producer to subtask i of the consumer, any other partitioner joins every
// producer subtask to every consumer subtask. Regions are numbered in the
// order their first subtask appears in order (the vertices' topological
// order, subtasks by index), so the numbering is the same on every
// JobManager.
func pipelinedRegions(order []*weirv1.JobVertex) map[subtask]int {
	parent := map[subtask]subtask{}
	var find func(s subtask) subtask
	find = func(s subtask) subtask {
		p, ok := parent[s]
		if !ok || p == s {
			return s
		}
		root := find(p)
		parent[s] = root
		return root
	}
	union := func(a, b subtask) {
		ra, rb := find(a), find(b)
		if ra != rb {
			parent[rb] = ra
		}
	}
	byName := map[string]*weirv1.JobVertex{}
	for _, v := range order {
		byName[v.GetName()] = v
		for i := range v.GetParallelism() {
			s := subtask{v.GetName(), i}
			parent[s] = s
		}
	}
	for _, v := range order {
		for _, in := range v.GetInputs() {
			p := byName[in.GetSource()]
			if p == nil {
				continue // Validate refuses such graphs
			}
			if in.GetPartitioner() == weirv1.Partitioner_PARTITIONER_FORWARD {
				for i := range min(v.GetParallelism(), p.GetParallelism()) {
					union(subtask{p.GetName(), i}, subtask{v.GetName(), i})
				}
				continue
			}
			first := subtask{p.GetName(), 0}
			for i := range p.GetParallelism() {
				union(first, subtask{p.GetName(), i})
			}
			for i := range v.GetParallelism() {
				union(first, subtask{v.GetName(), i})
			}
		}
	}
	ids := map[subtask]int{}
	out := map[subtask]int{}
	for _, v := range order {
		for i := range v.GetParallelism() {
			s := subtask{v.GetName(), i}
			root := find(s)
			id, ok := ids[root]
			if !ok {
				id = len(ids)
				ids[root] = id
			}
			out[s] = id
		}
	}
	return out
}

// SlotKey is a slot of the job: slot Index of a slot-sharing group holds
// subtask Index of each of the group's vertices.
type SlotKey struct {
	Group string
	Index int32
}

func (k SlotKey) String() string { return fmt.Sprintf("%s/%d", k.Group, k.Index) }

func slotKey(v *weirv1.JobVertex, index int32) SlotKey {
	g := v.GetSlotSharingGroup()
	if g == "" {
		g = "default"
	}
	return SlotKey{Group: g, Index: index}
}

// SlotsNeeded is the number of slots a job takes: per slot-sharing group,
// its largest parallelism.
func SlotsNeeded(g *weirv1.JobGraph) int {
	perGroup := map[string]int32{}
	for _, v := range g.GetVertices() {
		k := slotKey(v, 0)
		perGroup[k.Group] = max(perGroup[k.Group], v.GetParallelism())
	}
	n := 0
	for _, p := range perGroup {
		n += int(p)
	}
	return n
}
