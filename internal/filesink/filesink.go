// Package filesink is the file sink: part files on local disk or S3,
// committed in two phases with the checkpoints. It is apart from the
// built-in operators so that what uses those (the Go API's windows and
// joins) links no S3 client.
package filesink

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/weirproject/weir/internal/blob"
	"github.com/weirproject/weir/internal/dirsync"
	"github.com/weirproject/weir/internal/fault"
	"github.com/weirproject/weir/sdk"
)

// FileSink writes "<key>,<value>" lines (or, with line: value, the
// values alone: a SQL sink's rows, CSV or JSON) into part files under
// path, a local directory or an S3 prefix (s3://bucket/prefix), with
// two-phase commit.
//
// By default (roll on every checkpoint) the records of one checkpoint
// epoch go to one in-progress part file; the checkpoint's snapshot
// pre-commits it and the checkpoint's completion commits it as
// part-<subtask>-<checkpoint>. In a directory the in-progress file is a
// hidden file; the pre-commit fsyncs it and renames it to a hidden
// .pending name, the commit renames it into place, and every rename is
// followed by an fsync of the directory: until then a power loss may undo
// it. In S3 the in-progress file is a multipart upload, parts uploaded as
// the buffer fills; the pre-commit uploads the last part and the commit
// completes the upload, which makes the object appear atomically.
//
// A rolling policy (roll: max-size, max-age, on-checkpoint) closes part
// files by size or age too, named part-<subtask>-<epoch>-<n>, and with
// on-checkpoint: false an in-progress file outlives checkpoints: its
// resumable state (the file and its length; the upload, its parts and the
// not yet uploaded tail) goes into the checkpoint and a restore resumes
// it. A closed file is pre-committed at the next snapshot and committed
// when that checkpoint completes.
//
// After a failure the restored state re-commits what the restored
// checkpoint pre-committed, resumes its in-progress file, and every other
// uncommitted file (hidden file or multipart upload) of this subtask is
// deleted, so committed output holds each record exactly once.
type FileSink struct {
	loc     string // the path configured: a directory or s3://bucket/prefix
	dir     string // the local directory, for a local path
	log     *slog.Logger
	subtask int
	attempt int
	run     string // random, names this run's in-progress files
	pending sdk.ListState
	roll    rollPolicy
	// legacy: one file per checkpoint epoch, named after the checkpoint
	// (the default rolling policy).
	legacy bool
	// valueOnly: a line is the record's value alone (line: value).
	valueOnly bool

	store  partStore
	cur    partFile  // the in-progress part file, nil when none
	opened time.Time // when cur was opened, for max-age
	// base is the last checkpoint snapshotted or restored: a file opened
	// now holds records of epoch base+1.
	base  int64
	n     int // files opened in epoch base+1, for their names
	seq   int // local in-progress files opened, for their names
	ended bool
	// lost is set when a pre-commit failed after the epoch's file was
	// given up: its records are in no checkpoint and no file, so the
	// subtask must fail and restore (the sources replay them), not go on
	// to the next checkpoint without them. Every later call returns it.
	lost error
	// unsynced are the closed local files whose data and directory entry
	// are not durable yet: the next snapshot's asynchronous part syncs
	// them (see SnapshotStateAsync).
	unsynced []func() error
	// synced is closed when the previous snapshot's asynchronous part
	// ended: each waits for the one before, so no checkpoint is
	// acknowledged while a file an earlier one pre-committed may still be
	// lost, and a failure fails every later checkpoint too.
	synced <-chan struct{}
	// syncMu guards syncErr, the failure of an asynchronous part: set on
	// the checkpoint's goroutine, it fails the subtask from the sink's
	// next call, as lost does.
	syncMu  sync.Mutex
	syncErr error
	// files are the closed part files not yet committed, oldest first;
	// Checkpoint is the checkpoint whose snapshot pre-committed the file,
	// 0 while it awaits the next snapshot.
	files   []partState
	scratch []byte

	// Format, when set, writes a record's line (without the newline)
	// instead of "<key>,<value>": the Go API's typed file sink.
	Format func(dst []byte, r sdk.Record) ([]byte, error)

	// syncDir makes the renames in a directory durable; nil means fsync.
	// Tests replace it to see that every rename is followed by one, and to
	// make one fail.
	syncDir func(dir string) error
	// now is the clock of max-age; nil is time.Now.
	now func() time.Time
	// mp is the S3 multipart API; nil builds it from S3Config. Tests
	// wrap it to inject failures.
	mp multipartStore
	// partSize is the S3 part size (the buffer); 0 is s3PartSize. Tests
	// of gofakes3 lower it (S3 itself needs 5 MiB but for the last part).
	partSize int
}

