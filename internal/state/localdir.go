package state

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// The local directories the backends make. CleanLocalDir removes only
// these, so a state directory shared with other content loses nothing else.
const (
	pebbleDirPrefix  = "weir-pebble-"
	restoreDirPrefix = "weir-restore-"
)

// CleanLocalDir makes dir, the local state directory of a process, and
// removes what backends of an earlier run of it left there: a process
// killed before its subtasks closed their stores leaves them behind, and
// nothing is ever restored from them (restores read checkpoint storage).
// A store whose Pebble lock is held is in use by a live process sharing
// the directory (two TaskManagers given the same one) and stays. It
// returns the number of leftovers removed.
func CleanLocalDir(dir string) (int, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, fmt.Errorf("state: local dir: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("state: local dir: %w", err)
	}
	var errs []error
	n := 0
	for _, e := range entries {
		var lock string
		switch {
		case strings.HasPrefix(e.Name(), pebbleDirPrefix):
			lock = filepath.Join(dir, e.Name(), "db", "LOCK")
		case strings.HasPrefix(e.Name(), restoreDirPrefix):
			lock = filepath.Join(dir, e.Name(), "LOCK")
		case e.Name() == localRecoveryDirName:
			// An earlier run's local copies: its subtasks are gone.
			lock = ""
		default:
			continue
		}
		if lock != "" && inUse(lock) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	if err := errors.Join(errs...); err != nil {
		return n, fmt.Errorf("state: clean local dir %s: %w", dir, err)
	}
	return n, nil
}

// inUse reports whether a Pebble store's lock file is locked, by this or
// another process. A store that never got as far as its lock file is not.
func inUse(lock string) bool {
	if _, err := os.Stat(lock); errors.Is(err, fs.ErrNotExist) {
		return false
	}
	l, err := vfs.Default.Lock(lock)
	if err != nil {
		return true
	}
	l.Close()
	return false
}
