package coordinator

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// maxDeleted bounds how many deleted files the registry remembers (about
// 100 bytes each). A backend that wrongly reuses a deleted file does so a
// few checkpoints after the deletion, far within this many files.
const maxDeleted = 1 << 14

// SharedRegistry counts, per shared state file (an incremental checkpoint's
// SST in <job>/shared), the checkpoints referencing it: retained completed
// ones and in-flight ones whose acks arrived. A file may be deleted once no
// checkpoint references it. Files it never saw are never reported, so a
// registry rebuilt from less than everything errs on keeping files.
// It is safe for concurrent use.
type SharedRegistry struct {
	mu sync.Mutex
	// refs counts, per path and checkpoint, the acks that reference the
	// file: Unregister takes back one ack without dropping another's.
	refs map[string]map[int64]int
	byID map[int64]map[string]struct{} // checkpoint → paths
	// deleted are the files the registry gave up (the caller deletes
	// them), the newest maxDeleted; ring holds them in the order given up.
	deleted map[string]struct{}
	ring    []string
	next    int
}

// NewSharedRegistry returns an empty registry.
func NewSharedRegistry() *SharedRegistry {
	return &SharedRegistry{
		refs: map[string]map[int64]int{}, byID: map[int64]map[string]struct{}{},
		deleted: map[string]struct{}{},
	}
}

// sharedPaths are the shared files states reference.
func sharedPaths(states []*weirv1.SubtaskState) []string {
	var out []string
	for _, st := range states {
		for _, h := range st.GetSharedFiles() {
			if h.GetShared() && h.GetPath() != "" {
				out = append(out, h.GetPath())
			}
		}
	}
	return out
}

// Register records that checkpoint id references the shared files of
// states. A state that references a file the registry gave up is refused
// whole: that checkpoint could never be restored. The error names the
// files.
func (r *SharedRegistry) Register(id int64, states ...*weirv1.SubtaskState) error {
	paths := sharedPaths(states)
	r.mu.Lock()
	defer r.mu.Unlock()
	var gone []string
	for _, p := range paths {
		if _, ok := r.deleted[p]; ok {
			gone = append(gone, p)
		}
	}
	if len(gone) > 0 {
		sort.Strings(gone)
		return fmt.Errorf("coordinator: checkpoint %d references %d shared state files already deleted: %s",
			id, len(gone), strings.Join(gone, ", "))
	}
	r.register(id, paths)
	return nil
}

func (r *SharedRegistry) register(id int64, paths []string) {
	for _, p := range paths {
		ids, ok := r.refs[p]
		if !ok {
			ids = map[int64]int{}
			r.refs[p] = ids
		}
		ids[id]++
		byPath, ok := r.byID[id]
		if !ok {
			byPath = map[string]struct{}{}
			r.byID[id] = byPath
		}
		byPath[p] = struct{}{}
	}
}

// Unregister takes back what Register recorded for states, whose ack
// checkpoint id did not use. The files it leaves unreferenced are not
// given up: Unreferenced decides on those.
func (r *SharedRegistry) Unregister(id int64, states ...*weirv1.SubtaskState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range sharedPaths(states) {
		ids := r.refs[p]
		if ids[id] == 0 {
			continue
		}
		if ids[id]--; ids[id] > 0 {
			continue
		}
		delete(ids, id)
		delete(r.byID[id], p)
		if len(r.byID[id]) == 0 {
			delete(r.byID, id)
		}
		if len(ids) == 0 {
			delete(r.refs, p)
		}
	}
}

// Release drops checkpoint id's references (it was subsumed or aborted)
// and returns the files no checkpoint references any more, sorted. The
// caller deletes them.
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
	r.giveUp(free)
	return free
}

// Unreferenced returns the shared files of states that no checkpoint
// references: those of an ack that was not used. The caller deletes them.
func (r *SharedRegistry) Unreferenced(states ...*weirv1.SubtaskState) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, p := range sharedPaths(states) {
		if len(r.refs[p]) == 0 {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	r.giveUp(out)
	return out
}

// giveUp remembers paths as deleted, forgetting the oldest beyond
// maxDeleted.
func (r *SharedRegistry) giveUp(paths []string) {
	for _, p := range paths {
		if _, ok := r.deleted[p]; ok {
			continue
		}
		r.deleted[p] = struct{}{}
		if len(r.ring) < maxDeleted {
			r.ring = append(r.ring, p)
			continue
		}
		delete(r.deleted, r.ring[r.next])
		r.ring[r.next] = p
		r.next = (r.next + 1) % maxDeleted
	}
}

// Rebuild replaces the registry's references with those of the retained
// checkpoints (after a restart, failover or recovery). The files it gave
// up stay given up.
func (r *SharedRegistry) Rebuild(retained []*weirv1.CheckpointMetadata) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refs, r.byID = map[string]map[int64]int{}, map[int64]map[string]struct{}{}
	for _, md := range retained {
		r.register(md.GetCheckpointId(), sharedPaths(md.GetSubtasks()))
	}
}

// Len is the number of files referenced.
func (r *SharedRegistry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.refs)
}