// partStore is where part files go: a local directory or an S3 prefix.
type partStore interface {
	// create opens a new in-progress part file to be committed as name;
	// renamable allows closeForCommit to name it after all.
	create(name string, renamable bool) (partFile, error)
	// resume reopens the in-progress file st of this subtask, restored
	// from a checkpoint, at the length the checkpoint recorded.
	resume(st partState) (partFile, error)
	// commit makes the pre-committed file st of subtask sub visible. It
	// is idempotent: a restore re-commits what its checkpoint
	// pre-committed, which the failed attempt may have committed already.
	commit(sub int, st partState) error
	// commitInProgress commits the in-progress file st of another subtask
	// (one that no longer exists), at the length its checkpoint recorded.
	// Idempotent like commit.
	commitInProgress(sub int, st partState) error
	// cleanup deletes every uncommitted file of subtask sub but keep (the
	// resumed in-progress file, or nil).
	cleanup(sub int, keep *partState) error
}

// partFile is an in-progress part file.
type partFile interface {
	write(p []byte) error
	size() int64
	// persist makes everything written durable and returns the state to
	// resume the file from.
	persist() (partState, error)
	// closeForCommit closes the file and returns the state to commit it
	// from; a non-empty name names the file now (when it was created
	// renamable: the default policy names the file after the checkpoint
	// that closes it). The file is durable once durable returned nil
	// (durable is nil when it is already). After an error the file is
	// unusable unless alive says otherwise.
	closeForCommit(name string) (st partState, durable func() error, err error)
	alive() bool
	// discard closes the file without committing it: a restore deletes
	// it, or resumes it if a checkpoint holds it.
	discard() error
}

// partState is a part file in the sink's operator state: pre-committed
// (Checkpoint set), or in progress.
type partState struct {
	// Checkpoint is the checkpoint whose snapshot pre-committed the file:
	// its completion, or a later one's, commits it.
	Checkpoint int64 `json:"checkpoint,omitempty"`
	// Name is the committed file's name.
	Name string `json:"name"`
	// Tmp is the hidden local file: the .pending file of a pre-committed
	// file of the default policy, the in-progress file otherwise.
	Tmp string `json:"tmp,omitempty"`
	// Size is the file's length in bytes.
	Size int64 `json:"size,omitempty"`
	// Loc is the object of an S3 file, s3://bucket/key.
	Loc string `json:"loc,omitempty"`
	// Upload is the multipart upload ID of an S3 file ("" for an
	// in-progress file whose bytes are all in Tail).
	Upload string   `json:"upload,omitempty"`
	Parts  []s3Part `json:"parts,omitempty"`
	// Tail is the bytes of an in-progress S3 file not yet uploaded (less
	// than a part).
	Tail []byte `json:"tail,omitempty"`
	// Opened is when an in-progress file was opened (Unix ms), for
	// max-age.
	Opened int64 `json:"opened,omitempty"`
}

// sinkState is the one item of operator list state a subtask keeps.
type sinkState struct {
	Subtask    int         `json:"subtask"`
	Pending    []partState `json:"pending,omitempty"`
	InProgress *partState  `json:"in_progress,omitempty"`
}

