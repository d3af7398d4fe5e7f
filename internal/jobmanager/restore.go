package jobmanager

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/weirproject/weir/internal/keygroup"
	"github.com/weirproject/weir/internal/storage"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// restorePoint is a savepoint or retained checkpoint a job starts from.
type restorePoint struct {
	path     string
	metadata *weirv1.CheckpointMetadata
	// byVertex holds the restored subtask states of each vertex.
	byVertex map[string][]*weirv1.SubtaskState
}

// loadRestorePoint reads and checks the metadata a job asks to start from:
// every piece of state must have a vertex to go to, and keyed state can
// only be split along the key groups it was written with.
func loadRestorePoint(g *weirv1.JobGraph) (*restorePoint, error) {
	md, err := storage.ReadMetadata(g.GetRestoreFrom())
	if err != nil {
		return nil, fmt.Errorf("restore-from %s: %w", g.GetRestoreFrom(), err)
	}
	if md.GetMaxParallelism() != g.GetMaxParallelism() {
		return nil, fmt.Errorf("restore-from %s: the job's max-parallelism is %d but the state was written with %d; keyed state can only be restored with the same max-parallelism",
			g.GetRestoreFrom(), g.GetMaxParallelism(), md.GetMaxParallelism())
	}
	vertices := map[string]bool{}
	for _, v := range g.GetVertices() {
		vertices[v.GetName()] = true
	}
	for _, st := range md.GetSubtasks() {
		if !vertices[st.GetVertex()] {
			return nil, fmt.Errorf("restore-from %s: it holds state of vertex %q, which the job does not have", g.GetRestoreFrom(), st.GetVertex())
		}
	}
	return newRestorePoint(storage.MetadataLocation(g.GetRestoreFrom()), md), nil
}

func newRestorePoint(path string, md *weirv1.CheckpointMetadata) *restorePoint {
	rp := &restorePoint{path: path, metadata: md, byVertex: map[string][]*weirv1.SubtaskState{}}
	for _, st := range md.GetSubtasks() {
		rp.byVertex[st.GetVertex()] = append(rp.byVertex[st.GetVertex()], st)
	}
	return rp
}

// taskRestore is what subtask index of vertex (at parallelism) restores.
func (rp *restorePoint) taskRestore(vertex string, index, parallelism, maxParallelism int) *weirv1.TaskRestore {
	if rp == nil {
		return nil
	}
	r := keygroup.RangeFor(maxParallelism, parallelism, index)
	return &weirv1.TaskRestore{
		CheckpointId: rp.metadata.GetCheckpointId(),
		Subtasks:     forKeyGroups(rp.byVertex[vertex], r),
		KeyGroups:    &weirv1.KeyGroupRange{Start: int32(r.Start), End: int32(r.End)},
	}
}

// forKeyGroups is what a subtask owning key groups r needs of the old
// subtasks' state: all of their operator and channel state (list state is
// redistributed across every subtask), but keyed state only where its key
// groups overlap r. Small state travels inline, so sending every old
// subtask's keyed state to every new one would grow each deployment with
// the parallelism squared.
func forKeyGroups(prev []*weirv1.SubtaskState, r keygroup.Range) []*weirv1.SubtaskState {
	out := make([]*weirv1.SubtaskState, 0, len(prev))
	for _, st := range prev {
		kg := st.GetKeyGroups()
		if kg == nil || (int(kg.GetStart()) <= r.End && r.Start <= int(kg.GetEnd())) {
			out = append(out, st)
			continue
		}
		trimmed := proto.Clone(st).(*weirv1.SubtaskState)
		trimmed.KeyedState, trimmed.SharedFiles = nil, nil
		out = append(out, trimmed)
	}
	return out
}
