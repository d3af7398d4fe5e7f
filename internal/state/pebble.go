package state

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weirproject/weir/internal/blob"
	"github.com/weirproject/weir/internal/fault"
	"github.com/weirproject/weir/internal/keygroup"
	"github.com/weirproject/weir/internal/storage"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// Pebble keeps keyed state in an embedded Pebble store on local disk, one
// per subtask. A value-state key is the key group (2 bytes, big endian),
// the state name's length (2 bytes) and name, then the record key, so the
// entries of a key-group range are one contiguous span. A map-state key
// sets the top bit of the name length and puts the record key's length (4
// bytes) before it and the user key after it, so one record key's map is a
// contiguous span ordered by user key. Operator list state stays in
// memory, as with the heap backend.
//
// Checkpoints are either canonical (a Pebble snapshot streamed into the
// backend-independent KeyedStateSnapshot format; savepoints always are) or,
// with Incremental, native: a Pebble checkpoint whose immutable SST files
// are uploaded once to the job's shared directory and referenced by every
// later checkpoint that still contains them.
type Pebble struct {
	cfg   Config
	fs    vfs.FS
	files storage.Files
	log   *slog.Logger
	dir   string // the local directory holding db/ and checkpoint staging
	db    *pebble.DB
	uid   string // names this store's files in shared storage
	seq   int
	wo    *pebble.WriteOptions
	kg    int
	key   []byte
	buf   []byte
	lists operatorLists
	// health is the store's first failure, if any.
	health *health
	// poisoned: Pebble panicked in a call, possibly holding its own
	// locks; Close then leaves the store alone instead of waiting on them.
	poisoned bool
	// recovery keeps local copies of snapshots (nil: off).
	recovery *localRecovery

	mu sync.Mutex
	// baseID is the newest completed checkpoint the backend was told of;
	// base are the shared files it references, by local file name. They
	// stay in shared storage until a newer checkpoint completes and
	// subsumes it, so a checkpoint taken now may reference them instead
	// of uploading.
	baseID int64
	base   map[string]*weirv1.StateHandle
	// taken are the incremental snapshots taken after base, by checkpoint
	// ID, until the backend learns their fate. Each may have completed
	// already, its notification not yet arrived, and subsumed base: of
	// base's files, only those every one of them references are sure to
	// outlive them.
	taken map[int64]*takenSnapshot
}

// takenSnapshot is an incremental snapshot whose completion the backend
// has not learnt yet.
type takenSnapshot struct {
	// reuse are the files of base it may reference, fixed when it was
	// taken; it uploads every other file again.
	reuse map[string]*weirv1.StateHandle
	// refs are all the shared files it references, once written.
	refs    map[string]*weirv1.StateHandle
	written bool
}

var _ Backend = (*Pebble)(nil)

// OpenPebble opens an empty store in a fresh directory under cfg.LocalDir.
func OpenPebble(cfg Config) (*Pebble, error) {
	if cfg.Incremental && cfg.SharedDir == "" {
		return nil, errors.New("state: incremental checkpoints need a shared directory")
	}
	base := cfg.LocalDir
	if base == "" {
		base = os.TempDir()
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return nil, fmt.Errorf("state: pebble local dir: %w", err)
	}
	dir, err := os.MkdirTemp(base, pebbleDirPrefix)
	if err != nil {
		return nil, fmt.Errorf("state: pebble local dir: %w", err)
	}
	fs, log := cfg.FS, cfg.Logger
	if fs == nil {
		fs = vfs.Default
	}
	if log == nil {
		log = slog.Default()
	}
	h := &health{log: log}
	db, err := openDB(fs, filepath.Join(dir, "db"), h)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	var uid [8]byte
	rand.Read(uid[:])
	p := &Pebble{
		cfg: cfg, fs: fs, files: storage.Files{FS: fs}, log: log, health: h,
		dir: dir, db: db, uid: hex.EncodeToString(uid[:]), wo: pebble.NoSync,
		lists: operatorLists{}, taken: map[int64]*takenSnapshot{},
	}
	if cfg.LocalRecoveryDir != "" && cfg.Incremental {
		p.recovery = &localRecovery{dir: cfg.LocalRecoveryDir}
	}
	return p, nil
}

