package sim

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/weirproject/weir/internal/sweep"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// files is checkpoint storage: what the simulated subtasks upload, less
// what the JobManagers' ledgers (the production coordinator.Ledger and
// SharedRegistry) decide to delete.
type files struct {
	exist map[string]bool
	// byLocation lists the files under each checkpoint location: deleting
	// the location deletes them.
	byLocation map[string][]string
	deleted    int
	// dirty: a file was deleted, or a checkpoint stored, since the last
	// check.
	dirty bool
}

func newFiles() *files {
	return &files{exist: map[string]bool{}, byLocation: map[string][]string{}}
}

// upload creates path, under location if that is not empty.
func (f *files) upload(location, path string) {
	f.exist[path] = true
	if location != "" {
		f.byLocation[location] = append(f.byLocation[location], path)
	}
}

func (f *files) remove(path string) {
	if f.exist[path] {
		delete(f.exist, path)
		f.deleted++
		f.dirty = true
	}
}

// list is every file, sorted, as the sweep sees the job's directory.
func (f *files) list() []sweep.File {
	out := make([]sweep.File, 0, len(f.exist))
	for _, p := range slices.Sorted(maps.Keys(f.exist)) {
		out = append(out, sweep.File{Rel: p, Location: p})
	}
	return out
}

// discardLocation removes a checkpoint's location with everything under
// it.
func (f *files) discardLocation(dir string) {
	for _, p := range f.byLocation[dir] {
		f.remove(p)
	}
	delete(f.byLocation, dir)
}

// missing lists the files md references that are gone.
func (f *files) missing(md *weirv1.CheckpointMetadata) []string {
	var gone []string
	for p := range sweep.References(nil, []*weirv1.CheckpointMetadata{md}, nil) {
		if !f.exist[p] {
			gone = append(gone, p)
		}
	}
	slices.Sort(gone)
	return gone
}

// checkFiles: every file a checkpoint in the store references exists, so
// that whichever a recovery picks restores.
func (w *world) checkFiles() {
	if !w.files.dirty {
		return
	}
	w.files.dirty = false
	for _, c := range w.sim.ha.store {
		if gone := w.files.missing(c.md); len(gone) > 0 {
			w.fail("checkpoint %d is in the store but %d of its files were deleted: %s", c.id, len(gone), strings.Join(gone, ", "))
			return
		}
	}
}

// backend is a simulated subtask's incremental state backend: an LSM of a
// few files, of which each snapshot uploads those not reusable, as the
// Pebble backend decides (state.Pebble's reusableLocked): a file of the
// last checkpoint it was told completed, that every snapshot taken since
// references too.
type backend struct {
	lsm    []string          // the files' names, oldest first
	next   int               // the next file's number
	base   map[string]string // name → path, of checkpoint baseID
	baseID int64
	taken  map[int64]map[string]string
}

// restore starts from a restored subtask state: its shared files are
// the base. nil: an empty backend.
func newBackend(st *weirv1.SubtaskState, id int64) *backend {
	b := &backend{base: map[string]string{}, taken: map[int64]map[string]string{}, baseID: id}
	for _, h := range st.GetSharedFiles() {
		name := fileName(h.GetPath())
		b.base[name] = h.GetPath()
		b.lsm = append(b.lsm, name)
	}
	slices.Sort(b.lsm)
	for _, n := range b.lsm {
		var k int
		fmt.Sscanf(n, "f%d", &k)
		b.next = max(b.next, k+1)
	}
	return b
}

// sharedPath names a shared file as the Pebble backend does,
// shared/<uploader>_<checkpoint>_<name>, which the sweep reads.
func sharedPath(owner string, id int64, name string) string {
	uploader := strings.NewReplacer("/", "-", "@", "-", "_", "-").Replace(owner)
	return fmt.Sprintf("shared/%s_%d_%s", uploader, id, name)
}

// fileName is the LSM name of a shared file's path.
func fileName(path string) string {
	parts := strings.SplitN(path[strings.LastIndex(path, "/")+1:], "_", 3)
	return parts[len(parts)-1]
}

// write adds new data: one more file, and now and then a compaction of
// the two oldest into one.
func (b *backend) write(compact bool) {
	b.lsm = append(b.lsm, fmt.Sprintf("f%d", b.next))
	b.next++
	if compact && len(b.lsm) >= 3 {
		b.lsm = append([]string{fmt.Sprintf("f%d", b.next)}, b.lsm[2:]...)
		b.next++
	}
}

// snapshot takes checkpoint id: the LSM's files, reused from the base
// where that is safe, uploaded (into storage, by upload) otherwise.
func (b *backend) snapshot(id int64, owner string, upload func(path string)) []*weirv1.StateHandle {
	refs := map[string]string{}
	var hs []*weirv1.StateHandle
	for _, name := range b.lsm {
		path, ok := b.base[name]
		for _, t := range b.taken {
			if t[name] != path {
				ok = false
			}
		}
		if !ok {
			path = sharedPath(owner, id, name)
			upload(path)
		}
		refs[name] = path
		hs = append(hs, &weirv1.StateHandle{Path: path, Shared: true})
	}
	b.taken[id] = refs
	return hs
}

// completed: checkpoint id is the base of the next snapshots; an older
// notification than the base is stale.
func (b *backend) completed(id int64) {
	if id <= b.baseID {
		return
	}
	if t, ok := b.taken[id]; ok {
		b.base = t
	} else {
		b.base = map[string]string{} // not a snapshot of this backend's
	}
	b.baseID = id
	for _, c := range slices.Collect(maps.Keys(b.taken)) {
		if c <= id {
			delete(b.taken, c)
		}
	}
}

// aborted: checkpoint id will never subsume the base.
func (b *backend) aborted(id int64) { delete(b.taken, id) }
