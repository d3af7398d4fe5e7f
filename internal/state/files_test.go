package state

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/weirproject/weir/internal/keygroup"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// storeFailure runs f and returns the *StoreError it panicked with.
func storeFailure(t *testing.T, f func()) (se *StoreError) {
	t.Helper()
	defer func() {
		r := recover()
		var ok bool
		if se, ok = r.(*StoreError); !ok {
			t.Fatalf("panicked with %v (%T), want a *StoreError", r, r)
		}
	}()
	f()
	return nil
}

// A disk error reading the store fails it for good: the access that met
// it and every later one panic with a *StoreError wrapping the error, a
// snapshot returns it, and Close still returns.
func TestPebbleStoreFailure(t *testing.T) {
	var armed atomic.Bool
	fs := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if armed.Load() && strings.HasSuffix(op.Path, ".sst") && op.Kind.ReadOrWrite() == errorfs.OpIsRead {
			return errorfs.ErrInjected
		}
		return nil
	}))
	p, err := OpenPebble(Config{
		Kind: weirv1.StateBackendConfig_BACKEND_PEBBLE, MaxParallelism: confMaxP,
		KeyGroups: keygroup.RangeFor(confMaxP, 1, 0), LocalDir: t.TempDir(), FS: fs,
	})
	if err != nil {
		t.Fatal(err)
	}
	v := p.ValueState("v")
	for i := range 4 {
		p.SetCurrentKey([]byte(fmt.Sprint("k", i)))
		v.Update(make([]byte, 1<<20))
	}
	// Read back from the store, not the cache.
	p.dropCache()
	if err := p.db.Flush(); err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	p.SetCurrentKey([]byte("k0"))
	se := storeFailure(t, func() { v.Value() })
	if !errors.Is(se, errorfs.ErrInjected) {
		t.Fatalf("store error %v does not wrap the disk error", se)
	}
	armed.Store(false)
	if later := storeFailure(t, func() { v.Update([]byte("x")) }); !errors.Is(later, errorfs.ErrInjected) {
		t.Fatalf("a later access failed with %v", later)
	}
	if _, err := p.TakeSnapshot(SnapshotOptions{CheckpointID: 1}); !errors.As(err, &se) {
		t.Fatalf("snapshot of a failed store: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Logf("close: %v", err)
	}
}

// A full disk under an incremental checkpoint fails the snapshot rather
// than hanging it: Pebble retries the failed flush without end, and its
// Flush waits for success. The store is failed, Close stops the retries
// and removes its files, and nothing is written to the directory after.
func TestPebbleFlushOnFullDisk(t *testing.T) {
	var full atomic.Bool
	var created atomic.Int64
	fs := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if !full.Load() {
			return nil
		}
		if op.Kind == errorfs.OpCreate {
			created.Add(1)
		}
		if op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
			return fmt.Errorf("write %s: %w", op.Path, errNoSpace)
		}
		return nil
	}))
	base := t.TempDir()
	p, err := OpenPebble(Config{
		Kind: weirv1.StateBackendConfig_BACKEND_PEBBLE, MaxParallelism: confMaxP, Incremental: true,
		KeyGroups: keygroup.RangeFor(confMaxP, 1, 0), LocalDir: base, SharedDir: t.TempDir(), FS: fs,
	})
	if err != nil {
		t.Fatal(err)
	}
	v := p.ValueState("v")
	p.SetCurrentKey([]byte("k"))
	v.Update([]byte("in the memtable only"))
	full.Store(true)
	done := make(chan error, 1)
	go func() {
		_, err := p.TakeSnapshot(SnapshotOptions{CheckpointID: 1})
		done <- err
	}()
	select {
	case err := <-done:
		var se *StoreError
		if !errors.As(err, &se) || !errors.Is(err, errNoSpace) {
			t.Fatalf("snapshot on a full disk: %v; want a *StoreError of the disk error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the snapshot still waits for a flush that cannot succeed")
	}
	if err := p.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	after := created.Load()
	full.Store(false)
	if entries, err := os.ReadDir(base); err != nil || len(entries) != 0 {
		t.Fatalf("after Close the local directory holds %v (%v)", entries, err)
	}
	if n := created.Load(); n != after {
		t.Fatalf("%d files created after Close", n-after)
	}
}

var errNoSpace = errors.New("no space left on device")