// openDB opens a store whose failures h records. The store keeps no WAL,
// as Flink's RocksDB backend does not: state is restored from checkpoints
// only, never from local files, and an incremental snapshot flushes the
// memtable first. (A failed WAL write would also make Pebble panic while
// it holds its commit lock.)
func openDB(fs vfs.FS, dir string, h *health) (*pebble.DB, error) {
	db, err := pebble.Open(dir, &pebble.Options{
		FS: fs, DisableWAL: true, MemTableSize: 8 << 20,
		Logger:        pebbleLogger{h},
		EventListener: &pebble.EventListener{BackgroundError: h.background},
	})
	if err != nil {
		return nil, fmt.Errorf("state: open pebble %s: %w", dir, err)
	}
	return db, nil
}

// health records the first failure of a store: a disk error of a flush or
// compaction in the background, or one Pebble deems fatal. The store is
// not used after it (RocksDB stops writes after a background error too):
// the next state access fails the subtask.
type health struct {
	log     *slog.Logger
	failure atomic.Pointer[error]
}

func (h *health) fail(err error) {
	if h.failure.CompareAndSwap(nil, &err) {
		h.log.Error("state backend failed", "err", err)
	}
}

// err is the store's failure, nil while it is healthy.
func (h *health) err() error {
	if f := h.failure.Load(); f != nil {
		return *f
	}
	return nil
}

func (h *health) background(err error) {
	h.fail(fmt.Errorf("state: pebble background error: %w", err))
}

// pebbleLogger drops Pebble's informational lines. Fatalf does not panic,
// which would kill the process when Pebble calls it from a background
// goroutine: the store is marked failed, and Pebble returns the error it
// reported.
type pebbleLogger struct{ h *health }

func (pebbleLogger) Infof(string, ...any) {}

func (l pebbleLogger) Errorf(format string, args ...any) {
	l.h.log.Warn("pebble: " + fmt.Sprintf(format, args...))
}

func (l pebbleLogger) Fatalf(format string, args ...any) {
	err := &fatalError{msg: "state: pebble: " + fmt.Sprintf(format, args...)}
	for _, a := range args {
		if e, ok := a.(error); ok {
			err.errs = append(err.errs, e)
		}
	}
	l.h.fail(err)
}

// fatalError is what Pebble reported fatal; it wraps the errors it named.
type fatalError struct {
	msg  string
	errs []error
}

func (e *fatalError) Error() string   { return e.msg }
func (e *fatalError) Unwrap() []error { return e.errs }

// Dir is the store's local directory (tests).
func (p *Pebble) Dir() string { return p.dir }

// Close closes the store and removes its local files.
func (p *Pebble) Close() error {
	var err error
	switch {
	case p.db == nil:
	case p.poisoned:
		// Closing would wait for the locks Pebble held when it panicked.
		p.log.Warn("state backend not closed: it failed inside the store, whose goroutines stay")
	default:
		err = p.db.Close()
	}
	p.db = nil
	return errors.Join(err, os.RemoveAll(p.dir))
}

// usable panics with the store's failure, if any: nothing more is read
// from or written to a failed store.
func (p *Pebble) usable() {
	if err := p.health.err(); err != nil {
		panic(&StoreError{Err: err})
	}
}

// must panics with a StoreError if op failed, or if the store failed
// meanwhile (Pebble reports some failures only to its logger).
func (p *Pebble) must(op string, err error) {
	if err != nil {
		err = fmt.Errorf("state: pebble %s: %w", op, err)
		p.health.fail(err)
		panic(&StoreError{Err: err})
	}
	p.usable()
}

// catch, deferred around a call into Pebble, turns a panic of Pebble's
// into the store's failure. It is never deferred around operator code.
func (p *Pebble) catch(op string) {
	r := recover()
	if r == nil {
		return
	}
	if se, ok := r.(*StoreError); ok {
		panic(se)
	}
	err, ok := r.(error)
	if !ok {
		err = fmt.Errorf("%v", r)
	}
	err = fmt.Errorf("state: pebble %s panicked: %w", op, err)
	p.log.Error("pebble panicked", "op", op, "err", err, "stack", string(debug.Stack()))
	p.poisoned = true
	p.health.fail(err)
	panic(&StoreError{Err: err})
}

