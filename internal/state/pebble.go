package state

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2"
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
	dir   string // the local directory holding db/ and checkpoint staging
	db    *pebble.DB
	uid   string // names this store's files in shared storage
	seq   int
	wo    *pebble.WriteOptions
	kg    int
	key   []byte
	buf   []byte
	lists operatorLists

	mu sync.Mutex
	// pending holds, per checkpoint written but not yet confirmed, the
	// shared files it references, by local file name.
	pending map[int64]map[string]*weirv1.StateHandle
	// confirmed are the shared files of the newest completed checkpoint:
	// they stay in shared storage until a newer checkpoint completes, so a
	// checkpoint taken now may reference them instead of uploading.
	confirmed map[string]*weirv1.StateHandle
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
	db, err := openDB(filepath.Join(dir, "db"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	var uid [8]byte
	rand.Read(uid[:])
	return &Pebble{
		cfg: cfg, dir: dir, db: db, uid: hex.EncodeToString(uid[:]), wo: pebble.NoSync,
		lists: operatorLists{}, pending: map[int64]map[string]*weirv1.StateHandle{},
	}, nil
}

func openDB(dir string) (*pebble.DB, error) {
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{}, MemTableSize: 8 << 20})
	if err != nil {
		return nil, fmt.Errorf("state: open pebble %s: %w", dir, err)
	}
	return db, nil
}

// quietLogger drops Pebble's informational lines.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)              {}
func (quietLogger) Errorf(string, ...any)             {}
func (quietLogger) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

// Dir is the store's local directory (tests).
func (p *Pebble) Dir() string { return p.dir }

// Close closes the store and removes its local files.
func (p *Pebble) Close() error {
	var err error
	if p.db != nil {
		err = p.db.Close()
		p.db = nil
	}
	return errors.Join(err, os.RemoveAll(p.dir))
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
	b, closer, err := p.db.Get(k)
	if err != nil {
		if !errors.Is(err, pebble.ErrNotFound) {
			panic(fmt.Sprintf("state: pebble get: %v", err))
		}
		return nil, false
	}
	out := bytes.Clone(b)
	closer.Close()
	if out == nil {
		out = []byte{}
	}
	return out, true
}

func (v *pebbleValue) Update(b []byte) {
	if err := v.p.db.Set(v.k(), b, v.p.wo); err != nil {
		panic(fmt.Sprintf("state: pebble set: %v", err))
	}
}

func (v *pebbleValue) Clear() {
	if err := v.p.db.Delete(v.k(), v.p.wo); err != nil {
		panic(fmt.Sprintf("state: pebble delete: %v", err))
	}
}

// TakeSnapshot implements Backend. A canonical snapshot is a Pebble
// snapshot, a sequence number. A native one first flushes the memtable, as
// Flink's RocksDB backend does, so that all state is in immutable SST files
// and the checkpoint uploads no WAL: without it, state smaller than a
// memtable would travel whole in every checkpoint's WAL copy. The flush
// writes at most one memtable (MemTableSize), which bounds the mailbox's
// synchronous part; the checkpoint itself hard-links the SST files.
func (p *Pebble) TakeSnapshot(opts SnapshotOptions) (StateSnapshot, error) {
	lists := p.lists.copy()
	if opts.Canonical || !p.cfg.Incremental {
		return &pebbleCanonical{p: p, snap: p.db.NewSnapshot(), lists: lists}, nil
	}
	if err := p.db.Flush(); err != nil {
		return nil, fmt.Errorf("state: pebble flush for checkpoint %d: %w", opts.CheckpointID, err)
	}
	p.seq++
	local := filepath.Join(p.dir, fmt.Sprintf("chk-%d-%d", opts.CheckpointID, p.seq))
	if err := p.db.Checkpoint(local); err != nil {
		os.RemoveAll(local)
		return nil, fmt.Errorf("state: pebble checkpoint %d: %w", opts.CheckpointID, err)
	}
	var confirmed map[string]*weirv1.StateHandle
	if !opts.Full {
		p.mu.Lock()
		confirmed = p.confirmed
		p.mu.Unlock()
	}
	return &pebbleNative{p: p, id: opts.CheckpointID, local: local, confirmed: confirmed, lists: lists}, nil
}

// NotifyCheckpointComplete implements Backend: the files of checkpoint id
// may be referenced from now on, those of older ones no longer.
func (p *Pebble) NotifyCheckpointComplete(id int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if files, ok := p.pending[id]; ok {
		p.confirmed = files
	}
	for c := range p.pending {
		if c <= id {
			delete(p.pending, c)
		}
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
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return nil, fmt.Errorf("state: pebble iterate: %w", err)
	}
	// Entries are in (state, key) order within a group, as the heap writes them.
	prefix := filePrefix(dir, vertex, subtask)
	if len(out.KeyGroups) > 0 {
		h, err := storage.WriteHandle(prefix+".keyed", out, s.p.cfg.InlineThreshold)
		if err != nil {
			return nil, fmt.Errorf("state: write keyed state: %w", err)
		}
		st.KeyedState = h
		st.StateSize, st.CheckpointedSize = h.GetSize(), h.GetSize()
	}
	if err := writeOperator(st, prefix, s.lists, s.p.cfg.InlineThreshold); err != nil {
		return nil, err
	}
	return st, nil
}

