package storage

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"google.golang.org/protobuf/proto"

	"github.com/weirproject/weir/internal/blob"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

func testMetadata() *weirv1.CheckpointMetadata {
	return &weirv1.CheckpointMetadata{
		JobId:                 "job-1",
		CheckpointId:          12,
		TriggerTimestampMs:    1700000000000,
		CompletionTimestampMs: 1700000000123,
		MaxParallelism:        128,
		Subtasks: []*weirv1.SubtaskState{
			{
				Vertex: "sum", SubtaskIndex: 0, Parallelism: 2,
				KeyGroups:     &weirv1.KeyGroupRange{Start: 0, End: 63},
				KeyedState:    &weirv1.StateHandle{Path: "/ckpt/job-1/chk-12/sum-0.keyed", Size: 10},
				OperatorState: &weirv1.StateHandle{Path: "/ckpt/job-1/chk-12/sum-0.operator", Size: 5},
				StateSize:     15, CheckpointedSize: 15,
			},
			{
				Vertex: "sum", SubtaskIndex: 1, Parallelism: 2,
				KeyGroups:  &weirv1.KeyGroupRange{Start: 64, End: 127},
				KeyedState: &weirv1.StateHandle{Path: "/ckpt/job-1/chk-12/sum-1.keyed", Size: 7},
			},
		},
	}
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func TestMetadataRoundTrip(t *testing.T) {
	s := Storage{Dir: t.TempDir()}
	dir, err := s.InitLocation("job-1", 12)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(s.Dir, "job-1", "chk-12"); dir != want {
		t.Fatalf("InitLocation = %s, want %s", dir, want)
	}
	md := testMetadata()
	path, err := WriteMetadata(dir, md)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, MetadataFile); path != want {
		t.Fatalf("WriteMetadata path %s, want %s", path, want)
	}
	if got := names(t, dir); !slices.Equal(got, []string{MetadataFile}) {
		t.Fatalf("checkpoint directory holds %q, want only %s", got, MetadataFile)
	}
	want := testMetadata()
	want.Version = metadataVersion
	for _, p := range []string{path, dir, dir + "/"} {
		got, err := ReadMetadata(p)
		if err != nil {
			t.Fatalf("ReadMetadata(%s): %v", p, err)
		}
		if !proto.Equal(got, want) {
			t.Fatalf("ReadMetadata(%s) = %v, want %v", p, got, want)
		}
	}
}