func (p *Pebble) set(k, v []byte) {
	p.usable()
	defer p.catch("set")
	p.must("set", p.db.Set(k, v, p.wo))
}

func (p *Pebble) del(k []byte) {
	p.usable()
	defer p.catch("delete")
	p.must("delete", p.db.Delete(k, p.wo))
}

// iter opens an iterator over the store.
func (p *Pebble) iter(opts *pebble.IterOptions) *pebble.Iterator {
	p.usable()
	defer p.catch("iterate")
	it, err := p.db.NewIter(opts)
	p.must("iterate", err)
	return it
}

// closeIter closes an iterator, failing on its error.
func (p *Pebble) closeIter(it *pebble.Iterator) {
	defer p.catch("iterate")
	p.must("iterate", errors.Join(it.Error(), it.Close()))
}

// SetCurrentKey implements Backend.
func (p *Pebble) SetCurrentKey(key []byte) {
	p.key = append(p.key[:0], key...)
	p.kg = keygroup.Of(key, p.cfg.MaxParallelism)
}

// ValueState implements Backend.
func (p *Pebble) ValueState(name string) sdk.ValueState {
	checkName(name)
	return &pebbleValue{p: p, name: name}
}

// MapState implements Backend.
func (p *Pebble) MapState(name string) sdk.MapState {
	checkName(name)
	return &pebbleMap{p: p, name: name}
}

// ReducingState implements Backend.
func (p *Pebble) ReducingState(name string, reduce func(acc, v []byte) []byte) sdk.ReducingState {
	// Value already returns a copy reduce may change.
	return &reducingState{v: p.ValueState(name), reduce: reduce}
}

// checkName: the key encoding keeps the name's length in 15 bits.
func checkName(name string) {
	if len(name) > maxNameLen {
		panic(fmt.Sprintf("state: state name of %d bytes; at most %d", len(name), maxNameLen))
	}
}

// ListState implements Backend.
func (p *Pebble) ListState(name string, union bool) sdk.ListState { return p.lists.get(name, union) }

const (
	maxNameLen = 1<<15 - 1
	mapFlag    = 1 << 15 // in the name length: a map-state key
)

func encodeKey(dst []byte, kg int, name string, key []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst[:0], uint16(kg))
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(name)))
	dst = append(dst, name...)
	return append(dst, key...)
}

// encodeMapName is the start of every entry of the named map state in key
// group kg, of every record key.
func encodeMapName(dst []byte, kg int, name string) []byte {
	dst = binary.BigEndian.AppendUint16(dst[:0], uint16(kg))
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(name))|mapFlag)
	return append(dst, name...)
}

// encodeMapPrefix is the start of every entry of key's map.
func encodeMapPrefix(dst []byte, kg int, name string, key []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst[:0], uint16(kg))
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(name))|mapFlag)
	dst = append(dst, name...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(key)))
	return append(dst, key...)
}

func encodeMapKey(dst []byte, kg int, name string, key, userKey []byte) []byte {
	return append(encodeMapPrefix(dst, kg, name, key), userKey...)
}

// encodeEntry is the store key of e.
func encodeEntry(dst []byte, kg int, e entry) []byte {
	if e.kind == weirv1.KeyedStateEntry_KIND_MAP {
		return encodeMapKey(dst, kg, e.state, e.key, e.userKey)
	}
	return encodeKey(dst, kg, e.state, e.key)
}

// prefixEnd is the smallest key greater than every key starting with
// prefix; a key-group prefix never is all 0xff.
func prefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// decodeKey splits a store key; e's slices alias k.
func decodeKey(k []byte) (kg int, e entry, ok bool) {
	if len(k) < 4 {
		return 0, entry{}, false
	}
	n := int(binary.BigEndian.Uint16(k[2:4]))
	isMap := n&mapFlag != 0
	n &^= mapFlag
	if len(k) < 4+n {
		return 0, entry{}, false
	}
	kg, e.state, k = int(binary.BigEndian.Uint16(k[:2])), string(k[4:4+n]), k[4+n:]
	if !isMap {
		e.key = k
		return kg, e, true
	}
	if len(k) < 4 {
		return 0, entry{}, false
	}
	kl := int(binary.BigEndian.Uint32(k[:4]))
	if len(k) < 4+kl {
		return 0, entry{}, false
	}
	e.kind, e.key, e.userKey = weirv1.KeyedStateEntry_KIND_MAP, k[4:4+kl], k[4+kl:]
	return kg, e, true
}

