package operators

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/weirproject/weir/sdk"
)

// FileSink writes "<key>,<value>" lines into a directory with two-phase
// commit. The records of one checkpoint epoch go to a hidden in-progress
// file; the checkpoint's snapshot pre-commits it (fsync, rename to a hidden
// .pending name, remember it in state) and the checkpoint's completion
// commits it (rename to part-<subtask>-<checkpoint>). After a failure the
// restored state re-commits what the restored checkpoint pre-committed and
// every newer hidden file of this subtask is deleted, so committed output
// holds each record exactly once.
type FileSink struct {
	dir     string
	subtask int
	attempt int
	pending sdk.ListState

	cur     *os.File
	w       *bufio.Writer
	seq     int
	epochs  []int64 // pre-committed checkpoints not yet committed
	scratch []byte
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
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("file-sink: %w", err)
	}
	f.pending = ctx.ListState("pending")
	keep := map[string]bool{}
	for _, it := range f.pending.Get() {
		id, err := strconv.ParseInt(string(it), 10, 64)
		if err != nil {
			return fmt.Errorf("file-sink: corrupt pending state %q", it)
		}
		// The restored checkpoint completed, so what it pre-committed is due.
		if err := f.commit(id); err != nil {
			return err
		}
		keep[f.pendingName(id)] = true
	}
	f.pending.Clear()
	return f.abortNewer(keep)
}

// abortNewer deletes this subtask's hidden files that the restored state
// does not know: epochs after the restored checkpoint, never to be committed.
func (f *FileSink) abortNewer(keep map[string]bool) error {
	entries, err := os.ReadDir(f.dir)
	if err != nil {
		return fmt.Errorf("file-sink: %w", err)
	}
	prefix := fmt.Sprintf(".part-%d-", f.subtask)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) && !keep[e.Name()] {
			if err := os.Remove(filepath.Join(f.dir, e.Name())); err != nil {
				return fmt.Errorf("file-sink: abort %s: %w", e.Name(), err)
			}
		}
	}
	return nil
}

func (f *FileSink) inProgressName() string {
	return fmt.Sprintf(".part-%d-inprogress-%d-%d", f.subtask, f.attempt, f.seq)
}

func (f *FileSink) pendingName(id int64) string {
	return fmt.Sprintf(".part-%d-%d.pending", f.subtask, id)
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
	f.scratch = append(append(append(append(f.scratch[:0], r.Key...), ','), r.Value...), '\n')
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
			err = os.Rename(name, filepath.Join(f.dir, f.pendingName(id)))
		}
		if err != nil {
			return fmt.Errorf("file-sink: pre-commit checkpoint %d: %w", id, err)
		}
		f.epochs = append(f.epochs, id)
	}
	items := make([][]byte, len(f.epochs))
	for i, e := range f.epochs {
		items[i] = strconv.AppendInt(nil, e, 10)
	}
	f.pending.Update(items)
	return nil
}

// NotifyCheckpointComplete commits every epoch up to id; epochs of aborted
// checkpoints ride along with the next completed one.
func (f *FileSink) NotifyCheckpointComplete(id int64) error {
	kept := f.epochs[:0]
	for _, e := range f.epochs {
		if e > id {
			kept = append(kept, e)
			continue
		}
		if err := f.commit(e); err != nil {
			return err
		}
	}
	f.epochs = kept
	return nil
}

func (f *FileSink) NotifyCheckpointAborted(int64) error { return nil }

// commit is idempotent: a re-commit after a restore finds the file done.
func (f *FileSink) commit(id int64) error {
	final := filepath.Join(f.dir, FinalName(f.subtask, id))
	err := os.Rename(filepath.Join(f.dir, f.pendingName(id)), final)
	if errors.Is(err, os.ErrNotExist) {
		if _, serr := os.Stat(final); serr == nil {
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("file-sink: commit checkpoint %d: %w", id, err)
	}
	return nil
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