// TestReservedMetadata: a reserved _metadata reads as corrupt (empty, as
// after a crash before the completion) until written, is written once,
// and then reads back as WriteMetadata's would; injected disk errors in
// either step fail the write.
func TestReservedMetadata(t *testing.T) {
	s := Storage{Dir: t.TempDir()}
	dir, err := s.InitLocation("job-1", 12)
	if err != nil {
		t.Fatal(err)
	}
	if err := ReserveMetadata(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadMetadata(dir); !errors.Is(err, ErrCorruptMetadata) {
		t.Fatalf("ReadMetadata of a reservation: %v, want ErrCorruptMetadata", err)
	}
	if _, err := WriteMetadata(dir, testMetadata()); !errors.Is(err, blob.ErrExists) {
		t.Fatalf("WriteMetadata over a reservation: %v, want ErrExists", err)
	}
	path, err := WriteReservedMetadata(dir, testMetadata())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := WriteReservedMetadata(dir, testMetadata()); !errors.Is(err, blob.ErrExists) {
		t.Fatalf("second write: %v, want ErrExists", err)
	}
	got, err := ReadMetadata(path)
	if err != nil {
		t.Fatal(err)
	}
	want := testMetadata()
	want.Version = metadataVersion
	if !proto.Equal(got, want) {
		t.Fatalf("ReadMetadata = %v, want %v", got, want)
	}
	if got := names(t, dir); !slices.Equal(got, []string{MetadataFile}) {
		t.Fatalf("checkpoint directory holds %q, want only %s", got, MetadataFile)
	}

	// The reservation's directory syncs, and the fill's write and sync.
	for _, op := range []errorfs.OpKind{errorfs.OpCreate, errorfs.OpOpenDir, errorfs.OpFileSync, errorfs.OpFileWrite, errorfs.OpFileSyncData} {
		t.Run(fmt.Sprint(op), func(t *testing.T) {
			inject := errorfs.InjectorFunc(func(o errorfs.Op) error {
				if o.Kind == op {
					return errorfs.ErrInjected
				}
				return nil
			})
			dir, err := s.InitLocation("job-1", 13+int64(op))
			if err != nil {
				t.Fatal(err)
			}
			reserveFS, fillFS := vfs.FS(vfs.Default), vfs.FS(vfs.Default)
			if op == errorfs.OpCreate || op == errorfs.OpOpenDir || op == errorfs.OpFileSync {
				reserveFS = errorfs.Wrap(vfs.Default, inject)
			} else {
				fillFS = errorfs.Wrap(vfs.Default, inject)
			}
			loc := blob.Join(dir, MetadataFile)
			err = blob.Local{FS: reserveFS}.Reserve(context.Background(), loc)
			if err == nil {
				err = blob.Local{FS: fillFS}.Fill(context.Background(), loc, []byte("x"))
			}
			if !errors.Is(err, errorfs.ErrInjected) {
				t.Fatalf("reserve and fill: %v, want the injected error", err)
			}
		})
	}
}

func TestReadMetadataCorrupt(t *testing.T) {
	framed := func(md *weirv1.CheckpointMetadata) []byte {
		b, err := marshalMetadata(md)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// withTrailer frames arbitrary bytes with a valid trailer.
	withTrailer := func(payload []byte) []byte {
		b := binary.BigEndian.AppendUint32(slices.Clone(payload), crc32.Checksum(payload, crc32c))
		return append(b, metadataMagic...)
	}
	good := framed(&weirv1.CheckpointMetadata{Version: metadataVersion, JobId: "j", CheckpointId: 3})
	flipped := slices.Clone(good)
	flipped[3] ^= 0x40
	plain, err := proto.Marshal(&weirv1.CheckpointMetadata{Version: metadataVersion, JobId: "j", CheckpointId: 3})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"only the magic", []byte(metadataMagic)},
		{"garbage", []byte("this is not a protobuf \xff\xff\xff\xff")},
		{"garbage with a valid trailer", withTrailer([]byte{0x0f, 0xff, 0xff})},
		{"empty message with a valid trailer", withTrailer(nil)},
		{"truncated", good[:len(good)-1]},
		{"bare protobuf without trailer", plain},
		{"bit flip", flipped},
		{"trailing bytes", append(slices.Clone(good), 0)},
		{"wrong version", framed(&weirv1.CheckpointMetadata{Version: metadataVersion + 1, CheckpointId: 3})},
		{"no version", framed(&weirv1.CheckpointMetadata{CheckpointId: 3})},
		{"no checkpoint id", framed(&weirv1.CheckpointMetadata{Version: metadataVersion})},
		{"negative checkpoint id", framed(&weirv1.CheckpointMetadata{Version: metadataVersion, CheckpointId: -1})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), MetadataFile)
			if err := os.WriteFile(path, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			md, err := ReadMetadata(path)
			if !errors.Is(err, ErrCorruptMetadata) {
				t.Fatalf("ReadMetadata = %v, %v; want an error wrapping ErrCorruptMetadata", md, err)
			}
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q does not name the file", err)
			}
		})
	}
	// The same file with the trailer intact reads fine.
	path := filepath.Join(t.TempDir(), MetadataFile)
	if err := os.WriteFile(path, good, 0o644); err != nil {
		t.Fatal(err)
	}
	if md, err := ReadMetadata(path); err != nil || md.GetCheckpointId() != 3 {
		t.Fatalf("ReadMetadata = %v, %v", md, err)
	}
}

