// Package all registers every built-in operator and connector with a
// TaskManager's registry. It is apart from package operators so that what
// uses one operator (the Go API's file sink, say) does not link every
// connector's client.
package all

import (
	"github.com/weirproject/weir/internal/filesink"
	"github.com/weirproject/weir/internal/kafka"
	"github.com/weirproject/weir/internal/nexmark"
	"github.com/weirproject/weir/internal/operators"
	"github.com/weirproject/weir/internal/sql/collect"
	"github.com/weirproject/weir/internal/sql/ops"
	"github.com/weirproject/weir/sdk"
)

// Register adds the built-in operators to r.
func Register(r *sdk.Registry) {
	r.RegisterSource("sequence-source", func() sdk.Source { return &operators.SequenceSource{} })
	r.RegisterOperator("keyed-sum", func() sdk.Operator { return &operators.KeyedSum{} })
	r.RegisterOperator("file-sink", func() sdk.Operator { return &filesink.FileSink{} })
	r.RegisterOperator("window", func() sdk.Operator { return &operators.Window{} })
	r.RegisterOperator("interval-join", func() sdk.Operator { return &operators.IntervalJoin{} })
	r.RegisterOperator("window-join", func() sdk.Operator { return &operators.WindowJoin{} })
	r.RegisterSource("nexmark-source", func() sdk.Source { return &nexmark.Source{} })
	r.RegisterSource("kafka-source", func() sdk.Source { return &kafka.Source{} })
	r.RegisterOperator("kafka-sink", func() sdk.Operator { return &kafka.Sink{} })
	r.RegisterOperator("sql-calc", func() sdk.Operator { return &ops.Calc{} })
	r.RegisterOperator("sql-window-aggregate", func() sdk.Operator { return &ops.WindowAggregate{} })
	r.RegisterOperator("sql-local-aggregate", func() sdk.Operator { return &ops.LocalAggregate{} })
	r.RegisterOperator("sql-join", func() sdk.Operator { return &ops.Join{} })
	r.RegisterOperator("sql-group-aggregate", func() sdk.Operator { return &ops.GroupAggregate{} })
	r.RegisterOperator("sql-top-n", func() sdk.Operator { return &ops.TopN{} })
	r.RegisterOperator("sql-over-aggregate", func() sdk.Operator { return &ops.OverAggregate{} })
	r.RegisterOperator("sql-normalize", func() sdk.Operator { return &ops.Normalize{} })
	r.RegisterOperator("blackhole", func() sdk.Operator { return ops.Blackhole{} })
	r.RegisterOperator(collect.Operator, func() sdk.Operator { return &collect.Sink{} })
}
