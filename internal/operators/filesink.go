package operators

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/weirproject/weir/internal/fault"
	"github.com/weirproject/weir/sdk"
)

// FileSink writes "<key>,<value>" lines into a directory with two-phase
// commit. The records of one checkpoint epoch go to a hidden in-progress
// file; the checkpoint's snapshot pre-commits it (fsync, rename to a hidden
// .pending name, remember it in state) and the checkpoint's completion
// commits it (rename to part-<subtask>-<checkpoint>). Every rename is
// followed by an fsync of the directory: until then a power loss may undo
// it. After a failure the restored state re-commits what the restored
// checkpoint pre-committed and every newer hidden file of this subtask is
// deleted, so committed output holds each record exactly once.
type FileSink struct {
	dir     string
	log     *slog.Logger
	subtask int
	attempt int
	run     string // random, names this run's in-progress files
	pending sdk.ListState

	cur     *os.File
	w       *bufio.Writer
	seq     int
	epochs  []int64 // pre-committed checkpoints not yet committed
	scratch []byte

	// Format, when set, writes a record's line (without the newline)
	// instead of "<key>,<value>": the Go API's typed file sink.
	Format func(dst []byte, r sdk.Record) ([]byte, error)

	// syncDir makes the renames in a directory durable; nil means fsync.
	// Tests replace it to see that every rename is followed by one, and to
	// make one fail.
	syncDir func(dir string) error
}

func (f *FileSink) Open(ctx sdk.Context) error {
	dir, err := ctx.Config().String("path", "")
	if err != nil {
		return err
	}
	if dir == "" {
		return errors.New("file-sink: config path is required")
	}
	f.dir, f.subtask, f.attempt = dir, ctx.SubtaskIndex(), ctx.AttemptNumber()
	if f.log = ctx.Logger(); f.log == nil {
		f.log = slog.Default()
	}
	var run [4]byte
	_, _ = rand.Read(run[:])
	f.run = hex.EncodeToString(run[:])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("file-sink: %w", err)
	}
	f.pending = ctx.ListState("pending")
	// Every subtask keeps exactly one item, so the round-robin split of
	// list state on restore hands each subtask its own item back at the same
	// parallelism, and the item of old subtask j to subtask j mod p when
	// rescaled.
	cleanup := []int{f.subtask}
	for _, it := range f.pending.Get() {
		sub, ids, err := parsePending(it)
		if err != nil {
			return err
		}
		// The restored checkpoint completed, so what it pre-committed is due.
		for _, id := range ids {
			if err := f.commit(sub, id); err != nil {
				return err
			}
		}
		// Hidden files of a subtask that no longer exists are this one's to
		// clean up; a running subtask's are not.
		if sub != f.subtask && sub >= ctx.Parallelism() {
			cleanup = append(cleanup, sub)
		}
	}
	f.pending.Clear()
	for _, sub := range cleanup {
		if err := f.abortNewer(sub); err != nil {
			return err
		}
	}
	return nil
}

// parsePending decodes a pending state item "<subtask>:<id>,<id>,…".
func parsePending(it []byte) (int, []int64, error) {
	corrupt := fmt.Errorf("file-sink: corrupt pending state %q", it)
	s, list, ok := strings.Cut(string(it), ":")
	sub, err := strconv.Atoi(s)
	if !ok || err != nil || sub < 0 {
		return 0, nil, corrupt
	}
	var ids []int64
	if list != "" {
		for _, e := range strings.Split(list, ",") {
			id, err := strconv.ParseInt(e, 10, 64)
			if err != nil {
				return 0, nil, corrupt
			}
			ids = append(ids, id)
		}
	}
	return sub, ids, nil
}

// abortNewer deletes the hidden files of subtask sub once the restored
// epochs are committed: epochs after the restored checkpoint, never to be
// committed.
func (f *FileSink) abortNewer(sub int) error {
	entries, err := os.ReadDir(f.dir)
	if err != nil {
		return fmt.Errorf("file-sink: %w", err)
	}
	prefix := fmt.Sprintf(".part-%d-", sub)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			if err := os.Remove(filepath.Join(f.dir, e.Name())); err != nil {
				return fmt.Errorf("file-sink: abort %s: %w", e.Name(), err)
			}
		}
	}
	return nil
}

// inProgressName is unique per run: attempt numbers start over when a new
// JobManager leader recovers the job, while an old attempt may still run.
func (f *FileSink) inProgressName() string {
	return fmt.Sprintf(".part-%d-inprogress-%d-%s-%d", f.subtask, f.attempt, f.run, f.seq)
}

func (f *FileSink) pendingName(subtask int, id int64) string {
	return fmt.Sprintf(".part-%d-%d.pending", subtask, id)
}

// FinalName is the visible name of a committed epoch.
func FinalName(subtask int, checkpointID int64) string {
	return fmt.Sprintf("part-%d-%d", subtask, checkpointID)
}

