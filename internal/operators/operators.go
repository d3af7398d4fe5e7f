// Package operators holds Weir's built-in operators.
package operators

import (
	"github.com/weirproject/weir/internal/kafka"
	"github.com/weirproject/weir/internal/nexmark"
	"github.com/weirproject/weir/sdk"
)

// Register adds the built-in operators to r.
func Register(r *sdk.Registry) {
	r.RegisterSource("sequence-source", func() sdk.Source { return &SequenceSource{} })
	r.RegisterOperator("keyed-sum", func() sdk.Operator { return &KeyedSum{} })
	r.RegisterOperator("file-sink", func() sdk.Operator { return &FileSink{} })
	r.RegisterOperator("window", func() sdk.Operator { return &Window{} })
	r.RegisterOperator("interval-join", func() sdk.Operator { return &IntervalJoin{} })
	r.RegisterOperator("window-join", func() sdk.Operator { return &WindowJoin{} })
	r.RegisterSource("nexmark-source", func() sdk.Source { return &nexmark.Source{} })
	r.RegisterSource("kafka-source", func() sdk.Source { return &kafka.Source{} })
	r.RegisterOperator("kafka-sink", func() sdk.Operator { return &kafka.Sink{} })
}