// A _metadata file cut short anywhere must not be taken for a checkpoint
// with fewer subtasks.
func TestReadMetadataTruncated(t *testing.T) {
	dir := t.TempDir()
	path, err := WriteMetadata(dir, testMetadata())
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(data); n++ {
		if err := os.WriteFile(path, data[:n], 0o644); err != nil {
			t.Fatal(err)
		}
		if md, err := ReadMetadata(path); !errors.Is(err, ErrCorruptMetadata) {
			t.Fatalf("truncated to %d of %d bytes: ReadMetadata = %v, %v; want ErrCorruptMetadata", n, len(data), md, err)
		}
	}
}

func TestReadMetadataMissing(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{dir, filepath.Join(dir, MetadataFile), filepath.Join(dir, "nope", MetadataFile)} {
		_, err := ReadMetadata(p)
		if err == nil || errors.Is(err, ErrCorruptMetadata) || !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("ReadMetadata(%s) = %v, want a not-exist error that is not ErrCorruptMetadata", p, err)
		}
	}
}

func TestWriteProtoAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.operator")
	first := &weirv1.StateHandle{Path: "first", Size: 1}
	n, err := WriteProto(path, first)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != n || n != int64(proto.Size(first)) {
		t.Fatalf("WriteProto returned %d bytes, file: %v %v", n, fi, err)
	}
	// A stale temporary file from a crashed writer does not get in the way.
	if err := os.WriteFile(path+".tmp", []byte("stale garbage that is longer than the message"), 0o644); err != nil {
		t.Fatal(err)
	}
	second := &weirv1.StateHandle{Path: "second, a longer path than the first", Size: 2, Shared: true}
	if _, err := WriteProto(path, second); err != nil {
		t.Fatal(err)
	}
	if got := names(t, dir); !slices.Equal(got, []string{"state.operator"}) {
		t.Fatalf("directory holds %q, want only the target", got)
	}
	got := &weirv1.StateHandle{}
	if err := ReadProto(path, got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, second) {
		t.Fatalf("read %v, want %v", got, second)
	}

	// The old content stays readable through a handle opened before the
	// replacement: the new file is renamed into place, not written over.
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := WriteProto(path, first); err != nil {
		t.Fatal(err)
	}
	old := make([]byte, proto.Size(second)+10)
	m, _ := f.Read(old)
	fromOld := &weirv1.StateHandle{}
	if err := proto.Unmarshal(old[:m], fromOld); err != nil || !proto.Equal(fromOld, second) {
		t.Fatalf("file opened before the replacement reads %v (%v), want %v", fromOld, err, second)
	}
	if err := ReadProto(path, got); err != nil || !proto.Equal(got, first) {
		t.Fatalf("read %v (%v), want %v", got, err, first)
	}
}

