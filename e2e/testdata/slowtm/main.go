// Command slowtm is a taskmanager with one extra operator, slow-forward,
// which passes records on after a configurable delay each: the end-to-end
// tests use it to put a job under back-pressure. It is test scaffolding
// built by e2e/unaligned_test.go, not one of Weir's operators.
package main

import (
	"time"

	"github.com/weirproject/weir/sdk"
	"github.com/weirproject/weir/worker"
)

// slowForward forwards every record after sleeping delay (config "delay",
// a duration; 0 forwards at once).
type slowForward struct{ delay time.Duration }

func (s *slowForward) Open(ctx sdk.Context) error {
	var err error
	s.delay, err = ctx.Config().Duration("delay", 0)
	return err
}

func (s *slowForward) ProcessRecord(r sdk.Record, out sdk.Collector) error {
	if s.delay > 0 {
		time.Sleep(s.delay) // the work this operator stands for
	}
	out.Collect(r)
	return nil
}

func (s *slowForward) Close() error { return nil }

func main() {
	reg := sdk.NewRegistry()
	reg.RegisterOperator("slow-forward", func() sdk.Operator { return &slowForward{} })
	worker.Main(reg)
}
