package state

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"

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
	db, err := openSnapshot(r.fs, tmp, h)
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

// Restore implements Backend. The native snapshot holding most of this
// subtask's key groups is opened in place (from the local copy, if this
// TaskManager has it) and clipped to them: after a failover that is the
// subtask's own snapshot, after a rescale the one of the subtask whose key
// groups it takes over. Only the other states' entries in these key
// groups are copied in, as Flink's RocksDB backend rescales.
func (p *Pebble) Restore(prev []*weirv1.SubtaskState, subtask, parallelism int) error {
	// The store changes underneath the cache.
	p.dropCache()
	r := newRestorer(p.fs)
	kgs := p.cfg.KeyGroups
	base := largestOverlap(prev, kgs)
	if base != nil {
		if err := p.openRestored(r, base); err != nil {
			return err
		}
		if err := p.clip(base); err != nil {
			return err
		}
		p.confirmRestored(base)
	}
	for _, st := range prev {
		if st == base || overlap(st.GetKeyGroups(), kgs) == 0 && st.GetKeyGroups() != nil {
			continue // restored already, or owns none of our key groups
		}
		r.local = p.localCopy(st)
		if isNative(st) {
			if err := p.ingestNative(r, st); err != nil {
				return err
			}
			continue
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
	switch {
	case r.localBytes > 0:
		p.log.Info("restored from the local copy", "checkpoint_id", p.cfg.RestoredCheckpointID,
			"local_bytes", r.localBytes, "downloaded_bytes", r.remoteBytes)
	case r.remoteBytes > 0:
		p.log.Info("restored from checkpoint storage", "checkpoint_id", p.cfg.RestoredCheckpointID,
			"downloaded_bytes", r.remoteBytes)
	}
	return restoreOperator(r, p.lists, prev, subtask, parallelism)
}

// localCopy finds the files of st, a snapshot of the restored checkpoint,
// in this TaskManager's local copy of it, if it keeps one; nil without
// local recovery.
func (p *Pebble) localCopy(st *weirv1.SubtaskState) func(*weirv1.StateHandle) (string, bool) {
	if p.recovery == nil {
		return nil
	}
	id, l := p.cfg.RestoredCheckpointID, p.recovery.of(st.GetVertex(), st.GetSubtaskIndex())
	return func(h *weirv1.StateHandle) (string, bool) { return l.find(id, h) }
}

// ingestNative copies what native snapshot st holds in this subtask's
// key groups into the store: its keys as they are (the TTL index with
// them), written as new SST files that the store ingests whole. They
// overlap nothing it holds (st's key groups are no other state's), so
// they go to the bottom level with no memtable, flush or compaction on
// the way: a scale-in's merge costs one pass over the data it moves.
func (p *Pebble) ingestNative(r *restorer, st *weirv1.SubtaskState) error {
	tmp, err := os.MkdirTemp(p.dir, restoreDirPrefix)
	if err != nil {
		return fmt.Errorf("state: restore: %w", err)
	}
	defer os.RemoveAll(tmp)
	dbDir := filepath.Join(tmp, "db")
	if err := r.download(st, dbDir); err != nil {
		return err
	}
	h := newHealth(p.log)
	src, err := openSnapshot(r.fs, dbDir, h)
	if err != nil {
		return err
	}
	defer src.Close()
	kgs := p.cfg.KeyGroups
	it, err := src.NewIter(&pebble.IterOptions{LowerBound: kgPrefix(kgs.Start), UpperBound: kgPrefix(kgs.End + 1)})
	if err != nil {
		return fmt.Errorf("state: restore: %w", err)
	}
	var files []string
	var w *sstable.Writer
	var size int // what w holds, uncompressed
	finish := func() error {
		if w == nil {
			return nil
		}
		err := w.Close()
		w = nil
		return err
	}
	wo := sstableOptions(p.db)
	for valid := it.First(); valid && err == nil; valid = it.Next() {
		if w != nil && size >= ingestFileSize {
			err = finish()
		}
		if err == nil && w == nil {
			var f vfs.File
			name := filepath.Join(tmp, fmt.Sprintf("ingest-%06d.sst", len(files)))
			if f, err = r.fs.Create(name, vfs.WriteCategoryUnspecified); err == nil {
				files = append(files, name)
				w, size = sstable.NewWriter(&unsyncedWritable{f: f, w: bufio.NewWriterSize(f, 1<<20)}, wo), 0
			}
		}
		if err == nil {
			err = w.Set(it.Key(), it.Value())
			size += len(it.Key()) + len(it.Value())
		}
	}
	err = errors.Join(err, it.Error(), it.Close(), finish(), h.err())
	if err == nil && len(files) > 0 {
		err = p.db.Ingest(context.Background(), files)
	}
	if err != nil {
		return fmt.Errorf("state: restore into pebble: ingest %s subtask %d: %w", st.GetVertex(), st.GetSubtaskIndex(), err)
	}
	return p.health.err()
}

// unsyncedWritable writes a file to ingest without syncing it: the store
// keeps no WAL and nothing it holds needs to survive a crash of the
// TaskManager, which restores from checkpoints. Its files may be read
// again from local recovery copies, but only by the running TaskManager:
// one that starts removes every copy (CleanLocalDir).
type unsyncedWritable struct {
	f vfs.File
	w *bufio.Writer
}

func (u *unsyncedWritable) Write(p []byte) error {
	_, err := u.w.Write(p)
	return err
}

func (u *unsyncedWritable) Finish() error { return errors.Join(u.w.Flush(), u.f.Close()) }

func (u *unsyncedWritable) Abort() { u.f.Close() }

// ingestFileSize bounds the files ingestNative writes, as compactions
// bound theirs.
const ingestFileSize = 64 << 20

// sstableOptions are what files to ingest into db are written with: its
// newest table format, default compression, and blocks of 32 KiB rather
// than 4: an eighth of the writes (`make bench BENCH=RS`, 1 GiB: a
// 4 → 2 rescale took 1.4 s with them, 2.0 s with 4 KiB blocks); point
// reads of these files decode larger blocks until compactions rewrite
// them.
func sstableOptions(db *pebble.DB) sstable.WriterOptions {
	o := &pebble.Options{}
	o.EnsureDefaults()
	wo := o.MakeWriterOptions(numLevels-1, db.FormatMajorVersion().MaxTableFormat())
	wo.BlockSize = 32 << 10
	return wo
}

// numLevels is Pebble's LSM depth: ingested files that overlap nothing
// land in the last level.
const numLevels = 7

// largestOverlap is the native snapshot among prev holding most of kgs,
// nil if none holds any.
func largestOverlap(prev []*weirv1.SubtaskState, kgs keygroup.Range) *weirv1.SubtaskState {
	var best *weirv1.SubtaskState
	most := 0
	for _, st := range prev {
		if n := overlap(st.GetKeyGroups(), kgs); isNative(st) && n > most {
			best, most = st, n
		}
	}
	return best
}

// overlap is how many of kgs r holds.
func overlap(r *weirv1.KeyGroupRange, kgs keygroup.Range) int {
	if r == nil {
		return 0
	}
	return kgs.Overlap(keygroup.Range{Start: int(r.GetStart()), End: int(r.GetEnd())})
}

// clip removes what the store opened from st holds outside this
// subtask's key groups by excising it: the files that straddle the cut
// become virtual files over the part kept, sharing the file on disk, so
// nothing is rewritten now and no compaction must rewrite it later (range
// deletions would make compactions rewrite, and the next checkpoint
// upload, the whole store). Left in, a later restore that takes this
// subtask's snapshot as its base would see key groups another subtask
// owns now.
func (p *Pebble) clip(st *weirv1.SubtaskState) error {
	kgs, r := p.cfg.KeyGroups, st.GetKeyGroups()
	var spans [][2][]byte
	if int(r.GetStart()) < kgs.Start {
		spans = append(spans, [2][]byte{kgPrefix(int(r.GetStart())), kgPrefix(kgs.Start)})
	}
	if int(r.GetEnd()) > kgs.End {
		spans = append(spans, [2][]byte{kgPrefix(kgs.End + 1), kgPrefix(int(r.GetEnd()) + 1)})
	}
	for _, s := range spans {
		if err := p.db.Excise(context.Background(), pebble.KeyRange{Start: s[0], End: s[1]}); err != nil {
			return fmt.Errorf("state: restore: clip to key groups %d-%d: %w", kgs.Start, kgs.End, err)
		}
	}
	return p.health.err()
}

// kgPrefix is the first store key of key group kg, and the end of kg-1's
// (key groups are fewer than 1<<15, so kg+1 has two bytes too).
func kgPrefix(kg int) []byte {
	return binary.BigEndian.AppendUint16(nil, uint16(kg))
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
	r.local = p.localCopy(st)
	if err := r.download(st, dbDir); err != nil {
		return err
	}
	db, err := openDB(p.fs, dbDir, p.health)
	if err != nil {
		return err
	}
	p.db = db
	return nil
}