// State below the threshold travels inline and leaves no file; at or
// above it, or with the threshold 0, it is a file. ReadHandle reads both.
func TestWriteHandleInlineThreshold(t *testing.T) {
	m := &weirv1.KeyGroupRange{Start: 1, End: 1000}
	size := proto.Size(m)
	tests := []struct {
		name      string
		threshold int
		inline    bool
	}{
		{"disabled", 0, false},
		{"below", size + 1, true},
		{"at", size, false},
		{"above", size - 1, false},
		{"default", DefaultInlineThreshold, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "s.keyed")
			h, err := WriteHandle(path, m, tc.threshold)
			if err != nil {
				t.Fatal(err)
			}
			if h.GetSize() != int64(size) || !HasState(h) || h.GetShared() {
				t.Fatalf("handle %v, want size %d", h, size)
			}
			files := names(t, dir)
			if tc.inline {
				if h.GetPath() != "" || len(h.GetInlineData()) != size || len(files) != 0 {
					t.Fatalf("handle %v, files %q: want inline and no file", h, files)
				}
			} else if h.GetPath() != path || len(h.GetInlineData()) != 0 || !slices.Equal(files, []string{"s.keyed"}) {
				t.Fatalf("handle %v, files %q: want the file only", h, files)
			}
			got := &weirv1.KeyGroupRange{}
			if err := ReadHandle(h, got); err != nil || !proto.Equal(got, m) {
				t.Fatalf("ReadHandle = %v, %v; want %v", got, err, m)
			}
			// Nothing of an inline handle is a file to delete.
			if err := DiscardHandles(&weirv1.SubtaskState{KeyedState: h}); err != nil || len(names(t, dir)) != 0 {
				t.Fatalf("DiscardHandles: %v, left %q", err, names(t, dir))
			}
		})
	}
	// An empty message is never inlined: its handle would look like none.
	h, err := WriteHandle(filepath.Join(t.TempDir(), "empty"), &weirv1.KeyGroupRange{}, DefaultInlineThreshold)
	if err != nil || h.GetPath() == "" {
		t.Fatalf("empty message: %v, %v", h, err)
	}
	if HasState(nil) || HasState(&weirv1.StateHandle{Size: 3}) {
		t.Fatal("HasState of a handle with neither path nor bytes")
	}
	if err := ReadHandle(&weirv1.StateHandle{}, &weirv1.KeyGroupRange{}); err == nil {
		t.Fatal("ReadHandle of an empty handle succeeded")
	}
	if err := ReadHandle(&weirv1.StateHandle{InlineData: []byte{0xff, 0xff}}, &weirv1.KeyGroupRange{}); err == nil {
		t.Fatal("ReadHandle of garbage inline bytes succeeded")
	}
}

