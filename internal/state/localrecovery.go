package state

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// localRecovery keeps on the TaskManager's disk what a subtask's native
// (incremental Pebble) snapshots uploaded, for its newest completed
// checkpoint: Flink's local recovery. A subtask restarted on the same
// TaskManager from that checkpoint (a failover, not a lost machine) reads
// its files from here instead of checkpoint storage. A snapshot's local
// directory already holds every file (hard links of the store's SSTs), so
// keeping it is a rename, and it costs no copy.
//
// dir is <state-dir>/local-recovery/<job>/<vertex>-<subtask>; a copy is
// dir/chk-<id>. A restore reads the copies of the subtasks whose state it
// restores (its own after a failover; after a rescale, those of the
// indexes whose key groups it takes, if they ran here: of). Copies of
// checkpoints older than the newest completed one and of aborted ones are
// removed as the backend learns of them.
type localRecovery struct{ dir string }

func (l *localRecovery) path(id int64) string {
	return filepath.Join(l.dir, "chk-"+strconv.FormatInt(id, 10))
}

// keep makes the uploaded snapshot directory local the copy of checkpoint
// id. It reports whether it did: a copy that cannot be kept only costs a
// download at the next restore.
func (l *localRecovery) keep(id int64, local string) bool {
	if l == nil {
		return false
	}
	if err := os.MkdirAll(l.dir, 0o755); err != nil {
		return false
	}
	return os.Rename(local, l.path(id)) == nil
}

// confirm drops the copies older than checkpoint id, which completed:
// this subtask's and those other indexes of its vertex left on this
// TaskManager (a rescale moved their key groups here, or away), which no
// restore reads once a newer checkpoint completed.
func (l *localRecovery) confirm(id int64) {
	older := func(n int64) bool { return n < id }
	for _, s := range l.siblings() {
		s.drop(older)
	}
}

// siblings are the copies of every index of this subtask's vertex on this
// TaskManager, this one's included.
func (l *localRecovery) siblings() []*localRecovery {
	if l == nil {
		return nil
	}
	out := []*localRecovery{l}
	base := filepath.Base(l.dir)
	i := strings.LastIndexByte(base, '-')
	if i < 0 {
		return out
	}
	vertex := base[:i+1]
	entries, _ := os.ReadDir(filepath.Dir(l.dir))
	for _, e := range entries {
		index, ok := strings.CutPrefix(e.Name(), vertex)
		if _, err := strconv.Atoi(index); ok && err == nil && e.IsDir() && e.Name() != base {
			out = append(out, &localRecovery{dir: filepath.Join(filepath.Dir(l.dir), e.Name())})
		}
	}
	return out
}

// abort drops the copy of checkpoint id.
func (l *localRecovery) abort(id int64) {
	l.drop(func(n int64) bool { return n == id })
}

func (l *localRecovery) drop(which func(int64) bool) {
	if l == nil {
		return
	}
	entries, _ := os.ReadDir(l.dir)
	for _, e := range entries {
		n, ok := strings.CutPrefix(e.Name(), "chk-")
		if !ok {
			continue
		}
		if id, err := strconv.ParseInt(n, 10, 64); err == nil && which(id) {
			os.RemoveAll(filepath.Join(l.dir, e.Name()))
		}
	}
}

// of is where this TaskManager keeps the copies of subtask index of
// vertex: after a rescale, a subtask restores key groups another index
// held, maybe on this TaskManager.
func (l *localRecovery) of(vertex string, index int32) *localRecovery {
	if l == nil {
		return nil
	}
	return &localRecovery{dir: filepath.Join(filepath.Dir(l.dir), vertex+"-"+strconv.Itoa(int(index)))}
}

// find is the local copy of h, a file of checkpoint id, if one with its
// size is there.
func (l *localRecovery) find(id int64, h *weirv1.StateHandle) (string, bool) {
	if l == nil || id <= 0 {
		return "", false
	}
	p := filepath.Join(l.path(id), localName(h))
	fi, err := os.Stat(p)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != h.GetSize() {
		return "", false
	}
	return p, true
}

// RemoveLocalRecovery deletes a subtask's local copies (its job ended, or
// it moved away from this TaskManager).
func RemoveLocalRecovery(dir string) error {
	if err := os.RemoveAll(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("state: remove local recovery copies %s: %w", dir, err)
	}
	return nil
}

// LocalRecoveryDir is where a TaskManager with state directory stateDir
// keeps the local copies of one subtask.
func LocalRecoveryDir(stateDir, job, vertex string, subtask int) string {
	return filepath.Join(stateDir, localRecoveryDirName, job, vertex+"-"+strconv.Itoa(subtask))
}

const localRecoveryDirName = "local-recovery"
