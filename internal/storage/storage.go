// Package storage lays out checkpoints in the checkpoint directory shared by
// all processes: <dir>/<job-id>/chk-<n>/_metadata plus the state files the
// subtasks wrote next to it.
package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/proto"

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
func (s Storage) JobDir(jobID string) string { return filepath.Join(s.Dir, jobID) }

// CheckpointDir is the exclusive directory of checkpoint id.
func (s Storage) CheckpointDir(jobID string, id int64) string {
	return filepath.Join(s.JobDir(jobID), "chk-"+strconv.FormatInt(id, 10))
}

// InitLocation creates the directory checkpoint id writes into.
func (s Storage) InitLocation(jobID string, id int64) (string, error) {
	dir := s.CheckpointDir(jobID, id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("storage: init location of checkpoint %d: %w", id, err)
	}
	return dir, nil
}

// HighestCheckpointID returns the largest n of the job's chk-<n> directories,
// so a restarted standalone JobManager never reuses a checkpoint ID.
func (s Storage) HighestCheckpointID(jobID string) (int64, error) {
	entries, err := os.ReadDir(s.JobDir(jobID))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("storage: list checkpoints of job %s: %w", jobID, err)
	}
	var highest int64
	for _, e := range entries {
		n, ok := strings.CutPrefix(e.Name(), "chk-")
		if !ok {
			continue
		}
		if id, err := strconv.ParseInt(n, 10, 64); err == nil && id > highest {
			highest = id
		}
	}
	return highest, nil
}

// A _metadata file is the marshalled CheckpointMetadata followed by a
// trailer: the CRC-32C of the message and metadataMagic. Protobuf has no end
// marker, so without the trailer a file cut short at a field boundary would
// decode as a valid checkpoint with fewer subtasks.
const metadataMagic = "WEIRMETA"

const metadataTrailerSize = 4 + len(metadataMagic)

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// WriteMetadata durably writes a checkpoint's metadata into dir and returns
// its path. The file appears atomically, so a reader never sees half of it.
func WriteMetadata(dir string, md *weirv1.CheckpointMetadata) (string, error) {
	md.Version = metadataVersion
	path := filepath.Join(dir, MetadataFile)
	data, err := marshalMetadata(md)
	if err == nil {
		err = Files{}.writeFileAtomic(path, data)
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

// ReadMetadata reads a _metadata file, or a checkpoint directory holding one.
func ReadMetadata(path string) (*weirv1.CheckpointMetadata, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		path = filepath.Join(path, MetadataFile)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("storage: read metadata: %w", err)
	}
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

// Files reads and writes state files through a file system: the
// operating system's when FS is nil. Tests give one that injects errors
// (Pebble's vfs/errorfs), so every write and read of checkpoint state has
// a seam for disk failures.
type Files struct {
	FS vfs.FS
}

func (f Files) fs() vfs.FS {
	if f.FS == nil {
		return vfs.Default
	}
	return f.FS
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

// writeFileAtomic writes data to path through a temporary file, fsyncs it
// and renames it into place. On failure the temporary file is removed.
func (f Files) writeFileAtomic(path string, data []byte) (err error) {
	fs := f.fs()
	tmp := path + ".tmp"
	file, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			fs.Remove(tmp)
		}
	}()
	if _, err := file.Write(data); err != nil {
		file.Close()
		return err
	}
	if err := file.Sync(); err != nil {
		file.Close()
		return err
	}
	if err := file.Close(); err != nil {
		return err
	}
	if err := fs.Rename(tmp, path); err != nil {
		return err
	}
	// The rename is durable only once its directory is: without this a
	// power loss could lose a _metadata that etcd already points at.
	return syncDir(fs, filepath.Dir(path))
}

func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return d.Close()
}

// ReadProto reads a file written by WriteProto into m.
func ReadProto(path string, m proto.Message) error { return Files{}.ReadProto(path, m) }

// ReadProto is the package's ReadProto through f's file system.
func (f Files) ReadProto(path string, m proto.Message) error {
	file, err := f.fs().Open(path)
	if err != nil {
		return err // names the path
	}
	data, err := io.ReadAll(file)
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("storage: read %s: %w", path, err)
	}
	if err := proto.Unmarshal(data, m); err != nil {
		return fmt.Errorf("storage: decode %s: %w", path, err)
	}
	return nil
}

// Discard deletes a checkpoint directory and everything in it.
func Discard(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("storage: discard %s: %w", dir, err)
	}
	return nil
}

// DiscardHandles deletes the exclusive files a subtask acknowledged (inline
// handles have none). Used for
// acks that arrive for a checkpoint that no longer exists.
func DiscardHandles(st *weirv1.SubtaskState) error {
	var errs []error
	handles := append([]*weirv1.StateHandle{st.GetKeyedState(), st.GetOperatorState(), st.GetChannelState()}, st.GetSharedFiles()...)
	for _, h := range handles {
		if h.GetPath() == "" || h.GetShared() {
			continue
		}
		if err := os.Remove(h.GetPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
