package state

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/proto"

	"github.com/weirproject/weir/internal/fault"
	"github.com/weirproject/weir/internal/storage"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// StoreError is a failure of a backend's store (a disk error): the state
// it holds can no longer be read or written. sdk state methods return no
// errors, and an operator must not go on without its state, so the state
// they hand out panic with a *StoreError; the subtask recovers it and
// fails with it as the cause. Snapshots return it as their error.
type StoreError struct{ Err error }

func (e *StoreError) Error() string { return e.Err.Error() }
func (e *StoreError) Unwrap() error { return e.Err }

// restorer reads a subtask's state back from checkpoint storage, through
// the backend's file system. The RestoreDownload fault point fires
// between two files it reads.
type restorer struct {
	files storage.Files
	fs    vfs.FS
	read  int // files read so far
	// local finds a file's local recovery copy (nil: none kept).
	local func(h *weirv1.StateHandle) (string, bool)
	// localBytes and remoteBytes count what download took from the local
	// copy and from checkpoint storage.
	localBytes, remoteBytes int64
}

func newRestorer(fs vfs.FS) *restorer {
	if fs == nil {
		fs = vfs.Default
	}
	return &restorer{files: storage.Files{FS: fs}, fs: fs}
}

// next is called before each file is read.
func (r *restorer) next(path string) error {
	r.read++
	if err := fault.Point(fault.RestoreDownload); err != nil {
		return fmt.Errorf("state: restore %s: %w", path, err)
	}
	return nil
}

// readHandle reads h (inline, or a file) into m.
func (r *restorer) readHandle(h *weirv1.StateHandle, m proto.Message) error {
	if h.GetPath() != "" {
		if err := r.next(h.GetPath()); err != nil {
			return err
		}
	}
	return r.files.ReadHandle(h, m)
}

// download copies a native snapshot's files into a fresh local
// directory dir.
func (r *restorer) download(st *weirv1.SubtaskState, dir string) error {
	if err := r.fs.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("state: download: %w", err)
	}
	for _, h := range st.GetSharedFiles() {
		dst := r.fs.PathJoin(dir, localName(h))
		if r.local != nil {
			if src, ok := r.local(h); ok && r.copyLocal(src, dst) == nil {
				r.localBytes += h.GetSize()
				continue
			}
		}
		if err := r.next(h.GetPath()); err != nil {
			return err
		}
		n, err := r.files.Download(h.GetPath(), dst)
		if err != nil {
			return fmt.Errorf("state: download %s: %w", h.GetPath(), err)
		}
		r.remoteBytes += n
	}
	return nil
}

// copyLocal takes a file from the local recovery copy: SSTs and blob
// files, which never change, by hard link; the rest (the manifest, which
// the store appends to) by copy.
func (r *restorer) copyLocal(src, dst string) error {
	if isImmutable(src) {
		if err := r.fs.Link(src, dst); err == nil {
			return nil
		}
	}
	_, err := storage.Files{FS: r.fs}.Download(src, dst)
	return err
}
