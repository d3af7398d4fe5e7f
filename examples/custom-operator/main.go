// Command custom-operator is a taskmanager with one extra operator, to show
// how users extend Weir: write an operator against package sdk, register it,
// and run worker.Main. Build it, start it in place of the stock taskmanager
// (same flags), and submit examples/custom-operator/job.yaml.
//
//	go build -o bin/my-taskmanager ./examples/custom-operator
package main

import (
	"fmt"
	"strconv"

	"github.com/weirproject/weir/sdk"
	"github.com/weirproject/weir/worker"
)

// Threshold forwards a record only the first time its key's value reaches
// at least `min`, remembering per key (in keyed state, so checkpointed and
// restored) that it already fired.
type Threshold struct {
	min   int64
	fired sdk.ValueState
}

func (t *Threshold) Open(ctx sdk.Context) error {
	var err error
	if t.min, err = ctx.Config().Int("min", 0); err != nil {
		return err
	}
	t.fired = ctx.ValueState("fired")
	return nil
}

func (t *Threshold) ProcessRecord(r sdk.Record, out sdk.Collector) error {
	v, err := strconv.ParseInt(string(r.Value), 10, 64)
	if err != nil {
		return fmt.Errorf("threshold: value of key %q: %w", r.Key, err)
	}
	if _, done := t.fired.Value(); done || v < t.min {
		return nil
	}
	t.fired.Update([]byte{1})
	out.Collect(r)
	return nil
}

func (t *Threshold) Close() error { return nil }

func main() {
	reg := sdk.NewRegistry()
	reg.RegisterOperator("threshold", func() sdk.Operator { return &Threshold{} })
	worker.Main(reg)
}
