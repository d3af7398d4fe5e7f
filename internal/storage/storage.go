// Package storage lays out checkpoints in the checkpoint directory every
// process reaches (a shared file system, or an S3 bucket and prefix):
// <dir>/<job-id>/chk-<n>/_metadata plus the state files the subtasks
// wrote next to it, and <dir>/<job-id>/shared/ for incremental files.
// Locations are blob locations: paths or s3:// URLs.
package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/proto"

	"github.com/weirproject/weir/internal/blob"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// MetadataFile is the name of a checkpoint's metadata file.
const MetadataFile = "_metadata"

// metadataVersion is bumped whenever CheckpointMetadata changes incompatibly.
const metadataVersion = 1

// ErrCorruptMetadata is returned for a _metadata file that cannot be used.
var ErrCorruptMetadata = errors.New("storage: corrupt checkpoint metadata")

// Storage is a checkpoint directory.
type Storage struct {
	Dir string
}

// JobDir is where every checkpoint of a job lives.
func (s Storage) JobDir(jobID string) string { return blob.Join(s.Dir, jobID) }

// SharedDir holds a job's incremental files, shared by checkpoints.
func (s Storage) SharedDir(jobID string) string { return blob.Join(s.JobDir(jobID), "shared") }

// CheckpointDir is the exclusive directory of checkpoint id.
func (s Storage) CheckpointDir(jobID string, id int64) string {
	return blob.Join(s.JobDir(jobID), "chk-"+strconv.FormatInt(id, 10))
}

// InitLocation creates the directory checkpoint id writes into (a
// no-op in an object store).
func (s Storage) InitLocation(jobID string, id int64) (string, error) {
	dir := s.CheckpointDir(jobID, id)
	st, err := blob.Open(dir)
	if err == nil {
		err = st.Mkdir(context.Background(), dir)
	}
	if err != nil {
		return "", fmt.Errorf("storage: init location of checkpoint %d: %w", id, err)
	}
	return dir, nil
}

// HighestCheckpointID returns the largest n of the job's chk-<n>
// directories, so a restarted standalone JobManager never reuses a
// checkpoint ID.
func (s Storage) HighestCheckpointID(jobID string) (int64, error) {
	dir := s.JobDir(jobID)
	if blob.IsLocal(dir) {
		// Directories, empty ones too.
		entries, err := os.ReadDir(blob.LocalPath(dir))
		if errors.Is(err, os.ErrNotExist) {
			return 0, nil
		}
		if err != nil {
			return 0, fmt.Errorf("storage: list checkpoints of job %s: %w", jobID, err)
		}
		var highest int64
		for _, e := range entries {
			highest = max(highest, checkpointID(e.Name()))
		}
		return highest, nil
	}
	st, err := blob.Open(dir)
	if err != nil {
		return 0, err
	}
	var highest int64
	for info, err := range st.List(context.Background(), dir) {
		if err != nil {
			return 0, fmt.Errorf("storage: list checkpoints of job %s: %w", jobID, err)
		}
		// The first element below the job directory.
		first, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(info.Location, dir), "/"), "/")
		highest = max(highest, checkpointID(first))
	}
	return highest, nil
}

// checkpointID is n of a chk-<n> name, 0 for any other name.
func checkpointID(name string) int64 {
	n, ok := strings.CutPrefix(name, "chk-")
	if !ok {
		return 0
	}
	id, err := strconv.ParseInt(n, 10, 64)
	if err != nil || id < 0 {
		return 0
	}
	return id
}

// A _metadata file is the marshalled CheckpointMetadata followed by a
// trailer: the CRC-32C of the message and metadataMagic. Protobuf has no end
// marker, so without the trailer a file cut short at a field boundary would
// decode as a valid checkpoint with fewer subtasks.
const metadataMagic = "WEIRMETA"

const metadataTrailerSize = 4 + len(metadataMagic)

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// WriteMetadata durably writes a checkpoint's metadata into dir and returns
// its location. It appears atomically, so a reader never sees half of it,
// and only once: a _metadata already there is never overwritten.
func WriteMetadata(dir string, md *weirv1.CheckpointMetadata) (string, error) {
	return writeMetadata(dir, md, false)
}

// reserver is a store where naming an object costs as much as writing
// it: the local file system, whose directory entries need an fsync of
// the directory each.
type reserver interface {
	Reserve(ctx context.Context, loc string) error
	Fill(ctx context.Context, loc string, data []byte) error
}