func (f *FileSink) Open(ctx sdk.Context) error {
	loc, err := ctx.Config().String("path", "")
	if err != nil {
		return err
	}
	if loc == "" {
		return errors.New("file-sink: config path is required")
	}
	if f.roll, err = parseRoll(ctx.Config()); err != nil {
		return err
	}
	line, err := ctx.Config().String("line", "key-value")
	if err != nil {
		return fmt.Errorf("file-sink: %w", err)
	}
	switch line {
	case "key-value":
	case "value":
		f.valueOnly = true
	default:
		return fmt.Errorf(`file-sink: config "line": unknown line %q (want key-value or value)`, line)
	}
	f.legacy = f.roll.onCheckpoint && f.roll.maxSize == 0 && f.roll.maxAge == 0
	f.loc, f.subtask, f.attempt = loc, ctx.SubtaskIndex(), ctx.AttemptNumber()
	f.base = ctx.RestoredCheckpointID()
	if f.log = ctx.Logger(); f.log == nil {
		f.log = slog.Default()
	}
	if f.now == nil {
		f.now = time.Now
	}
	var run [4]byte
	_, _ = rand.Read(run[:])
	f.run = hex.EncodeToString(run[:])
	switch sc := blob.Scheme(loc); sc {
	case "":
		f.dir = blob.LocalPath(loc)
		if err := os.MkdirAll(f.dir, 0o755); err != nil {
			return fmt.Errorf("file-sink: %w", err)
		}
		f.store = &localStore{f: f}
	case "s3":
		s, err := f.openS3(loc)
		if err != nil {
			return err
		}
		if f.roll.maxSize > s3MaxParts*s3PartSize {
			return fmt.Errorf("file-sink: config roll.max-size: %d bytes is more than an S3 object of %d parts of %d bytes holds", f.roll.maxSize, s3MaxParts, s3PartSize)
		}
		f.store = s
	default:
		return fmt.Errorf("file-sink: config path %q: unsupported scheme %q (want a directory or s3://bucket/prefix)", loc, sc)
	}
	f.pending = ctx.ListState("pending")
	// Every subtask keeps exactly one item, so the round-robin split of
	// list state on restore hands each subtask its own item back at the same
	// parallelism, and the item of old subtask j to subtask j mod p when
	// rescaled.
	cleanup := []int{f.subtask}
	var resume *partState
	for _, it := range f.pending.Get() {
		st, err := parseState(it)
		if err != nil {
			return err
		}
		// The restored checkpoint completed, so what it pre-committed is due.
		for _, p := range st.Pending {
			if err := f.store.commit(st.Subtask, p); err != nil {
				return err
			}
		}
		if ip := st.InProgress; ip != nil {
			if st.Subtask == f.subtask && resume == nil {
				resume = ip
			} else {
				// A subtask that no longer exists: its records up to the
				// restored checkpoint are committed now.
				p := *ip
				p.Checkpoint = f.base
				if err := f.store.commitInProgress(st.Subtask, p); err != nil {
					return err
				}
			}
		}
		// Uncommitted files of a subtask that no longer exists are this
		// one's to clean up; a running subtask's are not.
		if st.Subtask != f.subtask && st.Subtask >= ctx.Parallelism() {
			cleanup = append(cleanup, st.Subtask)
		}
	}
	f.pending.Clear()
	if resume != nil {
		cur, err := f.store.resume(*resume)
		if err != nil {
			return err
		}
		f.cur, f.opened = cur, time.UnixMilli(resume.Opened)
	}
	for _, sub := range cleanup {
		keep := resume
		if sub != f.subtask {
			keep = nil
		}
		if err := f.store.cleanup(sub, keep); err != nil {
			return err
		}
	}
	return nil
}

// parseState decodes a state item: JSON, or the format of the default
// policy before rolling policies, "<subtask>:<checkpoint>,<checkpoint>,…".
func parseState(it []byte) (sinkState, error) {
	if len(it) == 0 || it[0] != '{' {
		sub, ids, err := parsePending(it)
		if err != nil {
			return sinkState{}, err
		}
		st := sinkState{Subtask: sub}
		for _, id := range ids {
			name := FinalName(sub, id)
			st.Pending = append(st.Pending, partState{Checkpoint: id, Name: name, Tmp: pendingName(name)})
		}
		return st, nil
	}
	var st sinkState
	err := json.Unmarshal(it, &st)
	ok := err == nil && st.Subtask >= 0
	for _, p := range st.Pending {
		ok = ok && p.Checkpoint > 0 && validPartState(p)
	}
	if st.InProgress != nil {
		ok = ok && validPartState(*st.InProgress)
	}
	if !ok {
		if len(it) > 200 {
			it = append(it[:200:200], "…"...)
		}
		return sinkState{}, fmt.Errorf("file-sink: corrupt pending state %q", it)
	}
	return st, nil
}

