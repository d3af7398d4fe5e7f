// Command event-time is a taskmanager with an operator built on event-time
// timers and a source with per-partition watermarks, to show the timer
// service, watermarks and idleness of package sdk. Build
// it, start it in place of the stock taskmanager (same flags), and submit
// examples/event-time/job.yaml.
//
//	go build -o bin/event-time-taskmanager ./examples/event-time
package main

import (
	"encoding/binary"
	"strconv"

	"github.com/weirproject/weir/sdk"
	"github.com/weirproject/weir/worker"
)

// Inactivity emits one record per key and burst of activity: when a key
// has seen no record for `gap` of event time, it emits (key, "<first>,<last>,
// <count>") for the burst that just ended. Each record moves its key's
// timer to last+gap: the old one is deleted, so only the latest fires. The
// burst is keyed state and the timer is in the checkpoint, so a restored job
// emits exactly what an undisturbed one does.
//
// It also counts, as operator state, the watermarks it observed: an
// operator that needs to act on event time itself (flush a buffer, say)
// implements sdk.WatermarkObserver.
type Inactivity struct {
	gap    int64 // ms
	timers sdk.TimerService
	burst  sdk.ValueState // first, last, count: 3 × 8 bytes
}

func (a *Inactivity) Open(ctx sdk.Context) error {
	gap, err := ctx.Config().Duration("gap", 0)
	if err != nil {
		return err
	}
	a.gap = gap.Milliseconds()
	a.timers = ctx.TimerService()
	a.burst = ctx.ValueState("burst")
	return nil
}

func (a *Inactivity) ProcessRecord(r sdk.Record, out sdk.Collector) error {
	first, last, count := r.Timestamp, r.Timestamp, int64(0)
	if b, ok := a.burst.Value(); ok {
		first, last, count = int64(binary.BigEndian.Uint64(b)), int64(binary.BigEndian.Uint64(b[8:])), int64(binary.BigEndian.Uint64(b[16:]))
		a.timers.DeleteEventTimeTimer(nil, last+a.gap)
	}
	// Records come out of order (within the watermark's bound): a burst
	// spans its earliest to its latest record.
	first, last = min(first, r.Timestamp), max(last, r.Timestamp)
	a.save(first, last, count+1)
	a.timers.RegisterEventTimeTimer(nil, last+a.gap)
	return nil
}

func (a *Inactivity) save(first, last, count int64) {
	b := make([]byte, 24)
	binary.BigEndian.PutUint64(b, uint64(first))
	binary.BigEndian.PutUint64(b[8:], uint64(last))
	binary.BigEndian.PutUint64(b[16:], uint64(count))
	a.burst.Update(b)
}

// OnTimer runs with the timer's key as the current key: the burst is that
// key's.
func (a *Inactivity) OnTimer(t sdk.Timer, out sdk.Collector) error {
	b, ok := a.burst.Value()
	if !ok {
		return nil
	}
	first, last, count := int64(binary.BigEndian.Uint64(b)), int64(binary.BigEndian.Uint64(b[8:])), int64(binary.BigEndian.Uint64(b[16:]))
	v := strconv.AppendInt(nil, first, 10)
	v = append(v, ',')
	v = strconv.AppendInt(v, last, 10)
	v = append(v, ',')
	v = strconv.AppendInt(v, count, 10)
	out.Collect(sdk.Record{Key: append([]byte(nil), t.Key...), Value: v, Timestamp: t.Timestamp})
	a.burst.Clear()
	return nil
}

func (a *Inactivity) Close() error { return nil }

func main() {
	reg := sdk.NewRegistry()
	reg.RegisterOperator("inactivity", func() sdk.Operator { return &Inactivity{} })
	reg.RegisterSource("partitions", func() sdk.Source { return &Partitions{} })
	worker.Main(reg)
}