// ReserveMetadata prepares dir for WriteReservedMetadata, which then
// costs one fsync: on a local file system it creates an empty _metadata
// and makes its name and dir's durable. Call it while the checkpoint's
// tasks snapshot. Object stores need nothing.
//
// Durability is as WriteMetadata's: the file is complete and synced, and
// both names synced, before WriteReservedMetadata returns; until then it
// is empty or partial, which ReadMetadata refuses (the trailer), so a
// crash in between leaves a failed checkpoint's directory, as today a
// crash before the rename does.
func ReserveMetadata(dir string) error {
	path := blob.Join(dir, MetadataFile)
	st, err := blob.Open(path)
	if err == nil {
		if r, ok := st.(reserver); ok {
			err = r.Reserve(context.Background(), path)
		}
	}
	if err != nil {
		return fmt.Errorf("storage: reserve metadata in %s: %w", dir, err)
	}
	return nil
}

// WriteReservedMetadata is WriteMetadata into a dir ReserveMetadata
// prepared. A _metadata already written there is never overwritten.
func WriteReservedMetadata(dir string, md *weirv1.CheckpointMetadata) (string, error) {
	return writeMetadata(dir, md, true)
}

func writeMetadata(dir string, md *weirv1.CheckpointMetadata, reserved bool) (string, error) {
	md.Version = metadataVersion
	path := blob.Join(dir, MetadataFile)
	data, err := marshalMetadata(md)
	var st blob.Store
	if err == nil {
		st, err = blob.Open(path)
	}
	if err == nil {
		if r, ok := st.(reserver); ok && reserved {
			err = r.Fill(context.Background(), path, data)
		} else {
			err = st.PutIfAbsent(context.Background(), path, data)
		}
	}
	if err != nil {
		return "", fmt.Errorf("storage: write metadata of checkpoint %d: %w", md.GetCheckpointId(), err)
	}
	return path, nil
}

// marshalMetadata encodes md with its trailer.
func marshalMetadata(md *weirv1.CheckpointMetadata) ([]byte, error) {
	data, err := proto.Marshal(md)
	if err != nil {
		return nil, err
	}
	data = binary.BigEndian.AppendUint32(data, crc32.Checksum(data, crc32c))
	return append(data, metadataMagic...), nil
}

// MetadataLocation is the _metadata of a checkpoint given as its
// directory or as the _metadata itself.
func MetadataLocation(path string) string {
	if blob.Base(path) == MetadataFile {
		return path
	}
	return blob.Join(path, MetadataFile)
}

// ReadMetadata reads a _metadata file, or a checkpoint directory holding one.
func ReadMetadata(path string) (*weirv1.CheckpointMetadata, error) {
	path = MetadataLocation(path)
	data, err := blob.ReadAll(context.Background(), path)
	if err != nil {
		return nil, fmt.Errorf("storage: read metadata: %w", err)
	}
	md, err := unmarshalMetadata(path, data)
	if err != nil {
		return nil, err
	}
	dir := strings.TrimSuffix(path, "/"+MetadataFile)
	if blob.IsLocal(dir) {
		// Handles name files absolutely: a relative location read in
		// one working directory must not become one another reads.
		if abs, err := filepath.Abs(dir); err == nil {
			dir = abs
		}
	}
	relocate(md, dir)
	return md, nil
}

// relocate reads a moved savepoint's files where it now is. A savepoint
// keeps every file in its own directory and references none elsewhere (no
// shared files), so each file is the one of the same name beside its
// _metadata, wherever the handles say it was written: a savepoint copied
// to another directory, another cluster or another bucket restores
// (Flink's relocatable savepoints). Checkpoints are left as they are:
// incremental ones reference files outside their directory.
func relocate(md *weirv1.CheckpointMetadata, dir string) {
	switch md.GetType() {
	case weirv1.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT, weirv1.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT_SUSPEND,
		weirv1.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT_TERMINATE:
	default:
		return
	}
	for _, st := range md.GetSubtasks() {
		for _, h := range []*weirv1.StateHandle{st.GetKeyedState(), st.GetOperatorState(), st.GetChannelState()} {
			p := h.GetPath()
			i := strings.LastIndex(p, "/")
			if p == "" || h.GetShared() || i < 0 || p[:i] == dir {
				continue
			}
			h.Path = dir + p[i:]
		}
	}
}

