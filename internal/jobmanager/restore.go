package jobmanager

import (
	"fmt"
	"os"
	"path/filepath"

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
	path := g.GetRestoreFrom()
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		path = filepath.Join(path, storage.MetadataFile)
	}
	md, err := storage.ReadMetadata(path)
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
	return newRestorePoint(path, md), nil
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
		Subtasks:     rp.byVertex[vertex],
		KeyGroups:    &weirv1.KeyGroupRange{Start: int32(r.Start), End: int32(r.End)},
	}
}