// validPartState refuses names that would leave the output directory.
func validPartState(p partState) bool {
	plain := func(s string) bool { return !strings.ContainsAny(s, `/\`) && s != "." && s != ".." }
	return p.Name != "" && plain(p.Name) && plain(p.Tmp) && p.Size >= 0
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

// FinalName is the visible name of a committed epoch (default policy).
func FinalName(subtask int, checkpointID int64) string {
	return fmt.Sprintf("part-%d-%d", subtask, checkpointID)
}

// RolledName is the visible name of the n-th part file (from 0) that
// subtask opened in checkpoint epoch epoch (the records after checkpoint
// epoch-1), with a rolling policy other than the default.
func RolledName(subtask int, epoch int64, n int) string {
	return fmt.Sprintf("part-%d-%d-%d", subtask, epoch, n)
}

// pendingName is the hidden name of a pre-committed local file of the
// default policy.
func pendingName(final string) string { return "." + final + ".pending" }

func (f *FileSink) ProcessRecord(r sdk.Record, _ sdk.Collector) error {
	if err := f.failure(); err != nil {
		return err
	}
	if f.cur != nil && f.roll.maxAge > 0 && f.now().Sub(f.opened) >= f.roll.maxAge {
		if err := f.rollOver(); err != nil {
			return err
		}
	}
	if f.cur == nil {
		epoch := f.base + 1
		name, renamable := FinalName(f.subtask, epoch), true
		if !f.legacy {
			name, renamable = RolledName(f.subtask, epoch, f.n), false
			f.n++
		}
		cur, err := f.store.create(name, renamable)
		if err != nil {
			return fmt.Errorf("file-sink: %w", err)
		}
		f.cur, f.opened = cur, f.now()
	}
	switch {
	case f.Format != nil:
		var err error
		if f.scratch, err = f.Format(f.scratch[:0], r); err != nil {
			return fmt.Errorf("file-sink: %w", err)
		}
		f.scratch = append(f.scratch, '\n')
	case f.valueOnly:
		f.scratch = append(append(f.scratch[:0], r.Value...), '\n')
	default:
		f.scratch = append(append(append(append(f.scratch[:0], r.Key...), ','), r.Value...), '\n')
	}
	if err := f.cur.write(f.scratch); err != nil {
		return fmt.Errorf("file-sink: %w", err)
	}
	if f.roll.maxSize > 0 && f.cur.size() >= f.roll.maxSize {
		return f.rollOver()
	}
	return nil
}

// rollOver closes the in-progress file between checkpoints: the next
// snapshot pre-commits it.
func (f *FileSink) rollOver() error {
	st, ok, err := f.closeCurrent("")
	if err != nil {
		return fmt.Errorf("file-sink: roll part file: %w", err)
	}
	if ok {
		f.files = append(f.files, st)
	}
	return nil
}

// closeCurrent closes the in-progress file for commit; ok is false for a
// file without bytes, which is dropped.
func (f *FileSink) closeCurrent(name string) (partState, bool, error) {
	if f.cur.size() == 0 {
		err := f.cur.discard()
		f.cur = nil
		return partState{}, false, err
	}
	st, durable, err := f.cur.closeForCommit(name)
	if err != nil {
		if !f.cur.alive() {
			f.cur = nil
		}
		return partState{}, false, err
	}
	f.cur = nil
	if durable != nil {
		f.unsynced = append(f.unsynced, durable)
	}
	return st, true, nil
}

// EndInput rolls the in-progress file at the next snapshot whatever the
// policy: the job's final checkpoint commits every record.
func (f *FileSink) EndInput(sdk.Collector) error {
	f.ended = true
	return nil
}

// SnapshotState is SnapshotStateAsync with its asynchronous part run
// before it returns.
func (f *FileSink) SnapshotState(id int64) error {
	finish, err := f.SnapshotStateAsync(id)
	if err == nil && finish != nil {
		err = finish()
	}
	return err
}

// SnapshotStateAsync pre-commits the files closed since the last snapshot
// and, when the policy rolls on checkpoints (or the file is too old, or
// the input ended), the in-progress file; otherwise the in-progress file's
// resumable state goes into the checkpoint.
//
// In a local directory the pre-commit's renames happen here and its
// fsyncs (of the files, then of the directory) in the returned function,
// which the subtask runs off its goroutine before it acknowledges the
// checkpoint: records flow while the disk syncs, and the checkpoint that
// names the files completes only once they are durable. The files of all
// sink subtasks of a TaskManager sync concurrently, which the file system
// commits together, and their directory's fsync is one for all of them
// (sharedDirSyncs).
func (f *FileSink) SnapshotStateAsync(id int64) (func() error, error) {
	if err := f.failure(); err != nil {
		return nil, err
	}
	var open *partState
	if f.cur != nil {
		if f.roll.onCheckpoint || f.ended || (f.roll.maxAge > 0 && f.now().Sub(f.opened) >= f.roll.maxAge) {
			name := ""
			if f.legacy {
				name = FinalName(f.subtask, id)
			}
			st, ok, err := f.closeCurrent(name)
			if err != nil {
				err = fmt.Errorf("file-sink: pre-commit checkpoint %d: %w", id, err)
				if f.cur == nil {
					// The file is given up (a local one whose sync or
					// rename failed); an S3 upload keeps its buffer and
					// retries at the next snapshot.
					f.lost = fmt.Errorf("%w (its records are in no file: the subtask restarts from the last completed checkpoint)", err)
				}
				return nil, err
			}
			if ok {
				f.files = append(f.files, st)
			}
		} else {
			st, err := f.cur.persist()
			if err != nil {
				return nil, fmt.Errorf("file-sink: checkpoint %d: persist the in-progress part file: %w", id, err)
			}
			st.Opened = f.opened.UnixMilli()
			open = &st
		}
	}
	for i := range f.files {
		if f.files[i].Checkpoint == 0 {
			f.files[i].Checkpoint = id
		}
	}
	f.base, f.n = id, 0
	item, err := json.Marshal(sinkState{Subtask: f.subtask, Pending: f.files, InProgress: open})
	if err != nil {
		return nil, fmt.Errorf("file-sink: checkpoint %d: %w", id, err)
	}
	f.pending.Update([][]byte{item})
	return f.syncAsync(id), nil
}

// syncAsync returns the asynchronous part of checkpoint id's pre-commit:
// it makes the files closed since the last snapshot durable, after the
// previous snapshot's part ended.
func (f *FileSink) syncAsync(id int64) func() error {
	durable, prev := f.unsynced, f.synced
	f.unsynced = nil
	if len(durable) == 0 && prev == nil {
		return nil
	}
	done := make(chan struct{})
	f.synced = done
	return func() error {
		defer close(done)
		if prev != nil {
			<-prev
		}
		if err := f.failure(); err != nil {
			return err
		}
		for _, d := range durable {
			if err := d(); err != nil {
				err = fmt.Errorf("file-sink: pre-commit checkpoint %d: %w", id, err)
				f.syncMu.Lock()
				f.syncErr = fmt.Errorf("%w (its records may be in no file: the subtask restarts from the last completed checkpoint)", err)
				f.syncMu.Unlock()
				return err
			}
		}
		return nil
	}
}

// failure is the error that fails every call once the sink lost records:
// lost, or the failure of an asynchronous pre-commit.
func (f *FileSink) failure() error {
	if f.lost != nil {
		return f.lost
	}
	f.syncMu.Lock()
	defer f.syncMu.Unlock()
	return f.syncErr
}

// NotifyCheckpointComplete commits every file pre-committed up to id;
// files of aborted checkpoints ride along with the next completed one. An
// error fails the subtask, and the restore re-commits from the
// checkpoint's state.
func (f *FileSink) NotifyCheckpointComplete(id int64) error {
	if err := f.failure(); err != nil {
		return err
	}
	var due, kept []partState
	for _, p := range f.files {
		if p.Checkpoint != 0 && p.Checkpoint <= id {
			due = append(due, p)
		} else {
			kept = append(kept, p)
		}
	}
	if len(due) == 0 {
		// Nothing to commit: a one-shot fault is kept for a real commit.
		return nil
	}
	if err := fault.Point(fault.SinkBeforeCommit); err != nil {
		return fmt.Errorf("file-sink: commit checkpoint %d: %w", id, err)
	}
	for i, p := range due {
		if err := f.store.commit(f.subtask, p); err != nil {
			// Files not committed stay due, so a later notification on
			// this instance still commits them.
			f.files = append(due[i:], kept...)
			return err
		}
	}
	f.files = kept
	return nil
}

// NotifyCheckpointAborted keeps pre-committed files for the next completed
// checkpoint; after a lost epoch it fails the subtask (the aborted
// checkpoint is the one that lost it).
func (f *FileSink) NotifyCheckpointAborted(int64) error { return f.failure() }

func (f *FileSink) Close() error {
	if f.cur == nil {
		return nil
	}
	// The in-progress file is not committed; a restore deletes it, or
	// resumes it when the restored checkpoint holds it.
	err := f.cur.discard()
	f.cur = nil
	return err
}

// localStore keeps part files in a local directory.
type localStore struct{ f *FileSink }

// inProgressName is unique per run: attempt numbers start over when a new
// JobManager leader recovers the job, while an old attempt may still run.
func (s *localStore) inProgressName() string {
	f := s.f
	name := fmt.Sprintf(".part-%d-inprogress-%d-%s-%d", f.subtask, f.attempt, f.run, f.seq)
	f.seq++
	return name
}

func (s *localStore) path(name string) string { return filepath.Join(s.f.dir, name) }

func (s *localStore) create(name string, _ bool) (partFile, error) {
	tmp := s.inProgressName()
	file, err := os.Create(s.path(tmp))
	if err != nil {
		return nil, err
	}
	return &localFile{s: s, tmp: tmp, name: name, file: file, w: bufio.NewWriterSize(file, 64<<10)}, nil
}

// localFile is a hidden in-progress file.
type localFile struct {
	s          *localStore
	tmp, name  string
	file       *os.File
	w          *bufio.Writer
	n          int64
	dirSynced  bool // the directory entry of tmp is durable
	closedDown bool
}

func (l *localFile) write(p []byte) error {
	n, err := l.w.Write(p)
	l.n += int64(n)
	return err
}

func (l *localFile) size() int64 { return l.n }
func (l *localFile) alive() bool { return !l.closedDown }

func (l *localFile) persist() (partState, error) {
	err := l.w.Flush()
	if err == nil {
		err = l.file.Sync()
	}
	if err == nil && !l.dirSynced {
		// The checkpoint names the file: its directory entry must last.
		if err = l.s.f.sync(); err == nil {
			l.dirSynced = true
		}
	}
	return partState{Name: l.name, Tmp: l.tmp, Size: l.n}, err
}

func (l *localFile) closeForCommit(name string) (partState, func() error, error) {
	l.closedDown = true
	if err := l.w.Flush(); err != nil {
		l.file.Close()
		return partState{}, nil, err
	}
	st := partState{Name: l.name, Tmp: l.tmp, Size: l.n}
	syncDir := !l.dirSynced
	if name != "" {
		// The default policy: the checkpoint will name the pending file; a
		// restore that finds the in-progress name instead would have lost
		// the epoch, hence the directory sync. Until the file and the
		// directory are synced no checkpoint naming them completes.
		l.name = name
		pending := pendingName(name)
		if err := os.Rename(l.s.path(l.tmp), l.s.path(pending)); err != nil {
			l.file.Close()
			return partState{}, nil, err
		}
		st, syncDir = partState{Name: name, Tmp: pending, Size: l.n}, true
	}
	// Rolled by a rolling policy, it keeps its hidden name until the
	// commit, so a restore from an earlier checkpoint still finds it.
	return st, func() error {
		err := l.file.Sync()
		if cerr := l.file.Close(); err == nil {
			err = cerr
		}
		if err == nil && syncDir {
			err = l.s.f.sync()
		}
		return err
	}, nil
}

func (l *localFile) discard() error {
	if l.closedDown {
		return nil
	}
	l.closedDown = true
	return l.file.Close()
}

func (s *localStore) resume(st partState) (partFile, error) {
	file, err := s.openAt(st)
	if err != nil {
		return nil, err
	}
	if _, err := file.Seek(0, io.SeekEnd); err != nil {
		file.Close()
		return nil, fmt.Errorf("file-sink: resume %s: %w", st.Tmp, err)
	}
	return &localFile{s: s, tmp: st.Tmp, name: st.Name, file: file, w: bufio.NewWriterSize(file, 64<<10), n: st.Size, dirSynced: true}, nil
}

// openAt opens the in-progress file st truncated to the length its
// checkpoint recorded: whatever the failed attempt wrote after it is
// replayed.
func (s *localStore) openAt(st partState) (*os.File, error) {
	file, err := os.OpenFile(s.path(st.Tmp), os.O_RDWR, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("file-sink: the in-progress part file %s of %s is gone: its records are lost: %w", st.Tmp, s.f.dir, err)
		}
		return nil, fmt.Errorf("file-sink: %w", err)
	}
	fi, err := file.Stat()
	if err == nil && fi.Size() < st.Size {
		err = fmt.Errorf("the in-progress part file %s holds %d bytes, its checkpoint recorded %d: records are lost", st.Tmp, fi.Size(), st.Size)
	}
	if err == nil {
		err = file.Truncate(st.Size)
	}
	if err != nil {
		file.Close()
		return nil, fmt.Errorf("file-sink: %w", err)
	}
	return file, nil
}

func (s *localStore) commitInProgress(sub int, st partState) error {
	if _, err := os.Stat(s.path(st.Tmp)); errors.Is(err, fs.ErrNotExist) {
		// Committed by an earlier attempt of this restore, or lost.
		return s.commit(sub, st)
	}
	file, err := s.openAt(st)
	if err != nil {
		return err
	}
	err = file.Sync()
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("file-sink: commit in-progress part file %s: %w", st.Tmp, err)
	}
	return s.commit(sub, st)
}

// commit renames the hidden file st.Tmp to st.Name and syncs the directory.
func (s *localStore) commit(sub int, st partState) error {
	f, id := s.f, st.Checkpoint
	pending, final := st.Tmp, st.Name
	err := os.Rename(s.path(pending), s.path(final))
	switch {
	case err == nil:
		// The worst place to die: the file is visible but its rename not
		// yet durable, and the later files of the same notification are
		// still pending. The restore must take the committed file as done,
		// sync again and commit the rest.
		if err := fault.Point(fault.SinkMidCommit); err != nil {
			return fmt.Errorf("file-sink: commit checkpoint %d: %w", id, err)
		}
	case errors.Is(err, fs.ErrNotExist):
		if _, serr := os.Stat(s.path(final)); errors.Is(serr, fs.ErrNotExist) {
			return fmt.Errorf("file-sink: commit checkpoint %d: the epoch's records are lost: neither the pending file %s nor the committed file %s exists in %s: %w",
				id, pending, final, f.dir, fs.ErrNotExist)
		} else if serr != nil {
			return fmt.Errorf("file-sink: commit checkpoint %d: %w", id, serr)
		}
		f.log.Info("file-sink: epoch already committed; re-commit only syncs the directory",
			"checkpoint_id", id, "subtask", sub, "file", final)
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

// cleanup deletes the hidden files of subtask sub once the restored files
// are committed: files after the restored checkpoint, never to be
// committed, but keep.
func (s *localStore) cleanup(sub int, keep *partState) error {
	entries, err := os.ReadDir(s.f.dir)
	if err != nil {
		return fmt.Errorf("file-sink: %w", err)
	}
	prefix := fmt.Sprintf(".part-%d-", sub)
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) || (keep != nil && e.Name() == keep.Tmp) {
			continue
		}
		if err := os.Remove(s.path(e.Name())); err != nil {
			return fmt.Errorf("file-sink: abort %s: %w", e.Name(), err)
		}
	}
	return nil
}

// sharedDirSyncs shares the output directory's fsyncs among the sink
// subtasks of this process (a TaskManager), which pre-commit into one
// directory at the same checkpoint: each subtask's renames are durable
// when its call returns, yet one fsync serves every subtask that asked
// before it began.
var sharedDirSyncs = dirsync.New(syncDir)

// sync makes the renames done in the output directory durable.
func (f *FileSink) sync() error {
	if f.syncDir != nil {
		return f.syncDir(f.dir)
	}
	return sharedDirSyncs.Sync(f.dir)
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