// unmarshalMetadata decodes what marshalMetadata wrote; path names the
// file in errors. Anything else is ErrCorruptMetadata: the file may be
// cut short, overwritten or not a _metadata at all.
func unmarshalMetadata(path string, data []byte) (*weirv1.CheckpointMetadata, error) {
	n := len(data) - metadataTrailerSize
	if n < 0 || string(data[n+4:]) != metadataMagic {
		return nil, fmt.Errorf("%w: %s: truncated or not a metadata file", ErrCorruptMetadata, path)
	}
	if sum := binary.BigEndian.Uint32(data[n:]); sum != crc32.Checksum(data[:n], crc32c) {
		return nil, fmt.Errorf("%w: %s: checksum mismatch", ErrCorruptMetadata, path)
	}
	md := &weirv1.CheckpointMetadata{}
	if err := proto.Unmarshal(data[:n], md); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorruptMetadata, path, err)
	}
	if md.GetVersion() != metadataVersion || md.GetCheckpointId() <= 0 {
		return nil, fmt.Errorf("%w: %s: version %d, checkpoint %d", ErrCorruptMetadata, path, md.GetVersion(), md.GetCheckpointId())
	}
	return md, nil
}

// Files reads and writes state files: local paths through a file
// system (the operating system's when FS is nil; tests give one that
// injects errors, Pebble's vfs/errorfs, so every write and read of
// checkpoint state has a seam for disk failures), other locations in
// their object store.
type Files struct {
	FS vfs.FS
}

func (f Files) fs() vfs.FS {
	if f.FS == nil {
		return vfs.Default
	}
	return f.FS
}

// Store is the store of loc.
func (f Files) Store(loc string) (blob.Store, error) {
	if blob.IsLocal(loc) {
		return blob.Local{FS: f.FS}, nil
	}
	return blob.Open(loc)
}

// Mkdir makes the directory dir, whose parent must exist: a checkpoint
// directory an abort removed is not made again by a late writer (object
// stores have no directories, and the orphan clean-up deletes what late
// writers leave there).
func (f Files) Mkdir(dir string) error {
	if !blob.IsLocal(dir) {
		return nil
	}
	dir = blob.LocalPath(dir)
	if f.FS == nil || f.FS == vfs.Default {
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		return nil
	}
	// vfs.FS has no Mkdir.
	if _, err := f.FS.Stat(filepath.Dir(dir)); err != nil {
		return err
	}
	return f.FS.MkdirAll(dir, 0o755)
}

// Delete removes the object at loc; a missing one is no error.
func (f Files) Delete(loc string) error {
	st, err := f.Store(loc)
	if err == nil {
		err = st.Delete(context.Background(), loc)
	}
	return err
}

// MkdirAll makes dir and its parents (object stores need nothing).
func (f Files) MkdirAll(dir string) error {
	st, err := f.Store(dir)
	if err != nil {
		return err
	}
	return st.Mkdir(context.Background(), dir)
}

// Upload copies the local file src to dst, streamed, and returns its size.
func (f Files) Upload(src, dst string) (int64, error) {
	in, err := f.fs().Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return 0, err
	}
	st, err := f.Store(dst)
	if err != nil {
		return 0, err
	}
	if err := st.Put(context.Background(), dst, in, fi.Size()); err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// Download copies src to the local file dst, streamed, through a
// temporary file renamed into place.
func (f Files) Download(src, dst string) (n int64, err error) {
	st, err := f.Store(src)
	if err != nil {
		return 0, err
	}
	in, err := st.Get(context.Background(), src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	fsys := f.fs()
	tmp := dst + ".tmp"
	out, err := fsys.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return 0, err
	}
	defer func() {
		if err != nil {
			fsys.Remove(tmp)
		}
	}()
	n, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	err = errors.Join(err, out.Close())
	if err == nil {
		err = fsys.Rename(tmp, dst)
	}
	if err != nil {
		return 0, err
	}
	return n, nil
}

// WriteProto writes m to path through a temporary file, fsyncs it and renames
// it into place. It returns the number of bytes written.
func WriteProto(path string, m proto.Message) (int64, error) { return Files{}.WriteProto(path, m) }

// WriteProto is the package's WriteProto through f's file system.
func (f Files) WriteProto(path string, m proto.Message) (int64, error) {
	data, err := proto.Marshal(m)
	if err != nil {
		return 0, err
	}
	if err := f.writeFileAtomic(path, data); err != nil {
		return 0, err
	}
	return int64(len(data)), nil
}

// DefaultInlineThreshold is Flink's default state.storage.fs.memory-threshold:
// below it, a file's create, write and fsync cost more than its bytes do in
// the acknowledgement and the _metadata file, which is fsynced anyway.
const DefaultInlineThreshold = 20 << 10

// WriteHandle marshals m and returns a handle carrying it inline when it is
// smaller than inlineThreshold bytes (0 never inlines); otherwise it writes
// it to path as WriteProto does and returns a handle to the file.
func WriteHandle(path string, m proto.Message, inlineThreshold int) (*weirv1.StateHandle, error) {
	return Files{}.WriteHandle(path, m, inlineThreshold)
}

