package state

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

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
