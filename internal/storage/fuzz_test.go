package storage

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"google.golang.org/protobuf/proto"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// fuzzMetadata is the metadata of a savepoint as the coordinator writes
// it: subtasks with keyed, operator and channel state in files and
// inline, shared incremental files, coordinator and master state.
func fuzzMetadata() *weirv1.CheckpointMetadata {
	md := testMetadata()
	md.Version = metadataVersion
	md.Type = weirv1.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT
	md.Subtasks = append(md.Subtasks,
		&weirv1.SubtaskState{
			Vertex: "source", SubtaskIndex: 0, Parallelism: 1,
			OperatorState: &weirv1.StateHandle{InlineData: []byte{0x0a, 0x03, 'p', 'o', 's'}, Size: 5},
			ChannelState:  &weirv1.StateHandle{Path: "/ckpt/job-1/chk-12/source-0.channel", Size: 99},
		},
		&weirv1.SubtaskState{
			Vertex: "window", SubtaskIndex: 0, Parallelism: 1,
			KeyGroups:   &weirv1.KeyGroupRange{Start: 0, End: 127},
			KeyedState:  &weirv1.StateHandle{Path: "s3://bucket/ckpt/job-1/chk-12/window-0.keyed", Size: 1 << 20},
			SharedFiles: []*weirv1.StateHandle{{Path: "s3://bucket/ckpt/job-1/shared/000007.sst", Size: 4096, Shared: true}},
		})
	md.OperatorCoordinators = []*weirv1.NamedState{{Name: "source", Data: []byte("splits")}}
	md.MasterStates = []*weirv1.NamedState{{Name: "hook", Data: nil}}
	return md
}

// frame adds the trailer marshalMetadata writes.
func frame(body []byte) []byte {
	out := binary.BigEndian.AppendUint32(append([]byte(nil), body...), crc32.Checksum(body, crc32c))
	return append(out, metadataMagic...)
}

// FuzzReadMetadata decodes arbitrary _metadata files: a corrupt one, cut
// short or overwritten, must be ErrCorruptMetadata and never a panic, since
// the JobManager reads them from a user's restore path and at every
// recovery. With framed set the fuzzer's bytes get a valid trailer, so the
// protobuf decoding and the checks after it see mutated messages rather
// than failing the checksum.
func FuzzReadMetadata(f *testing.F) {
	for _, md := range []*weirv1.CheckpointMetadata{testMetadata(), fuzzMetadata()} {
		md.Version = metadataVersion
		data, err := marshalMetadata(md)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, false)
		body := data[:len(data)-metadataTrailerSize]
		f.Add(body, true)
		f.Add(data[:len(data)/2], false)
		f.Add(data[:len(data)-1], false)
	}
	f.Add([]byte(nil), false)
	f.Add([]byte(metadataMagic), false)
	f.Add([]byte{0x08, 0x02, 0x18, 0x01}, true) // version 2
	f.Add([]byte{0x08, 0x01, 0x18, 0x00}, true) // checkpoint 0
	f.Fuzz(func(t *testing.T, data []byte, framed bool) {
		if framed {
			data = frame(data)
		}
		md, err := unmarshalMetadata("/fuzz/_metadata", data)
		if err != nil {
			if !errors.Is(err, ErrCorruptMetadata) {
				t.Fatalf("error is not ErrCorruptMetadata: %v", err)
			}
			if md != nil {
				t.Fatalf("metadata %v returned with error %v", md, err)
			}
			return
		}
		if md.GetVersion() != metadataVersion || md.GetCheckpointId() <= 0 {
			t.Fatalf("accepted metadata of version %d, checkpoint %d", md.GetVersion(), md.GetCheckpointId())
		}
		// What was accepted is written back the same.
		again, err := marshalMetadata(md)
		if err != nil {
			t.Fatalf("marshal accepted metadata: %v", err)
		}
		back, err := unmarshalMetadata("/fuzz/_metadata", again)
		if err != nil {
			t.Fatalf("re-read accepted metadata: %v", err)
		}
		if !proto.Equal(md, back) {
			t.Fatalf("round trip changed the metadata\n got: %v\nwant: %v", back, md)
		}
	})
}