// WriteHandle is the package's WriteHandle through f's file system.
func (f Files) WriteHandle(path string, m proto.Message, inlineThreshold int) (*weirv1.StateHandle, error) {
	data, err := proto.Marshal(m)
	if err != nil {
		return nil, err
	}
	// An empty message would make an inline handle that looks like none.
	if len(data) > 0 && len(data) < inlineThreshold {
		return &weirv1.StateHandle{InlineData: data, Size: int64(len(data))}, nil
	}
	if err := f.writeFileAtomic(path, data); err != nil {
		return nil, err
	}
	return &weirv1.StateHandle{Path: path, Size: int64(len(data))}, nil
}

// HasState reports whether h holds state, inline or in a file.
func HasState(h *weirv1.StateHandle) bool {
	return h.GetPath() != "" || len(h.GetInlineData()) > 0
}

// ReadHandle reads what WriteHandle or WriteProto wrote into m, from the
// handle's inline bytes or its file.
func ReadHandle(h *weirv1.StateHandle, m proto.Message) error { return Files{}.ReadHandle(h, m) }

// ReadHandle is the package's ReadHandle through f's file system.
func (f Files) ReadHandle(h *weirv1.StateHandle, m proto.Message) error {
	if data := h.GetInlineData(); len(data) > 0 {
		if err := proto.Unmarshal(data, m); err != nil {
			return fmt.Errorf("storage: decode inline state: %w", err)
		}
		return nil
	}
	if h.GetPath() == "" {
		return errors.New("storage: empty state handle")
	}
	return f.ReadProto(h.GetPath(), m)
}

// writeFileAtomic writes data to path whole: a reader sees all of it or
// nothing, and it is durable on return.
func (f Files) writeFileAtomic(path string, data []byte) error {
	st, err := f.Store(path)
	if err != nil {
		return err
	}
	return st.Put(context.Background(), path, bytes.NewReader(data), int64(len(data)))
}

// ReadProto reads a file written by WriteProto into m.
func ReadProto(path string, m proto.Message) error { return Files{}.ReadProto(path, m) }

// ReadHandleBytes is what ReadHandle decodes: the handle's inline bytes
// or its file's.
func (f Files) ReadHandleBytes(h *weirv1.StateHandle) ([]byte, error) {
	if data := h.GetInlineData(); len(data) > 0 {
		return data, nil
	}
	if h.GetPath() == "" {
		return nil, errors.New("storage: empty state handle")
	}
	return f.readFile(h.GetPath())
}

func (f Files) readFile(path string) ([]byte, error) {
	st, err := f.Store(path)
	if err != nil {
		return nil, err
	}
	file, err := st.Get(context.Background(), path)
	if err != nil {
		return nil, err // names the path
	}
	data, err := io.ReadAll(file)
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("storage: read %s: %w", path, err)
	}
	return data, nil
}

// ReadProto is the package's ReadProto through f's file system.
func (f Files) ReadProto(path string, m proto.Message) error {
	data, err := f.readFile(path)
	if err != nil {
		return err
	}
	if err := proto.Unmarshal(data, m); err != nil {
		return fmt.Errorf("storage: decode %s: %w", path, err)
	}
	return nil
}

// Discard deletes a checkpoint directory and everything in it.
func Discard(dir string) error {
	if err := blob.DeleteAll(context.Background(), dir); err != nil {
		return fmt.Errorf("storage: discard %s: %w", dir, err)
	}
	return nil
}

// DiscardHandles deletes the exclusive files a subtask acknowledged (inline
// handles have none). Used for
// acks that arrive for a checkpoint that no longer exists.
func DiscardHandles(st *weirv1.SubtaskState) error {
	var errs []error
	for _, p := range OwnPaths(st) {
		errs = append(errs, Delete(p))
	}
	return errors.Join(errs...)
}

// OwnPaths are the files of st that only st references: every file it
// names but the shared ones, which a registry of references decides on.
func OwnPaths(st *weirv1.SubtaskState) []string {
	var out []string
	handles := append([]*weirv1.StateHandle{st.GetKeyedState(), st.GetOperatorState(), st.GetChannelState()}, st.GetSharedFiles()...)
	for _, h := range handles {
		if h.GetPath() != "" && !h.GetShared() {
			out = append(out, h.GetPath())
		}
	}
	return out
}

// Delete removes the object at loc; a missing one is no error.
func Delete(loc string) error {
	st, err := blob.Open(loc)
	if err == nil {
		err = st.Delete(context.Background(), loc)
	}
	return err
}
