package state

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/weirproject/weir/internal/blob"
	"github.com/weirproject/weir/internal/checkpoint"
	"github.com/weirproject/weir/internal/fault"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// reusableLocked are the files of base a snapshot taken now may reference:
// those every snapshot taken since base references too. Whichever of them
// completes and subsumes base keeps those files alive, until this one
// completes or, failing, leaves base the newest completed checkpoint. A
// completion notification that comes after the next snapshot was taken
// thus makes that snapshot upload the files again; one that came in time
// leaves nothing taken since base, and everything of base is reused.
// (Canonical snapshots are not counted: only a synchronous savepoint
// subsumes checkpoints, and the subtask finishes once it completed.)
func (p *Pebble) reusableLocked() map[string]*weirv1.StateHandle {
	out := make(map[string]*weirv1.StateHandle, len(p.base))
	for name, h := range p.base {
		kept := true
		for _, t := range p.taken {
			if r, ok := t.reuse[name]; !ok || r.GetPath() != h.GetPath() {
				kept = false
				break
			}
		}
		if kept {
			out[name] = h
		}
	}
	return out
}

// NotifyCheckpointComplete implements Backend: checkpoint id becomes the
// base of the next snapshots. Notifications may come late and out of
// order; an older one than the base is stale.
func (p *Pebble) NotifyCheckpointComplete(id int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if id <= p.baseID {
		return
	}
	if t, ok := p.taken[id]; ok && t.written {
		p.base = t.refs
	} else {
		// Not a snapshot of this backend's (a synchronous savepoint): it
		// may have subsumed base, whose files are then no longer safe.
		p.base = nil
	}
	p.baseID = id
	for c := range p.taken {
		if c <= id {
			delete(p.taken, c)
		}
	}
	p.recovery.confirm(id)
}

// NotifyCheckpointAborted implements Backend: checkpoint id will never
// subsume base.
func (p *Pebble) NotifyCheckpointAborted(id int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.taken, id)
	p.recovery.abort(id)
}

type pebbleNative struct {
	p     *Pebble
	id    int64
	local string
	reuse map[string]*weirv1.StateHandle
	lists map[string]listState
}

func (s *pebbleNative) Release() {
	if s.local != "" {
		s.p.fs.RemoveAll(s.local)
	}
}

// isImmutable: SST and blob files never change once written, so they are
// uploaded once and shared; the manifest, options and markers are
// exclusive to a checkpoint.
func isImmutable(name string) bool {
	return strings.HasSuffix(name, ".sst") || strings.HasSuffix(name, ".blob")
}

// isWAL: the store writes no WAL (openDB), and the snapshot flushed the
// memtable, so a log file a Pebble checkpoint holds has nothing the SSTs
// lack.
func isWAL(name string) bool { return strings.HasSuffix(name, ".log") }

func (s *pebbleNative) Write(dir, vertex string, subtask, parallelism int) (_ *weirv1.SubtaskState, err error) {
	defer s.Release()
	// The files this write adds to the shared directory: nothing will
	// reference them if it fails, and the shared directory is swept only
	// when the whole job restarts, so they go now.
	var uploaded []string
	defer func() {
		if err == nil {
			return
		}
		for _, loc := range uploaded {
			if derr := s.p.files.Delete(loc); derr != nil {
				err = errors.Join(err, fmt.Errorf("state: remove %s of the failed upload: %w", loc, derr))
			}
		}
	}()
	kgs := s.p.cfg.KeyGroups
	st := &weirv1.SubtaskState{
		Vertex: vertex, SubtaskIndex: int32(subtask), Parallelism: int32(parallelism),
		KeyGroups: &weirv1.KeyGroupRange{Start: int32(kgs.Start), End: int32(kgs.End)},
	}
	fs := s.p.fs
	names, err := fs.List(s.local)
	if err != nil {
		return nil, fmt.Errorf("state: read pebble checkpoint: %w", err)
	}
	sort.Strings(names)
	prefix := filePrefix(dir, vertex, subtask)
	exclusive := prefix + ".pebble"
	// Mkdir, not MkdirAll: a checkpoint directory removed by an abort
	// must not come back.
	if err := s.p.files.Mkdir(exclusive); err != nil {
		return nil, fmt.Errorf("state: write pebble checkpoint: %w", err)
	}
	if err := s.p.files.MkdirAll(s.p.cfg.SharedDir); err != nil {
		return nil, fmt.Errorf("state: write pebble checkpoint: %w", err)
	}
	referenced := map[string]*weirv1.StateHandle{}
	for _, name := range names {
		src := filepath.Join(s.local, name)
		if fi, err := fs.Stat(src); err != nil {
			return nil, fmt.Errorf("state: read pebble checkpoint: %w", err)
		} else if fi.IsDir() || isWAL(name) {
			continue
		}
		if isImmutable(name) {
			if h, ok := s.reuse[name]; ok {
				referenced[name] = h
				st.SharedFiles = append(st.SharedFiles, h)
				st.StateSize += h.GetSize()
				continue
			}
			// Named after the store and the checkpoint that uploads it: two
			// in-flight checkpoints never share an upload, so aborting one
			// cannot delete the other's file.
			if err := fault.Point(fault.IncrementalUpload); err != nil {
				return nil, fmt.Errorf("state: upload %s: %w", name, err)
			}
			dst := blob.Join(s.p.cfg.SharedDir, checkpoint.SharedFileName(s.p.uid, s.id, name))
			uploaded = append(uploaded, dst) // a partial upload is removed too
			n, err := s.p.files.Upload(src, dst)
			if err != nil {
				return nil, fmt.Errorf("state: upload %s: %w", name, err)
			}
			h := &weirv1.StateHandle{Path: dst, Size: n, Shared: true}
			referenced[name] = h
			st.SharedFiles = append(st.SharedFiles, h)
			st.StateSize += n
			st.CheckpointedSize += n
			continue
		}
		dst := blob.Join(exclusive, name)
		n, err := s.p.files.Upload(src, dst)
		if err != nil {
			return nil, fmt.Errorf("state: write %s: %w", name, err)
		}
		st.SharedFiles = append(st.SharedFiles, &weirv1.StateHandle{Path: dst, Size: n})
		st.StateSize += n
		st.CheckpointedSize += n
	}
	if err := writeOperator(s.p.files, st, prefix, s.lists, s.p.cfg.InlineThreshold); err != nil {
		return nil, err
	}
	s.p.mu.Lock()
	if t, ok := s.p.taken[s.id]; ok { // not aborted or subsumed meanwhile
		t.refs, t.written = referenced, true
		// Kept under the lock: a notification about s.id, which drops
		// the copy of an aborted or subsumed checkpoint, comes after.
		if s.p.recovery.keep(s.id, s.local) {
			s.local = ""
		}
	}
	s.p.mu.Unlock()
	return st, nil
}