type pebbleNative struct {
	p         *Pebble
	id        int64
	local     string
	confirmed map[string]*weirv1.StateHandle
	lists     map[string]listState
}

func (s *pebbleNative) Release() { os.RemoveAll(s.local) }

// isImmutable: SST and blob files never change once written, so they are
// uploaded once and shared; the manifest, options and markers are
// exclusive to a checkpoint.
func isImmutable(name string) bool {
	return strings.HasSuffix(name, ".sst") || strings.HasSuffix(name, ".blob")
}

// isWAL: the snapshot flushed the memtable and nothing was written before
// the checkpoint, so the WAL files it copied hold nothing the SSTs lack
// (Pebble may also copy older logs awaiting deletion).
func isWAL(name string) bool { return strings.HasSuffix(name, ".log") }

func (s *pebbleNative) Write(dir, vertex string, subtask, parallelism int) (*weirv1.SubtaskState, error) {
	defer s.Release()
	kgs := s.p.cfg.KeyGroups
	st := &weirv1.SubtaskState{
		Vertex: vertex, SubtaskIndex: int32(subtask), Parallelism: int32(parallelism),
		KeyGroups: &weirv1.KeyGroupRange{Start: int32(kgs.Start), End: int32(kgs.End)},
	}
	entries, err := os.ReadDir(s.local)
	if err != nil {
		return nil, fmt.Errorf("state: read pebble checkpoint: %w", err)
	}
	prefix := filePrefix(dir, vertex, subtask)
	exclusive := prefix + ".pebble"
	// Mkdir, not MkdirAll: a checkpoint directory removed by an abort
	// must not come back.
	if err := os.Mkdir(exclusive, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("state: write pebble checkpoint: %w", err)
	}
	if err := os.MkdirAll(s.p.cfg.SharedDir, 0o755); err != nil {
		return nil, fmt.Errorf("state: write pebble checkpoint: %w", err)
	}
	referenced := map[string]*weirv1.StateHandle{}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		name := e.Name()
		src := filepath.Join(s.local, name)
		if isWAL(name) {
			continue
		}
		if isImmutable(name) {
			if h, ok := s.confirmed[name]; ok {
				referenced[name] = h
				st.SharedFiles = append(st.SharedFiles, h)
				st.StateSize += h.GetSize()
				continue
			}
			// Named after the store and the checkpoint that uploads it: two
			// in-flight checkpoints never share an upload, so aborting one
			// cannot delete the other's file.
			dst := filepath.Join(s.p.cfg.SharedDir, sharedFileName(s.p.uid, s.id, name))
			n, err := copyFile(src, dst)
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
		dst := filepath.Join(exclusive, name)
		n, err := copyFile(src, dst)
		if err != nil {
			return nil, fmt.Errorf("state: write %s: %w", name, err)
		}
		st.SharedFiles = append(st.SharedFiles, &weirv1.StateHandle{Path: dst, Size: n})
		st.StateSize += n
		st.CheckpointedSize += n
	}
	if err := writeOperator(st, prefix, s.lists, s.p.cfg.InlineThreshold); err != nil {
		return nil, err
	}
	s.p.mu.Lock()
	s.p.pending[s.id] = referenced
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

// copyFile copies src to dst through a temporary file renamed into place.
func copyFile(src, dst string) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.Create(tmp)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
		return 0, err
	}
	return n, nil
}

// isNative reports whether st is a native (Pebble checkpoint) snapshot.
func isNative(st *weirv1.SubtaskState) bool { return len(st.GetSharedFiles()) > 0 }

// localName is the name a file of a native snapshot had in its store.
func localName(h *weirv1.StateHandle) string {
	name := filepath.Base(h.GetPath())
	if h.GetShared() {
		if i := strings.LastIndexByte(name, '_'); i >= 0 {
			name = name[i+1:]
		}
	}
	return name
}

// download copies a native snapshot's files into a fresh directory dir.
func download(st *weirv1.SubtaskState, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, h := range st.GetSharedFiles() {
		if _, err := copyFile(h.GetPath(), filepath.Join(dir, localName(h))); err != nil {
			return fmt.Errorf("state: download %s: %w", h.GetPath(), err)
		}
	}
	return nil
}

