package ops

import "github.com/weirproject/weir/sdk"

// Blackhole is the sink blackhole: it discards its records (the
// subtask's metrics count them in).
type Blackhole struct{}

func (Blackhole) Open(sdk.Context) error                        { return nil }
func (Blackhole) ProcessRecord(sdk.Record, sdk.Collector) error { return nil }
func (Blackhole) Close() error                                  { return nil }