func (f *FileSink) ProcessRecord(r sdk.Record, _ sdk.Collector) error {
	if f.cur == nil {
		file, err := os.Create(filepath.Join(f.dir, f.inProgressName()))
		if err != nil {
			return fmt.Errorf("file-sink: %w", err)
		}
		f.cur, f.w = file, bufio.NewWriterSize(file, 64<<10)
	}
	if f.Format != nil {
		var err error
		if f.scratch, err = f.Format(f.scratch[:0], r); err != nil {
			return fmt.Errorf("file-sink: %w", err)
		}
		f.scratch = append(f.scratch, '\n')
	} else {
		f.scratch = append(append(append(append(f.scratch[:0], r.Key...), ','), r.Value...), '\n')
	}
	_, err := f.w.Write(f.scratch)
	return err
}

// SnapshotState pre-commits the epoch that checkpoint id closes.
func (f *FileSink) SnapshotState(id int64) error {
	if f.cur != nil {
		name := f.cur.Name()
		err := f.w.Flush()
		if err == nil {
			err = f.cur.Sync()
		}
		if cerr := f.cur.Close(); err == nil {
			err = cerr
		}
		f.cur, f.w = nil, nil
		f.seq++
		if err == nil {
			err = os.Rename(name, filepath.Join(f.dir, f.pendingName(f.subtask, id)))
		}
		if err == nil {
			// The checkpoint will name the pending file; a restore that
			// finds the in-progress name instead would have lost the epoch.
			err = f.sync()
		}
		if err != nil {
			return fmt.Errorf("file-sink: pre-commit checkpoint %d: %w", id, err)
		}
		f.epochs = append(f.epochs, id)
	}
	item := append(strconv.AppendInt(nil, int64(f.subtask), 10), ':')
	for i, e := range f.epochs {
		if i > 0 {
			item = append(item, ',')
		}
		item = strconv.AppendInt(item, e, 10)
	}
	f.pending.Update([][]byte{item})
	return nil
}

// NotifyCheckpointComplete commits every epoch up to id; epochs of aborted
// checkpoints ride along with the next completed one. An error fails the
// subtask, and the restore re-commits from the checkpoint's state.
func (f *FileSink) NotifyCheckpointComplete(id int64) error {
	var due, kept []int64
	for _, e := range f.epochs {
		if e <= id {
			due = append(due, e)
		} else {
			kept = append(kept, e)
		}
	}
	if len(due) == 0 {
		// Nothing to commit: a one-shot fault is kept for a real commit.
		return nil
	}
	if err := fault.Point(fault.SinkBeforeCommit); err != nil {
		return fmt.Errorf("file-sink: commit checkpoint %d: %w", id, err)
	}
	for i, e := range due {
		if err := f.commit(f.subtask, e); err != nil {
			// Epochs not committed stay due, so a later notification on
			// this instance still commits them.
			f.epochs = append(due[i:], kept...)
			return err
		}
	}
	f.epochs = kept
	return nil
}

func (f *FileSink) NotifyCheckpointAborted(int64) error { return nil }

// commit makes the epoch of checkpoint id of subtask visible. It is
// idempotent: a restore re-commits what its checkpoint pre-committed, which
// the failed attempt may have committed already.
func (f *FileSink) commit(subtask int, id int64) error {
	pending, final := f.pendingName(subtask, id), FinalName(subtask, id)
	err := os.Rename(filepath.Join(f.dir, pending), filepath.Join(f.dir, final))
	switch {
	case err == nil:
		// The worst place to die: the epoch is visible but its rename not
		// yet durable, and the later epochs of the same notification are
		// still pending. The restore must take the committed file as done,
		// sync again and commit the rest.
		if err := fault.Point(fault.SinkMidCommit); err != nil {
			return fmt.Errorf("file-sink: commit checkpoint %d: %w", id, err)
		}
	case errors.Is(err, fs.ErrNotExist):
		if _, serr := os.Stat(filepath.Join(f.dir, final)); errors.Is(serr, fs.ErrNotExist) {
			return fmt.Errorf("file-sink: commit checkpoint %d: the epoch's records are lost: neither the pending file %s nor the committed file %s exists in %s: %w",
				id, pending, final, f.dir, fs.ErrNotExist)
		} else if serr != nil {
			return fmt.Errorf("file-sink: commit checkpoint %d: %w", id, serr)
		}
		f.log.Info("file-sink: epoch already committed; re-commit only syncs the directory",
			"checkpoint_id", id, "subtask", subtask, "file", final)
		// The attempt that renamed it may have died before its directory
		// sync, so the sync below is still due.
	default:
		return fmt.Errorf("file-sink: commit checkpoint %d: %w", id, err)
	}
	if err := f.sync(); err != nil {
		return fmt.Errorf("file-sink: commit checkpoint %d: %w", id, err)
	}
	return nil
}

// sync makes the renames done in the output directory durable.
func (f *FileSink) sync() error {
	if f.syncDir != nil {
		return f.syncDir(f.dir)
	}
	return syncDir(f.dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return d.Close()
}

func (f *FileSink) Close() error {
	if f.cur == nil {
		return nil
	}
	// The in-progress epoch is not committed; a restore deletes it.
	err := f.cur.Close()
	f.cur = nil
	return err
}
