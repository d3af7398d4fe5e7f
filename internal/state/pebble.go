package state

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weirproject/weir/internal/storage"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
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
	// ttl is the bookkeeping of the states declared with a TTL.
	ttl pebbleTTL
	// health is the store's first failure, if any.
	health *health
	// poisoned: Pebble panicked in a call, possibly holding its own
	// locks; Close then leaves the store alone instead of waiting on them.
	poisoned bool
	// recovery keeps local copies of snapshots (nil: off).
	recovery *localRecovery
	// cache holds entries in memory and writes them back (nil: off).
	cache *writeCache

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
	h := newHealth(log)
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
		cache: newWriteCache(cfg.CacheBytes),
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
	return openStore(fs, dir, h, false)
}

// openSnapshot opens a copy of a snapshot to read: read-only, so that it
// runs no compaction, which would compete with the restore that reads it.
func openSnapshot(fs vfs.FS, dir string, h *health) (*pebble.DB, error) {
	return openStore(fs, dir, h, true)
}

func openStore(fs vfs.FS, dir string, h *health, readOnly bool) (*pebble.DB, error) {
	opts := &pebble.Options{
		FS: fs, DisableWAL: true, MemTableSize: 8 << 20, ReadOnly: readOnly,
		Logger:        pebbleLogger{h},
		EventListener: &pebble.EventListener{BackgroundError: h.background},
	}
	if !readOnly {
		// Virtual files, for clipping a restored store (Pebble.clip); a
		// store written in an older format moves to it when opened. A
		// copy opened to read keeps whatever format it has.
		opts.FormatMajorVersion = pebble.FormatVirtualSSTables
	}
	db, err := pebble.Open(dir, opts)
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
	failed  chan struct{} // closed at the first failure
}

func newHealth(log *slog.Logger) *health {
	return &health{log: log, failed: make(chan struct{})}
}

func (h *health) fail(err error) {
	if h.failure.CompareAndSwap(nil, &err) {
		close(h.failed)
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
	p.db, p.cache = nil, nil
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

func (p *Pebble) storeSet(k, v []byte) {
	p.usable()
	defer p.catch("set")
	p.must("set", p.db.Set(k, v, p.wo))
}

func (p *Pebble) storeDel(k []byte) {
	p.usable()
	defer p.catch("delete")
	p.must("delete", p.db.Delete(k, p.wo))
}

// iter opens an iterator over the store, after writing the cache back:
// it sees every write made before it.
func (p *Pebble) iter(opts *pebble.IterOptions) *pebble.Iterator {
	p.writeBack()
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

// storeGet reads a key from the store, past the cache; the value is the
// caller's.
func (p *Pebble) storeGet(k []byte) ([]byte, bool) {
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
