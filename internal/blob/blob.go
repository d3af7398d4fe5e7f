// Package blob is checkpoint storage: the objects under a checkpoint
// directory, on a local file system or in an S3-compatible object store.
// Objects are named by locations: a path ("/checkpoints/job/chk-1/x") or
// a URL ("s3://bucket/prefix/job/chk-1/x"). A location is what state
// handles, _metadata pointers and savepoint paths store, so a checkpoint
// written to a bucket restores from that bucket wherever it is read.
//
// Object stores have no directories and no rename: everything here is
// expressed as whole-object puts (a put is atomic: a reader sees the old
// object, none, or all of the new one), a create that fails on an
// existing object, gets, deletes and listing by prefix. The local file
// system implements the same with temporary files, fsync and rename.
package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// ErrExists is PutIfAbsent's error for an object that already exists.
var ErrExists = errors.New("blob: object already exists")

// Info describes one object.
type Info struct {
	Location string
	Size     int64
	Modified time.Time
}

// Store is one kind of storage. Missing objects are errors that match
// fs.ErrNotExist.
type Store interface {
	// Put writes the object at loc from r, which holds exactly size
	// bytes, replacing any object there. It is durable on return.
	Put(ctx context.Context, loc string, r io.Reader, size int64) error
	// PutIfAbsent writes data at loc unless an object is there already:
	// ErrExists then, and the object is left as it was.
	PutIfAbsent(ctx context.Context, loc string, data []byte) error
	// Get opens the object at loc for reading, streamed.
	Get(ctx context.Context, loc string) (io.ReadCloser, error)
	Stat(ctx context.Context, loc string) (Info, error)
	// Delete removes the object at loc; a missing one is no error.
	Delete(ctx context.Context, loc string) error
	// List yields every object under the directory dir, at any depth.
	List(ctx context.Context, dir string) iter.Seq2[Info, error]
	// Mkdir prepares the directory dir for puts (object stores need
	// nothing).
	Mkdir(ctx context.Context, dir string) error
}

// Scheme is the scheme of loc: "s3", or "" for a local path (file://
// URLs are local paths too).
func Scheme(loc string) string {
	i := strings.Index(loc, "://")
	if i <= 0 || strings.ContainsAny(loc[:i], "/\\") {
		return ""
	}
	if s := strings.ToLower(loc[:i]); s != "file" {
		return s
	}
	return ""
}

// IsLocal says whether loc is on the local file system.
func IsLocal(loc string) bool { return Scheme(loc) == "" }

// LocalPath is loc as a file system path (loc without file://).
func LocalPath(loc string) string {
	if rest, ok := strings.CutPrefix(loc, "file://"); ok {
		return rest
	}
	return loc
}

// Join joins elements to a location the way filepath.Join does for
// paths, keeping a URL's scheme and bucket.
func Join(loc string, elem ...string) string {
	s := Scheme(loc)
	if s == "" {
		return filepath.Join(append([]string{LocalPath(loc)}, elem...)...)
	}
	rest := strings.TrimPrefix(loc[len(s):], "://")
	return s + "://" + strings.TrimPrefix(path.Join(append([]string{rest}, elem...)...), "/")
}

// Dir is loc's parent.
func Dir(loc string) string {
	s := Scheme(loc)
	if s == "" {
		return filepath.Dir(LocalPath(loc))
	}
	rest := strings.TrimPrefix(loc[len(s):], "://")
	return s + "://" + path.Dir(rest)
}

// Base is loc's last element.
func Base(loc string) string {
	if Scheme(loc) == "" {
		return filepath.Base(LocalPath(loc))
	}
	return path.Base(loc)
}

// Stores opens locations: local paths on the file system, s3:// ones in
// the S3 store configured. A zero Stores serves local paths only.
type Stores struct {
	// Local serves paths; nil is the operating system's file system.
	Local Store
	// S3 serves s3:// locations; nil refuses them.
	S3 Store
	// S3Config is the configuration S3 was made from, for code that
	// talks to the same store through minio-go's lower-level API.
	S3Config *S3Config
}

// Open returns the store of loc, or an error naming an unsupported scheme.
// It reads only the field loc's scheme needs: tests swap Default's S3
// store while others open local paths.
func (s *Stores) Open(loc string) (Store, error) {
	switch sc := Scheme(loc); sc {
	case "":
		if s.Local == nil {
			return Local{}, nil
		}
		return s.Local, nil
	case "s3":
		if s.S3 == nil {
			return nil, fmt.Errorf("blob: %s: S3 storage is not configured", loc)
		}
		return s.S3, nil
	default:
		return nil, fmt.Errorf("blob: %s: unsupported storage scheme %q (want a local path or s3://bucket/prefix)", loc, sc)
	}
}

// Default is the process's stores: daemons configure S3 on it at start
// from their flags and the environment, before any checkpoint is read or
// written. Everything that follows a location found in a state handle
// or a pointer goes through it.
var Default = &Stores{}

// Open returns the store of loc from Default.
func Open(loc string) (Store, error) { return Default.Open(loc) }

// ReadAll reads the whole object at loc.
func ReadAll(ctx context.Context, loc string) ([]byte, error) {
	st, err := Open(loc)
	if err != nil {
		return nil, err
	}
	r, err := st.Get(ctx, loc)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(r)
	if cerr := r.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("blob: read %s: %w", loc, err)
	}
	return data, nil
}

// Exists says whether an object is at loc.
func Exists(ctx context.Context, loc string) (bool, error) {
	st, err := Open(loc)
	if err != nil {
		return false, err
	}
	_, err = st.Stat(ctx, loc)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// DeleteAll deletes every object under dir.
func DeleteAll(ctx context.Context, dir string) error {
	st, err := Open(dir)
	if err != nil {
		return err
	}
	return DeleteAllIn(ctx, st, dir)
}

// DeleteAllIn deletes every object of st under dir.
func DeleteAllIn(ctx context.Context, st Store, dir string) error {
	if l, ok := st.(interface {
		RemoveAll(ctx context.Context, dir string) error
	}); ok {
		return l.RemoveAll(ctx, dir)
	}
	var errs []error
	for info, err := range st.List(ctx, dir) {
		if err != nil {
			return err
		}
		if err := st.Delete(ctx, info.Location); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Check fails unless loc's storage can be used: its scheme is supported
// and configured, and an object store's bucket exists and answers to the
// credentials (the error names the endpoint, the bucket and the server's
// error code). A local directory is made if missing.
func Check(ctx context.Context, loc string) error {
	st, err := Open(loc)
	if err != nil {
		return err
	}
	if c, ok := st.(interface {
		CheckBucket(ctx context.Context, loc string) error
	}); ok {
		return c.CheckBucket(ctx, loc)
	}
	return st.Mkdir(ctx, loc)
}
