package state

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// TakeSnapshot implements Backend. A canonical snapshot is a Pebble
// snapshot, a sequence number. A native one first flushes the memtable, as
// Flink's RocksDB backend does, so that all state is in immutable SST files:
// the store keeps no WAL, so until flushed the memtable is in no file. The
// flush writes at most one memtable (MemTableSize) and the write-back
// cache's dirty entries before it at most its budget, which bound the
// mailbox's synchronous part; the checkpoint itself hard-links the SST
// files. A failed store fails the snapshot with a *StoreError.
func (p *Pebble) TakeSnapshot(opts SnapshotOptions) (StateSnapshot, error) {
	if err := p.health.err(); err != nil {
		return nil, &StoreError{Err: err}
	}
	var err error
	func() {
		defer storeErrorAs(&err)
		p.writeBack()
	}()
	if err != nil {
		return nil, err
	}
	lists := p.lists.copy()
	if opts.Canonical || !p.cfg.Incremental {
		var snap *pebble.Snapshot
		if err := p.guard("snapshot", func() error { snap = p.db.NewSnapshot(); return nil }); err != nil {
			return nil, err
		}
		return &pebbleCanonical{p: p, snap: snap, lists: lists}, nil
	}
	if err := p.guard("flush", p.flush); err != nil {
		return nil, fmt.Errorf("state: checkpoint %d: %w", opts.CheckpointID, err)
	}
	p.seq++
	local := filepath.Join(p.dir, fmt.Sprintf("chk-%d-%d", opts.CheckpointID, p.seq))
	if err := p.db.Checkpoint(local); err != nil {
		p.fs.RemoveAll(local)
		// The store itself is fine unless it says otherwise: the
		// checkpoint is declined, the subtask goes on.
		err = fmt.Errorf("state: pebble checkpoint %d: %w", opts.CheckpointID, err)
		if ferr := p.health.err(); ferr != nil {
			return nil, &StoreError{Err: errors.Join(err, ferr)}
		}
		return nil, err
	}
	var reuse map[string]*weirv1.StateHandle
	p.mu.Lock()
	if !opts.Full {
		reuse = p.reusableLocked()
	}
	p.taken[opts.CheckpointID] = &takenSnapshot{reuse: reuse}
	p.mu.Unlock()
	return &pebbleNative{p: p, id: opts.CheckpointID, local: local, reuse: reuse, lists: lists}, nil
}

// flush writes the memtable into SST files and waits until it is, or until
// the store fails. Pebble retries a failed flush at once and without end
// (a full disk, say), and its Flush waits for success: the subtask would
// hang in its checkpoint, the store would never be closed, and its flush
// loop would fill the disk again with orphaned files as soon as space
// returned. Failing the snapshot fails the subtask, whose Close stops the
// loop.
func (p *Pebble) flush() error {
	done, err := p.db.AsyncFlush()
	if err != nil {
		return err
	}
	select {
	case <-done:
		return nil
	case <-p.health.failed:
		return p.health.err()
	}
}

type pebbleCanonical struct {
	p     *Pebble
	snap  *pebble.Snapshot
	lists map[string]listState
}

func (s *pebbleCanonical) Release() {
	if s.snap != nil {
		s.snap.Close()
		s.snap = nil
	}
}

func (s *pebbleCanonical) Write(dir, vertex string, subtask, parallelism int) (*weirv1.SubtaskState, error) {
	defer s.Release()
	kgs := s.p.cfg.KeyGroups
	st := &weirv1.SubtaskState{
		Vertex: vertex, SubtaskIndex: int32(subtask), Parallelism: int32(parallelism),
		KeyGroups: &weirv1.KeyGroupRange{Start: int32(kgs.Start), End: int32(kgs.End)},
	}
	out := &weirv1.KeyedStateSnapshot{MaxParallelism: int32(s.p.cfg.MaxParallelism)}
	it, err := s.snap.NewIter(nil)
	if err != nil {
		return nil, fmt.Errorf("state: pebble iterate: %w", err)
	}
	var g *weirv1.KeyGroupSnapshot
	for it.First(); it.Valid(); it.Next() {
		kg, e, ok := decodeKey(it.Key())
		if !ok {
			continue
		}
		if g == nil || int(g.KeyGroup) != kg {
			g = &weirv1.KeyGroupSnapshot{KeyGroup: int32(kg)}
			out.KeyGroups = append(out.KeyGroups, g)
		}
		g.Entries = append(g.Entries, &weirv1.KeyedStateEntry{
			Kind: e.kind, State: e.state, Key: bytes.Clone(e.key), UserKey: bytes.Clone(e.userKey), Value: bytes.Clone(it.Value()),
		})
	}
	if err := errors.Join(it.Error(), it.Close(), s.p.health.err()); err != nil {
		return nil, fmt.Errorf("state: pebble iterate: %w", err)
	}
	// Entries are in (state, key) order within a group, as the heap writes them.
	prefix := filePrefix(dir, vertex, subtask)
	if len(out.KeyGroups) > 0 {
		h, err := s.p.files.WriteHandle(prefix+".keyed", out, s.p.cfg.InlineThreshold)
		if err != nil {
			return nil, fmt.Errorf("state: write keyed state: %w", err)
		}
		st.KeyedState = h
		st.StateSize, st.CheckpointedSize = h.GetSize(), h.GetSize()
	}
	if err := writeOperator(s.p.files, st, prefix, s.lists, s.p.cfg.InlineThreshold); err != nil {
		return nil, err
	}
	return st, nil
}
