package state

import (
	"fmt"
	"log/slog"

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