func TestWriteProtoErrors(t *testing.T) {
	dir := t.TempDir()
	// Into a directory that does not exist: an error, nothing left behind.
	if _, err := WriteProto(filepath.Join(dir, "missing", "f"), &weirv1.StateHandle{}); err == nil {
		t.Fatal("WriteProto into a missing directory succeeded")
	}
	// Onto a path that is a non-empty directory: the rename fails.
	target := filepath.Join(dir, "target")
	if err := os.MkdirAll(filepath.Join(target, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteProto(target, &weirv1.StateHandle{Path: "p"}); err == nil {
		t.Fatal("WriteProto over a directory succeeded")
	}
	if got := names(t, dir); !slices.Equal(got, []string{"target"}) {
		t.Fatalf("a failed WriteProto left %q", got)
	}
}

func TestReadProtoErrors(t *testing.T) {
	dir := t.TempDir()
	if err := ReadProto(filepath.Join(dir, "missing"), &weirv1.StateHandle{}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("ReadProto of a missing file: %v", err)
	}
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte{0xff, 0xff}, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ReadProto(bad, &weirv1.StateHandle{}); err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("ReadProto of garbage: %v, want an error naming the file", err)
	}
}

func TestHighestCheckpointID(t *testing.T) {
	tests := []struct {
		name    string
		entries []string // trailing / makes a directory
		want    int64
	}{
		{"missing job directory", nil, 0},
		{"empty", []string{}, 0},
		{"mixed", []string{"chk-1/", "chk-12/", "chk-x/", "chk-/", "chk-3/", "shared/", "taskowned/", "chk-99.tmp", "_metadata", "chk--5/", "other"}, 12},
		{"numeric order, not lexical", []string{"chk-9/", "chk-10/", "chk-100/", "chk-11/"}, 100},
		{"only non-checkpoints", []string{"chk-abc/", "foo/", "chkpt-7/"}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := Storage{Dir: t.TempDir()}
			if tc.entries != nil {
				if err := os.MkdirAll(s.JobDir("job"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for _, e := range tc.entries {
				p := filepath.Join(s.JobDir("job"), e)
				var err error
				if strings.HasSuffix(e, "/") {
					err = os.MkdirAll(p, 0o755)
				} else {
					err = os.WriteFile(p, nil, 0o644)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			got, err := s.HighestCheckpointID("job")
			if err != nil || got != tc.want {
				t.Fatalf("HighestCheckpointID = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
	// The job directory is a file: an error, not 0.
	s := Storage{Dir: t.TempDir()}
	if err := os.WriteFile(s.JobDir("job"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.HighestCheckpointID("job"); err == nil {
		t.Fatal("HighestCheckpointID over a file succeeded")
	}
}

func TestDiscard(t *testing.T) {
	s := Storage{Dir: t.TempDir()}
	dir, err := s.InitLocation("job", 4)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := WriteMetadata(dir, testMetadata()); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Discard(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("checkpoint directory still there: %v", err)
	}
	if _, err := os.Stat(s.JobDir("job")); err != nil {
		t.Fatalf("job directory gone: %v", err)
	}
	// Discarding what is gone already is fine.
	if err := Discard(dir); err != nil {
		t.Fatal(err)
	}
}

func TestDiscardHandles(t *testing.T) {
	dir := t.TempDir()
	mk := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	keyed, op, channel, shared, sharedFile := mk("keyed"), mk("operator"), mk("channel"), mk("shared"), mk("shared-file")
	st := &weirv1.SubtaskState{
		KeyedState:    &weirv1.StateHandle{Path: keyed},
		OperatorState: &weirv1.StateHandle{Path: op},
		ChannelState:  &weirv1.StateHandle{Path: channel},
		SharedFiles:   []*weirv1.StateHandle{{Path: sharedFile, Shared: true}},
	}
	if err := DiscardHandles(st); err != nil {
		t.Fatal(err)
	}
	if got := names(t, dir); !slices.Equal(got, []string{"shared", "shared-file"}) {
		t.Fatalf("left %q, want the shared files only", got)
	}

	tests := []struct {
		name string
		st   *weirv1.SubtaskState
		left []string
	}{
		{"nil state", nil, []string{"shared", "shared-file"}},
		{"no handles", &weirv1.SubtaskState{}, []string{"shared", "shared-file"}},
		{"empty paths", &weirv1.SubtaskState{KeyedState: &weirv1.StateHandle{}, OperatorState: &weirv1.StateHandle{Size: 3}}, []string{"shared", "shared-file"}},
		{"missing files", &weirv1.SubtaskState{KeyedState: &weirv1.StateHandle{Path: keyed}, ChannelState: &weirv1.StateHandle{Path: filepath.Join(dir, "nope", "x")}}, []string{"shared", "shared-file"}},
		{"shared handle untouched", &weirv1.SubtaskState{KeyedState: &weirv1.StateHandle{Path: shared, Shared: true}}, []string{"shared", "shared-file"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := DiscardHandles(tc.st); err != nil {
				t.Fatalf("DiscardHandles: %v", err)
			}
			if got := names(t, dir); !slices.Equal(got, tc.left) {
				t.Fatalf("left %q, want %q", got, tc.left)
			}
		})
	}

	// A file that cannot be removed is reported, the others still go.
	blocker := filepath.Join(dir, "blocker")
	if err := os.MkdirAll(filepath.Join(blocker, "child"), 0o755); err != nil {
		t.Fatal(err)
	}
	victim := mk("victim")
	err := DiscardHandles(&weirv1.SubtaskState{
		KeyedState:    &weirv1.StateHandle{Path: blocker},
		OperatorState: &weirv1.StateHandle{Path: victim},
	})
	if err == nil {
		t.Fatal("DiscardHandles of a non-empty directory succeeded")
	}
	if _, err := os.Stat(victim); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the removable handle was kept after another failed: %v", err)
	}
}

func TestCheckpointDirLayout(t *testing.T) {
	s := Storage{Dir: "/ckpt"}
	if got := s.JobDir("j"); got != "/ckpt/j" {
		t.Fatalf("JobDir = %s", got)
	}
	if got := s.CheckpointDir("j", 42); got != "/ckpt/j/chk-42" {
		t.Fatalf("CheckpointDir = %s", got)
	}
}

// Files writes and reads through the file system it is given: a disk
// error at any step of a write fails it, leaving nothing behind, and a
// read error fails the read.
func TestFilesInjectedErrors(t *testing.T) {
	m := &weirv1.KeyGroupRange{Start: 1, End: 1000}
	for _, op := range []errorfs.OpKind{errorfs.OpCreate, errorfs.OpFileWrite, errorfs.OpFileSync, errorfs.OpRename, errorfs.OpOpenDir} {
		t.Run(fmt.Sprint(op), func(t *testing.T) {
			dir := t.TempDir()
			f := Files{FS: errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(o errorfs.Op) error {
				if o.Kind == op {
					return errorfs.ErrInjected
				}
				return nil
			}))}
			if _, err := f.WriteHandle(filepath.Join(dir, "s.keyed"), m, 0); !errors.Is(err, errorfs.ErrInjected) {
				t.Fatalf("write: %v, want the injected error", err)
			}
			if op != errorfs.OpOpenDir { // the file is in place, its directory entry not synced
				if got := names(t, dir); len(got) != 0 {
					t.Fatalf("a failed write left %q", got)
				}
			}
		})
	}
	dir := t.TempDir()
	h, err := WriteHandle(filepath.Join(dir, "s.keyed"), m, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := Files{FS: errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(o errorfs.Op) error {
		if o.Kind.ReadOrWrite() == errorfs.OpIsRead {
			return errorfs.ErrInjected
		}
		return nil
	}))}
	if err := f.ReadHandle(h, &weirv1.KeyGroupRange{}); !errors.Is(err, errorfs.ErrInjected) {
		t.Fatalf("read: %v, want the injected error", err)
	}
}

// A savepoint moved to another directory reads its files where it is now;
// a checkpoint's handles are left as written.
func TestSavepointRelocates(t *testing.T) {
	for _, c := range []struct {
		typ  weirv1.CheckpointType
		move bool
	}{
		{weirv1.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT, true},
		{weirv1.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT_SUSPEND, true},
		{weirv1.CheckpointType_CHECKPOINT_TYPE_CHECKPOINT, false},
	} {
		old := filepath.Join(t.TempDir(), "savepoint-j-3")
		if err := os.MkdirAll(old, 0o755); err != nil {
			t.Fatal(err)
		}
		md := &weirv1.CheckpointMetadata{Version: 1, JobId: "j", CheckpointId: 3, Type: c.typ, Subtasks: []*weirv1.SubtaskState{{
			Vertex:        "v",
			KeyedState:    &weirv1.StateHandle{Path: filepath.Join(old, "v-0.keyed"), Size: 1},
			OperatorState: &weirv1.StateHandle{InlineData: []byte{1}},
			SharedFiles:   []*weirv1.StateHandle{{Path: "/elsewhere/shared/x.sst", Shared: true}},
		}}}
		if _, err := WriteMetadata(old, md); err != nil {
			t.Fatal(err)
		}
		moved := filepath.Join(t.TempDir(), "copy")
		if err := os.CopyFS(moved, os.DirFS(old)); err != nil {
			t.Fatal(err)
		}
		got, err := ReadMetadata(moved)
		if err != nil {
			t.Fatal(err)
		}
		st := got.GetSubtasks()[0]
		want := filepath.Join(old, "v-0.keyed")
		if c.move {
			want = filepath.Join(moved, "v-0.keyed")
		}
		if st.GetKeyedState().GetPath() != want || st.GetSharedFiles()[0].GetPath() != "/elsewhere/shared/x.sst" || st.GetOperatorState().GetPath() != "" {
			t.Errorf("%v: read %v", c.typ, st)
		}
	}
}
