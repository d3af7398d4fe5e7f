package state

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/weirproject/weir/internal/blob"
	"github.com/weirproject/weir/internal/keygroup"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// isNative reports whether st is a native (Pebble checkpoint) snapshot.
func isNative(st *weirv1.SubtaskState) bool { return len(st.GetSharedFiles()) > 0 }

// localName is the name a file of a native snapshot had in its store.
func localName(h *weirv1.StateHandle) string {
	name := blob.Base(h.GetPath())
	if h.GetShared() {
		if i := strings.LastIndexByte(name, '_'); i >= 0 {
			name = name[i+1:]
		}
	}
	return name
}

// readNative opens a copy of a native snapshot and calls fn for each entry
// in the key groups owns accepts.
func readNative(r *restorer, log *slog.Logger, st *weirv1.SubtaskState, tmpDir string, owns func(kg int) bool, fn func(e entry) error) error {
	tmp, err := os.MkdirTemp(tmpDir, restoreDirPrefix)
	if err != nil {
		return fmt.Errorf("state: restore: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := r.download(st, tmp); err != nil {
		return err
	}
	h := newHealth(log)
	db, err := openDB(r.fs, tmp, h)
	if err != nil {
		return err
	}
	defer db.Close()
	it, err := db.NewIter(nil)
	if err != nil {
		return fmt.Errorf("state: restore: %w", err)
	}
	for it.First(); it.Valid(); it.Next() {
		kg, e, ok := decodeKey(it.Key())
		if !ok || !owns(kg) {
			continue
		}
		e.value = it.Value()
		if err := fn(e); err != nil {
			it.Close()
			return err
		}
	}
	if err := errors.Join(it.Error(), it.Close(), h.err()); err != nil {
		return fmt.Errorf("state: restore: %w", err)
	}
	return nil
}

// Restore implements Backend. A native snapshot of exactly this subtask's
// key groups is opened in place; anything else is copied, key group by key
// group, into the store.
func (p *Pebble) Restore(prev []*weirv1.SubtaskState, subtask, parallelism int) error {
	r := newRestorer(p.fs)
	kgs := p.cfg.KeyGroups
	if len(prev) > 0 {
		var same *weirv1.SubtaskState
		for _, st := range prev {
			if r := st.GetKeyGroups(); isNative(st) && int(r.GetStart()) == kgs.Start && int(r.GetEnd()) == kgs.End {
				same = st
			}
		}
		if same != nil && len(prev) == 1 || same != nil && allOthersEmpty(prev, same, kgs) {
			if err := p.openRestored(r, same); err != nil {
				return err
			}
			p.confirmRestored(same)
			return restoreOperator(r, p.lists, prev, subtask, parallelism)
		}
	}
	for _, st := range prev {
		if r := st.GetKeyGroups(); r != nil && (int(r.GetEnd()) < kgs.Start || int(r.GetStart()) > kgs.End) {
			continue // owns none of our key groups
		}
		b := p.db.NewBatch()
		var buf []byte
		err := readKeyed(r, p.log, st, p.cfg.MaxParallelism, p.dir, kgs.Contains, func(e entry) error {
			// Set copies key and value into the batch.
			buf = encodeEntry(buf, keygroup.Of(e.key, p.cfg.MaxParallelism), e)
			if err := b.Set(buf, e.value, nil); err != nil {
				return err
			}
			if b.Len() > 4<<20 {
				if err := b.Commit(p.wo); err != nil {
					return err
				}
				b.Reset()
			}
			return nil
		})
		if err == nil {
			err = b.Commit(p.wo)
		}
		b.Close()
		if err == nil {
			err = p.health.err()
		}
		if err != nil {
			return fmt.Errorf("state: restore into pebble: %w", err)
		}
	}
	return restoreOperator(r, p.lists, prev, subtask, parallelism)
}

// allOthersEmpty: the other subtask states hold none of kgs.
func allOthersEmpty(prev []*weirv1.SubtaskState, same *weirv1.SubtaskState, kgs keygroup.Range) bool {
	for _, st := range prev {
		if st == same {
			continue
		}
		r := st.GetKeyGroups()
		if r == nil || !(int(r.GetEnd()) < kgs.Start || int(r.GetStart()) > kgs.End) {
			return false
		}
	}
	return true
}

// confirmRestored lets the first checkpoint after a restore reference the
// restored SST files instead of uploading them again: they belong to a
// completed checkpoint the JobManager retains until a newer one completes.
// Only files in this job's shared directory qualify: those of another
// job's checkpoint (a job started from it) are not this job's to keep
// alive, so they are uploaded again, as Flink's NO_CLAIM restore mode does.
func (p *Pebble) confirmRestored(st *weirv1.SubtaskState) {
	if !p.cfg.Incremental {
		return
	}
	files := map[string]*weirv1.StateHandle{}
	for _, h := range st.GetSharedFiles() {
		if h.GetShared() && blob.Dir(h.GetPath()) == blob.Join(p.cfg.SharedDir) {
			files[localName(h)] = h
		}
	}
	p.mu.Lock()
	p.base = files
	p.mu.Unlock()
}

// openRestored replaces the (empty) store with a copy of st.
func (p *Pebble) openRestored(r *restorer, st *weirv1.SubtaskState) error {
	if err := p.db.Close(); err != nil {
		return fmt.Errorf("state: restore: %w", err)
	}
	p.db = nil
	dbDir := filepath.Join(p.dir, "db")
	if err := p.fs.RemoveAll(dbDir); err != nil {
		return fmt.Errorf("state: restore: %w", err)
	}
	if p.recovery != nil {
		id := p.cfg.RestoredCheckpointID
		r.local = func(h *weirv1.StateHandle) (string, bool) { return p.recovery.find(id, h) }
	}
	if err := r.download(st, dbDir); err != nil {
		return err
	}
	if r.localBytes > 0 {
		p.log.Info("restored from the local copy", "checkpoint_id", p.cfg.RestoredCheckpointID,
			"local_bytes", r.localBytes, "downloaded_bytes", r.remoteBytes)
	}
	db, err := openDB(p.fs, dbDir, p.health)
	if err != nil {
		return err
	}
	p.db = db
	return nil
}
