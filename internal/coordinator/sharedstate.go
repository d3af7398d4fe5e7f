package coordinator

import (
	"sort"
	"sync"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// SharedRegistry counts, per shared state file (an incremental checkpoint's
// SST in <job>/shared), the checkpoints referencing it: retained completed
// ones and in-flight ones whose acks arrived. A file may be deleted once no
// checkpoint references it. Files it never saw are never reported, so a
// registry rebuilt from less than everything errs on keeping files.
// It is safe for concurrent use.
type SharedRegistry struct {
	mu   sync.Mutex
	refs map[string]map[int64]struct{} // path → checkpoints
	byID map[int64]map[string]struct{} // checkpoint → paths
}

// NewSharedRegistry returns an empty registry.
func NewSharedRegistry() *SharedRegistry {
	return &SharedRegistry{refs: map[string]map[int64]struct{}{}, byID: map[int64]map[string]struct{}{}}
}

// Register records that checkpoint id references the shared files of states.
func (r *SharedRegistry) Register(id int64, states ...*weirv1.SubtaskState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, st := range states {
		for _, h := range st.GetSharedFiles() {
			if !h.GetShared() || h.GetPath() == "" {
				continue
			}
			ids, ok := r.refs[h.GetPath()]
			if !ok {
				ids = map[int64]struct{}{}
				r.refs[h.GetPath()] = ids
			}
			ids[id] = struct{}{}
			paths, ok := r.byID[id]
			if !ok {
				paths = map[string]struct{}{}
				r.byID[id] = paths
			}
			paths[h.GetPath()] = struct{}{}
		}
	}
}

// Release drops checkpoint id's references (it was subsumed or aborted)
// and returns the files no checkpoint references any more, sorted.
func (r *SharedRegistry) Release(id int64) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var free []string
	for p := range r.byID[id] {
		ids := r.refs[p]
		delete(ids, id)
		if len(ids) == 0 {
			delete(r.refs, p)
			free = append(free, p)
		}
	}
	delete(r.byID, id)
	sort.Strings(free)
	return free
}

// Unreferenced returns the shared files of states that no checkpoint
// references: those of an ack that was not used.
func (r *SharedRegistry) Unreferenced(states ...*weirv1.SubtaskState) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, st := range states {
		for _, h := range st.GetSharedFiles() {
			if h.GetShared() && h.GetPath() != "" && len(r.refs[h.GetPath()]) == 0 {
				out = append(out, h.GetPath())
			}
		}
	}
	sort.Strings(out)
	return out
}

// Rebuild replaces the registry's content with the references of the
// retained checkpoints (after a restart, failover or recovery).
func (r *SharedRegistry) Rebuild(retained []*weirv1.CheckpointMetadata) {
	r.mu.Lock()
	r.refs, r.byID = map[string]map[int64]struct{}{}, map[int64]map[string]struct{}{}
	r.mu.Unlock()
	for _, md := range retained {
		r.Register(md.GetCheckpointId(), md.GetSubtasks()...)
	}
}

// Len is the number of files referenced.
func (r *SharedRegistry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.refs)
}
