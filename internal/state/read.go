package state

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/weirproject/weir/internal/keygroup"
	"github.com/weirproject/weir/internal/storage"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// Entry is one keyed-state entry of a subtask's snapshot, as an offline
// reader (`weir state`) sees it: a value state's value, or one user key
// of a map state (Map set).
type Entry struct {
	State    string
	Map      bool
	KeyGroup int
	Key      []byte
	UserKey  []byte
	Value    []byte
}

// ReadEntries calls fn for every keyed-state entry of st, whichever
// format it was written in (canonical, or an incremental Pebble
// snapshot, whose files are fetched into a directory under tmpDir while
// they are read). The slices are fn's only until it returns.
func ReadEntries(st *weirv1.SubtaskState, maxParallelism int, tmpDir string, fn func(Entry) error) error {
	all := func(int) bool { return true }
	return readKeyed(newRestorer(nil), slog.Default(), st, maxParallelism, tmpDir, all, func(e entry) error {
		return fn(Entry{
			State: e.state, Map: e.kind == weirv1.KeyedStateEntry_KIND_MAP,
			KeyGroup: keygroup.Of(e.key, maxParallelism), Key: e.key, UserKey: e.userKey, Value: e.value,
		})
	})
}

// ReadOperatorLists reads st's operator list state: each list's name,
// whether it is a union list, and its items.
func ReadOperatorLists(st *weirv1.SubtaskState) ([]*weirv1.OperatorStateSnapshot_ListState, error) {
	h := st.GetOperatorState()
	if !storage.HasState(h) {
		return nil, nil
	}
	snap := &weirv1.OperatorStateSnapshot{}
	if err := newRestorer(nil).readHandle(h, snap); err != nil {
		return nil, fmt.Errorf("state: read operator state of %s subtask %d: %w", st.GetVertex(), st.GetSubtaskIndex(), err)
	}
	return snap.GetStates(), nil
}

// ReadKey calls fn for the entries record key holds in st's named state,
// value or map, reading as little as the format allows: in a native
// Pebble snapshot, one seek of the store opened over the snapshot's files
// (hard links to them when they are local files, downloads otherwise); in
// a canonical one, only the key's key group is decoded, the others'
// bytes skipped.
func ReadKey(st *weirv1.SubtaskState, maxParallelism int, tmpDir, name string, key []byte, fn func(Entry) error) error {
	kg := keygroup.Of(key, maxParallelism)
	out := func(e entry) error {
		return fn(Entry{State: e.state, Map: e.kind == weirv1.KeyedStateEntry_KIND_MAP, KeyGroup: kg, Key: e.key, UserKey: e.userKey, Value: e.value})
	}
	r := newRestorer(nil)
	if isNative(st) {
		r.local = func(h *weirv1.StateHandle) (string, bool) {
			return h.GetPath(), !strings.Contains(h.GetPath(), "://")
		}
		return readNativeKey(r, st, tmpDir, kg, name, key, out)
	}
	h := st.GetKeyedState()
	if !storage.HasState(h) {
		return nil
	}
	data, err := r.files.ReadHandleBytes(h)
	if err != nil {
		return fmt.Errorf("state: read keyed state: %w", err)
	}
	// KeyedStateSnapshot: 1 max_parallelism, 2 key_groups (each
	// KeyGroupSnapshot: 1 key_group, 2 entries).
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			return fmt.Errorf("state: read keyed state: %w", protowire.ParseError(n))
		}
		data = data[n:]
		if num == 1 && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(data)
			if n < 0 {
				return fmt.Errorf("state: read keyed state: %w", protowire.ParseError(n))
			}
			if int(v) != maxParallelism {
				return fmt.Errorf("state: read keyed state: max parallelism %d, job has %d", v, maxParallelism)
			}
			data = data[n:]
			continue
		}
		if num != 2 || typ != protowire.BytesType {
			n := protowire.ConsumeFieldValue(num, typ, data)
			if n < 0 {
				return fmt.Errorf("state: read keyed state: %w", protowire.ParseError(n))
			}
			data = data[n:]
			continue
		}
		g, n := protowire.ConsumeBytes(data)
		if n < 0 {
			return fmt.Errorf("state: read keyed state: %w", protowire.ParseError(n))
		}
		data = data[n:]
		// The group's number comes first, as Marshal writes it.
		if num, typ, m := protowire.ConsumeTag(g); m > 0 && num == 1 && typ == protowire.VarintType {
			if v, k := protowire.ConsumeVarint(g[m:]); k > 0 && int(v) != kg {
				continue
			}
		}
		snap := &weirv1.KeyGroupSnapshot{}
		if err := proto.Unmarshal(g, snap); err != nil {
			return fmt.Errorf("state: read keyed state: %w", err)
		}
		if int(snap.GetKeyGroup()) != kg {
			continue
		}
		for _, e := range snap.GetEntries() {
			if e.GetState() != name || !bytes.Equal(e.GetKey(), key) {
				continue
			}
			if err := out(entry{kind: e.GetKind(), state: name, key: e.GetKey(), userKey: e.GetUserKey(), value: e.GetValue()}); err != nil {
				return err
			}
		}
	}
	return nil
}

// readNativeKey opens a native snapshot's store and reads key's entries.
func readNativeKey(r *restorer, st *weirv1.SubtaskState, tmpDir string, kg int, name string, key []byte, fn func(entry) error) error {
	tmp, err := os.MkdirTemp(tmpDir, restoreDirPrefix)
	if err != nil {
		return fmt.Errorf("state: read: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := r.download(st, tmp); err != nil {
		return err
	}
	h := newHealth(slog.Default())
	// Read-only: nothing compacts the files, which may be links to the
	// checkpoint's own.
	db, err := pebble.Open(tmp, &pebble.Options{FS: r.fs, ReadOnly: true, Logger: pebbleLogger{h}})
	if err != nil {
		return fmt.Errorf("state: open the snapshot's store: %w", err)
	}
	defer db.Close()
	v, closer, err := db.Get(encodeKey(nil, kg, name, key))
	switch {
	case err == nil:
		e := entry{state: name, key: key, value: bytes.Clone(v)}
		closer.Close()
		if err := fn(e); err != nil {
			return err
		}
	case !errors.Is(err, pebble.ErrNotFound):
		return fmt.Errorf("state: read: %w", err)
	}
	prefix := encodeMapPrefix(nil, kg, name, key)
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return fmt.Errorf("state: read: %w", err)
	}
	for valid := it.First(); valid; valid = it.Next() {
		e := entry{kind: weirv1.KeyedStateEntry_KIND_MAP, state: name, key: key, userKey: bytes.Clone(it.Key()[len(prefix):]), value: bytes.Clone(it.Value())}
		if err := fn(e); err != nil {
			it.Close()
			return err
		}
	}
	if err := errors.Join(it.Error(), it.Close(), h.err()); err != nil {
		return fmt.Errorf("state: read: %w", err)
	}
	return nil
}