type pebbleValue struct {
	p    *Pebble
	name string
}

func (v *pebbleValue) k() []byte {
	v.p.buf = encodeKey(v.p.buf, v.p.kg, v.name, v.p.key)
	return v.p.buf
}

func (v *pebbleValue) Value() ([]byte, bool) { return v.p.get(v.k()) }

// get reads a store key; the value is the caller's.
func (p *Pebble) get(k []byte) ([]byte, bool) {
	p.usable()
	defer p.catch("get")
	b, closer, err := p.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		p.usable()
		return nil, false
	}
	p.must("get", err)
	out := bytes.Clone(b)
	closer.Close()
	if out == nil {
		out = []byte{}
	}
	return out, true
}

func (v *pebbleValue) Update(b []byte) { v.p.set(v.k(), b) }

func (v *pebbleValue) Clear() { v.p.del(v.k()) }

// TakeSnapshot implements Backend. A canonical snapshot is a Pebble
// snapshot, a sequence number. A native one first flushes the memtable, as
// Flink's RocksDB backend does, so that all state is in immutable SST files:
// the store keeps no WAL, so until flushed the memtable is in no file. The
// flush writes at most one memtable (MemTableSize), which bounds the
// mailbox's synchronous part; the checkpoint itself hard-links the SST
// files. A failed store fails the snapshot with a *StoreError.
func (p *Pebble) TakeSnapshot(opts SnapshotOptions) (StateSnapshot, error) {
	if err := p.health.err(); err != nil {
		return nil, &StoreError{Err: err}
	}
	lists := p.lists.copy()
	if opts.Canonical || !p.cfg.Incremental {
		var snap *pebble.Snapshot
		if err := p.guard("snapshot", func() error { snap = p.db.NewSnapshot(); return nil }); err != nil {
			return nil, err
		}
		return &pebbleCanonical{p: p, snap: snap, lists: lists}, nil
	}
	if err := p.guard("flush", p.db.Flush); err != nil {
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

// guard runs f, a call into the store off the state accessors' path. An
// error of f, a panic of Pebble's, or a failure Pebble reported meanwhile
// fails the store and comes back as a *StoreError.
func (p *Pebble) guard(op string, f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			p.poisoned = true
			p.log.Error("pebble panicked", "op", op, "panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("state: pebble %s panicked: %v", op, r)
		}
		if err == nil {
			err = p.health.err()
		}
		if err != nil {
			p.health.fail(err)
			err = &StoreError{Err: err}
		}
	}()
	if err := f(); err != nil {
		return fmt.Errorf("state: pebble %s: %w", op, err)
	}
	return nil
}

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

func (s *pebbleNative) Write(dir, vertex string, subtask, parallelism int) (*weirv1.SubtaskState, error) {
	defer s.Release()
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
			dst := blob.Join(s.p.cfg.SharedDir, sharedFileName(s.p.uid, s.id, name))
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

// sharedFileName names an upload to the shared directory:
// <store uid>_<checkpoint id>_<local name>.
func sharedFileName(uid string, id int64, local string) string {
	return fmt.Sprintf("%s_%d_%s", uid, id, local)
}

// SharedFileCheckpoint is the checkpoint that uploaded a file of the
// shared directory, by the file's name (a partial upload's too).
func SharedFileCheckpoint(name string) (int64, bool) {
	parts := strings.SplitN(name, "_", 3)
	if len(parts) != 3 {
		return 0, false
	}
	id, err := strconv.ParseInt(parts[1], 10, 64)
	return id, err == nil
}

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
	h := &health{log: log}
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

// sortedNames lists a directory's file names, sorted (tests).
func sortedNames(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

type pebbleMap struct {
	p    *Pebble
	name string
}

func (m *pebbleMap) k(userKey []byte) []byte {
	m.p.buf = encodeMapKey(m.p.buf, m.p.kg, m.name, m.p.key, userKey)
	return m.p.buf
}

func (m *pebbleMap) Get(userKey []byte) ([]byte, bool) { return m.p.get(m.k(userKey)) }

func (m *pebbleMap) Contains(userKey []byte) bool {
	_, ok := m.Get(userKey)
	return ok
}

func (m *pebbleMap) Put(userKey, value []byte) { m.p.set(m.k(userKey), value) }

func (m *pebbleMap) Remove(userKey []byte) { m.p.del(m.k(userKey)) }

func (m *pebbleMap) bounds() *pebble.IterOptions {
	lower := encodeMapPrefix(nil, m.p.kg, m.name, m.p.key)
	return &pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)}
}

func (m *pebbleMap) IsEmpty() bool {
	it := m.p.iter(m.bounds())
	empty := !it.First()
	m.p.closeIter(it)
	return empty
}

// All implements sdk.MapState: a Pebble iterator reads the store as it
// was when it was opened, so writes during the loop are not seen. The key
// is the one current when All was called.
func (m *pebbleMap) All() iter.Seq2[[]byte, []byte] {
	bounds := m.bounds()
	n := len(bounds.LowerBound)
	return func(yield func([]byte, []byte) bool) {
		it := m.p.iter(bounds)
		defer m.p.closeIter(it)
		for valid := it.First(); valid; valid = it.Next() {
			if !yield(bytes.Clone(it.Key()[n:]), bytes.Clone(it.Value())) {
				return
			}
		}
	}
}

// ScanMap implements Backend. The named map's entries of a key group are
// one contiguous span: one iterator over the backend's key groups seeks to
// each span in turn, skipping key groups that hold no state at all. The
// iterator reads the store as it was when the scan began.
func (p *Pebble) ScanMap(name string, fn func(key, userKey, value []byte) error) (err error) {
	checkName(name)
	// Store failures panic with a *StoreError (p.iter, p.closeIter): this
	// method has an error to return them as. A *StoreError fn panics with
	// (reading state of a failed store) is the same failure.
	defer func() {
		if r := recover(); r != nil {
			se, ok := r.(*StoreError)
			if !ok {
				panic(r)
			}
			err = se
		}
	}()
	kgs := p.cfg.KeyGroups
	if kgs.End < kgs.Start {
		return nil
	}
	opts := &pebble.IterOptions{LowerBound: binary.BigEndian.AppendUint16(nil, uint16(kgs.Start))}
	if kgs.End+1 <= 0xffff {
		opts.UpperBound = binary.BigEndian.AppendUint16(nil, uint16(kgs.End+1))
	}
	it := p.iter(opts)
	closed := false
	defer func() {
		if !closed {
			it.Close() // fn panicked
		}
	}()
	var prefix []byte
scan:
	for kg := kgs.Start; kg <= kgs.End; kg++ {
		prefix = encodeMapName(prefix, kg, name)
		valid := it.SeekGE(prefix)
		for ; valid && bytes.HasPrefix(it.Key(), prefix); valid = it.Next() {
			_, e, ok := decodeKey(it.Key())
			if !ok {
				continue
			}
			if err = fn(bytes.Clone(e.key), bytes.Clone(e.userKey), append([]byte{}, it.Value()...)); err != nil {
				break scan
			}
		}
		if !valid {
			break // nothing more in our key groups
		}
		// The next key group holding any state.
		if next := int(binary.BigEndian.Uint16(it.Key())); next > kg+1 {
			kg = next - 1
		}
	}
	closed = true
	p.closeIter(it)
	return err
}

// Clear deletes the entries one by one: a range tombstone per call would
// pile up and slow reads down when maps are cleared per record.
func (m *pebbleMap) Clear() {
	it := m.p.iter(m.bounds())
	b := m.p.db.NewBatch()
	defer b.Close()
	for valid := it.First(); valid; valid = it.Next() {
		if err := b.Delete(it.Key(), nil); err != nil {
			it.Close()
			m.p.must("delete", err)
		}
	}
	m.p.closeIter(it)
	m.p.usable()
	defer m.p.catch("delete")
	m.p.must("delete", b.Commit(m.p.wo))
}
