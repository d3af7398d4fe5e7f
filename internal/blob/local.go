package blob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Local is a store on a file system: the operating system's when FS is
// nil. Tests give one that injects errors (Pebble's vfs/errorfs), so
// every write and read of checkpoint state has a seam for disk failures.
type Local struct {
	FS vfs.FS
}

func (l Local) fs() vfs.FS {
	if l.FS == nil {
		return vfs.Default
	}
	return l.FS
}

// tmpSeq names PutIfAbsent's temporary files apart: writers racing to
// create one object never share one. Put's is the object's name with
// .tmp, so a crashed writer's leftover is replaced by the next write.
var tmpSeq atomic.Uint64

// Put writes through a temporary file, fsyncs it and renames it into
// place, then fsyncs the directory: without that a power loss could lose
// a _metadata that etcd already points at. The directory must exist
// (Mkdir): a checkpoint directory an abort removed does not come back
// through a late write.
func (l Local) Put(_ context.Context, loc string, r io.Reader, size int64) error {
	p := LocalPath(loc)
	tmp, err := l.writeTemp(p, p+".tmp", r, size)
	if err != nil {
		return err
	}
	if err := l.fs().Rename(tmp, p); err != nil {
		l.fs().Remove(tmp)
		return err
	}
	return syncDir(l.fs(), filepath.Dir(p))
}

// PutIfAbsent links a fully written temporary file to loc: the link fails
// if loc exists, so the object appears whole and only once.
func (l Local) PutIfAbsent(_ context.Context, loc string, data []byte) error {
	p := LocalPath(loc)
	tmp, err := l.writeTemp(p, p+"."+strconv.FormatUint(tmpSeq.Add(1), 36)+".tmp", bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return err
	}
	defer l.fs().Remove(tmp)
	if err := l.fs().Link(tmp, p); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%w: %s", ErrExists, p)
		}
		// A file system without hard links (some network and FUSE
		// ones): refuse an existing object, then rename, which is
		// atomic but would replace one created in between; the
		// JobManager's checkpoint IDs are unique, so no one is.
		if _, serr := l.fs().Stat(p); serr == nil {
			return fmt.Errorf("%w: %s", ErrExists, p)
		}
		if rerr := l.fs().Rename(tmp, p); rerr != nil {
			return fmt.Errorf("blob: create %s: link: %v; rename: %w", p, err, rerr)
		}
	}
	return syncDir(l.fs(), filepath.Dir(p))
}

// Reserve creates loc empty and makes its name durable: the directory
// is synced, and so is its parent, which holds the directory's own name
// (freshly made by Mkdir). Fill then needs a single fsync, of the file:
// the directory syncs, each as slow as the file's, run while a
// checkpoint's tasks snapshot instead of after its last ack. Until Fill
// returns, the object is empty or partial: readers of a reserved object
// must recognise one that is cut short (a _metadata's trailer does).
func (l Local) Reserve(_ context.Context, loc string) error {
	fsys, p := l.fs(), LocalPath(loc)
	if _, err := fsys.Stat(p); err == nil {
		return fmt.Errorf("%w: %s", ErrExists, p)
	}
	f, err := fsys.Create(p, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	dir := filepath.Dir(p)
	if err := syncDir(fsys, dir); err != nil {
		return err
	}
	return syncDir(fsys, filepath.Dir(dir))
}

// Fill writes data into the object Reserve created and syncs it. An
// object that is not empty was filled already and is left as it was:
// ErrExists, as PutIfAbsent's.
func (l Local) Fill(_ context.Context, loc string, data []byte) error {
	fsys, p := l.fs(), LocalPath(loc)
	if _, err := fsys.Stat(p); err != nil {
		return err // OpenReadWrite would create it: no reservation
	}
	f, err := fsys.OpenReadWrite(p, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err == nil && fi.Size() != 0 {
		err = fmt.Errorf("%w: %s", ErrExists, p)
	}
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		// The size is data the file needs to be read back, so fdatasync
		// writes it too; the name is durable since Reserve.
		err = f.SyncData()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeTemp writes size bytes of r to the fsynced temporary file tmp
// beside p and returns its name.
func (l Local) writeTemp(p, tmp string, r io.Reader, size int64) (string, error) {
	fsys := l.fs()
	f, err := fsys.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return "", err
	}
	n, err := io.Copy(f, r)
	if err == nil && n != size {
		err = fmt.Errorf("blob: %s: wrote %d bytes, want %d", p, n, size)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fsys.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

func (l Local) Get(_ context.Context, loc string) (io.ReadCloser, error) {
	return l.fs().Open(LocalPath(loc))
}

func (l Local) Stat(_ context.Context, loc string) (Info, error) {
	fi, err := l.fs().Stat(LocalPath(loc))
	if err != nil {
		return Info{}, err
	}
	return Info{Location: loc, Size: fi.Size(), Modified: fi.ModTime()}, nil
}

func (l Local) Delete(_ context.Context, loc string) error {
	if err := l.fs().Remove(LocalPath(loc)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func (l Local) Mkdir(_ context.Context, dir string) error {
	return l.fs().MkdirAll(LocalPath(dir), 0o755)
}

// List walks dir depth first, in name order; a missing dir holds nothing.
func (l Local) List(_ context.Context, dir string) iter.Seq2[Info, error] {
	return func(yield func(Info, error) bool) {
		l.walk(LocalPath(dir), yield)
	}
}

func (l Local) walk(dir string, yield func(Info, error) bool) bool {
	fsys := l.fs()
	names, err := fsys.List(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	if err != nil {
		return yield(Info{}, err)
	}
	slices.Sort(names)
	for _, n := range names {
		p := filepath.Join(dir, n)
		fi, err := fsys.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted meanwhile
		}
		if err != nil {
			return yield(Info{}, err)
		}
		if fi.IsDir() {
			if !l.walk(p, yield) {
				return false
			}
			continue
		}
		if !yield(Info{Location: p, Size: fi.Size(), Modified: fi.ModTime()}, nil) {
			return false
		}
	}
	return true
}

// RemoveAll deletes the directory dir itself with everything in it.
func (l Local) RemoveAll(_ context.Context, dir string) error {
	return l.fs().RemoveAll(LocalPath(dir))
}

func syncDir(fsys vfs.FS, dir string) error {
	d, err := fsys.OpenDir(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return d.Close()
}