// readNative opens a copy of a native snapshot and calls fn for each entry
// in the key groups owns accepts.
func readNative(st *weirv1.SubtaskState, tmpDir string, owns func(kg int) bool, fn func(e entry) error) error {
	tmp, err := os.MkdirTemp(tmpDir, restoreDirPrefix)
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := download(st, tmp); err != nil {
		return err
	}
	db, err := openDB(tmp)
	if err != nil {
		return err
	}
	defer db.Close()
	it, err := db.NewIter(nil)
	if err != nil {
		return err
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
	return errors.Join(it.Error(), it.Close())
}

// Restore implements Backend. A native snapshot of exactly this subtask's
// key groups is opened in place; anything else is copied, key group by key
// group, into the store.
func (p *Pebble) Restore(prev []*weirv1.SubtaskState, subtask, parallelism int) error {
	kgs := p.cfg.KeyGroups
	if len(prev) > 0 {
		var same *weirv1.SubtaskState
		for _, st := range prev {
			if r := st.GetKeyGroups(); isNative(st) && int(r.GetStart()) == kgs.Start && int(r.GetEnd()) == kgs.End {
				same = st
			}
		}
		if same != nil && len(prev) == 1 || same != nil && allOthersEmpty(prev, same, kgs) {
			if err := p.openRestored(same); err != nil {
				return err
			}
			p.confirmRestored(same)
			return restoreOperator(p.lists, prev, subtask, parallelism)
		}
	}
	for _, st := range prev {
		if r := st.GetKeyGroups(); r != nil && (int(r.GetEnd()) < kgs.Start || int(r.GetStart()) > kgs.End) {
			continue // owns none of our key groups
		}
		b := p.db.NewBatch()
		var buf []byte
		err := readKeyed(st, p.cfg.MaxParallelism, p.dir, kgs.Contains, func(e entry) error {
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
		if err != nil {
			return fmt.Errorf("state: restore into pebble: %w", err)
		}
	}
	return restoreOperator(p.lists, prev, subtask, parallelism)
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
		if h.GetShared() && filepath.Dir(filepath.Clean(h.GetPath())) == filepath.Clean(p.cfg.SharedDir) {
			files[localName(h)] = h
		}
	}
	p.mu.Lock()
	p.confirmed = files
	p.mu.Unlock()
}

// openRestored replaces the (empty) store with a copy of st.
func (p *Pebble) openRestored(st *weirv1.SubtaskState) error {
	if err := p.db.Close(); err != nil {
		return err
	}
	p.db = nil
	dbDir := filepath.Join(p.dir, "db")
	if err := os.RemoveAll(dbDir); err != nil {
		return err
	}
	if err := download(st, dbDir); err != nil {
		return err
	}
	db, err := openDB(dbDir)
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

func (m *pebbleMap) Put(userKey, value []byte) {
	if err := m.p.db.Set(m.k(userKey), value, m.p.wo); err != nil {
		panic(fmt.Sprintf("state: pebble set: %v", err))
	}
}

func (m *pebbleMap) Remove(userKey []byte) {
	if err := m.p.db.Delete(m.k(userKey), m.p.wo); err != nil {
		panic(fmt.Sprintf("state: pebble delete: %v", err))
	}
}

func (m *pebbleMap) bounds() *pebble.IterOptions {
	lower := encodeMapPrefix(nil, m.p.kg, m.name, m.p.key)
	return &pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)}
}

// iter opens an iterator over the map of the key bounds were taken for.
func (m *pebbleMap) iter(bounds *pebble.IterOptions) *pebble.Iterator {
	it, err := m.p.db.NewIter(bounds)
	if err != nil {
		panic(fmt.Sprintf("state: pebble iterate: %v", err))
	}
	return it
}

func (m *pebbleMap) IsEmpty() bool {
	it := m.iter(m.bounds())
	empty := !it.First()
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		panic(fmt.Sprintf("state: pebble iterate: %v", err))
	}
	return empty
}

// All implements sdk.MapState: a Pebble iterator reads the store as it
// was when it was opened, so writes during the loop are not seen. The key
// is the one current when All was called.
func (m *pebbleMap) All() iter.Seq2[[]byte, []byte] {
	bounds := m.bounds()
	n := len(bounds.LowerBound)
	return func(yield func([]byte, []byte) bool) {
		it := m.iter(bounds)
		defer func() {
			if err := errors.Join(it.Error(), it.Close()); err != nil {
				panic(fmt.Sprintf("state: pebble iterate: %v", err))
			}
		}()
		for valid := it.First(); valid; valid = it.Next() {
			if !yield(bytes.Clone(it.Key()[n:]), bytes.Clone(it.Value())) {
				return
			}
		}
	}
}

// Clear deletes the entries one by one: a range tombstone per call would
// pile up and slow reads down when maps are cleared per record.
func (m *pebbleMap) Clear() {
	it := m.iter(m.bounds())
	b := m.p.db.NewBatch()
	defer b.Close()
	for valid := it.First(); valid; valid = it.Next() {
		if err := b.Delete(it.Key(), nil); err != nil {
			panic(fmt.Sprintf("state: pebble delete: %v", err))
		}
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		panic(fmt.Sprintf("state: pebble iterate: %v", err))
	}
	if err := b.Commit(m.p.wo); err != nil {
		panic(fmt.Sprintf("state: pebble delete: %v", err))
	}
}
