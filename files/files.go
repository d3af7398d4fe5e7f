// Package files writes a Go job's stream into files, exactly once: the
// built-in file-sink's two-phase commit with checkpoints, each subtask
// writing its own part files under a directory.
package files

import (
	"fmt"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/internal/filesink"
	"github.com/weirproject/weir/sdk"
)

// Sink writes one line per record, format(v), into files under dir
// with a two-phase commit on checkpoints: a line is visible once the
// checkpoint after it completed, and exactly once, through failures.
func Sink[T any](dir string, format func(T) string) weir.Sink[T] {
	return fileSink[T]{dir: dir, format: format}
}

type fileSink[T any] struct {
	dir    string
	format func(T) string
}

func (f fileSink[T]) SinkVertex(in weir.Codec[T]) weir.SinkVertex {
	return weir.SinkVertex{Signature: fmt.Sprintf("file-sink(%s)", weir.TypeName[T]()), Config: map[string]any{"path": f.dir}, New: func() sdk.Operator {
		return &filesink.FileSink{Format: func(dst []byte, r sdk.Record) ([]byte, error) {
			v, err := in.Decode(r.Value)
			if err != nil {
				return dst, fmt.Errorf("decode %s: %w", weir.TypeName[T](), err)
			}
			return append(dst, f.format(v)...), nil
		}}
	}}
}
