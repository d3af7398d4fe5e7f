package sim

import (
	"fmt"
)

// channelStateRefused is why a subtask of vertex at parallelism cannot
// restore checkpoint from ("" if it can): its in-flight records on a
// broadcast input were recorded at another parallelism, where each
// consumer had its own copy at its own place in the stream, as
// state.RestoreChannelState refuses them.
func (w *world) channelStateRefused(from *completed, vertex string, parallelism int32) string {
	if from == nil || !w.sim.vertices[vertex].broadcast {
		return ""
	}
	for _, st := range from.md.GetSubtasks() {
		if st.GetVertex() == vertex && st.GetChannelState() != nil && st.GetParallelism() != parallelism {
			return fmt.Sprintf("restore channel state of %s: records in flight on its broadcast input, from %d subtasks to %d (checkpoint %d)",
				vertex, st.GetParallelism(), parallelism, from.id)
		}
	}
	return ""
}

// checkRestorable: the checkpoint a new leader would restore, the newest
// in the store, restores at the stored graph's parallelism. Otherwise a
// leader change would leave a job that fails on every restart.
func (w *world) checkRestorable() {
	ha := w.sim.ha
	if len(ha.store) == 0 || ha.ended != 0 {
		return
	}
	newest := &ha.store[len(ha.store)-1]
	if newest.id == w.restorableChecked && ha.graph == w.restorableGraph {
		return
	}
	w.restorableChecked, w.restorableGraph = newest.id, ha.graph
	for _, v := range ha.graph.GetVertices() {
		if why := w.channelStateRefused(newest, v.GetName(), v.GetParallelism()); why != "" {
			w.fail("a new leader could not restore the job: the store holds %s, and its newest checkpoint cannot restore there: %s", parallelisms(ha.graph), why)
			return
		}
	}
}
