package operators

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/weirproject/weir/internal/timer"
	"github.com/weirproject/weir/sdk"
)

// discard counts what an operator emits and keeps nothing.
type discard struct{ n int }

func (d *discard) Collect(sdk.Record) { d.n++ }

// BenchmarkSequenceSourceEmit is the source of the running-sum job at full
// speed: one op is one record.
func BenchmarkSequenceSourceEmit(b *testing.B) {
	ctx := newTestCtx("src", sdk.Config{"keys": 16.0}, 0, 1)
	s := &SequenceSource{}
	if err := s.Open(ctx); err != nil {
		b.Fatal(err)
	}
	out := &discard{}
	b.ReportAllocs()
	for b.Loop() {
		if out.n%maxPerEmit == 0 {
			if _, err := s.Emit(out); err != nil {
				b.Fatal(err)
			}
		}
		out.n++
	}
}

// BenchmarkKeyedSum is keyed-sum on the heap backend over 16 keys of
// three digits, as sequence-source writes them.
func BenchmarkKeyedSum(b *testing.B) {
	ctx := newTestCtx("sum", sdk.Config{}, 0, 1)
	k := &KeyedSum{}
	if err := k.Open(ctx); err != nil {
		b.Fatal(err)
	}
	recs := make([]sdk.Record, 16)
	for i := range recs {
		recs[i] = sdk.Record{Key: []byte(strconv.Itoa(100 + i)), Value: []byte("12345")}
	}
	out := &discard{}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r := recs[i%len(recs)]
		i++
		ctx.Heap.SetCurrentKey(r.Key)
		if err := k.ProcessRecord(r, out); err != nil {
			b.Fatal(err)
		}
	}
}

// The Window benchmarks run the operator the way windowSubtask
// (window_test.go) does — a testCtx over the heap backend, testTimers over
// a real timer.Service, records with their key's state, watermarks firing
// the timers that are due — over the stream W1 of the bench suite sends
// (bench/internal/suite/w1.go): sequence-source records i with key
// i mod 1024, value i, event time i ms, one subtask holding every key.
// One op is one record. Every windowBenchWatermarkEvery records (about a
// second of event time) the watermark moves to the newest timestamp minus
// 1 ms minus the sub-benchmark's lag, and the timers it passes fire within
// the measured loop. lag=0s is the watermark right behind the records;
// lag=30s is what W1 sees on the daemons, where the window's input
// watermark trails the records it processed by tens of seconds of event
// time (records run ~100 s of event time per second, so the exchange's
// buffers and the skew between the two source subtasks hold that much),
// so every key has ~30 open windows (panes) instead of ~1.
//
// windows/record is what the operator emitted per record: with 1024 keys
// over 1 ms steps a key has about one record per second of event time, so
// a 1 s tumbling window holds about one record per key (the worst case
// for firing: a timer and an output record per input record), a 10 s
// sliding window about ten, one per pane.
const (
	windowBenchKeys           = 1024
	windowBenchWatermarkEvery = 1024
)

var windowBenchLags = []int64{0, 30_000}

// sessionBenchJitterPeriod gives the session benchmark's timestamps:
// floor(i/102)·102 ms, sequence-source's event time with step 1 ms and
// jitter 101 ms. Key k's consecutive records are then 1020 ms apart, or
// 1122 ms once in about 25.5 (1024 = 10·102 + 4), so with a gap of 1100 ms
// every record merges into its key's open session and a session closes
// after about 25 records (see W1).
const sessionBenchJitterPeriod = 102

func benchWindow(b *testing.B, cfg sdk.Config, ts func(i int64) int64) {
	for _, lag := range windowBenchLags {
		b.Run(fmt.Sprintf("lag=%ds", lag/1000), func(b *testing.B) { benchWindowLag(b, cfg, ts, lag) })
	}
}

func benchWindowLag(b *testing.B, cfg sdk.Config, ts func(i int64) int64, lag int64) {
	ctx := newTestCtx("window", cfg, 0, 1)
	timers := &testTimers{svc: timer.New(ctx.Heap), wm: sdk.MinWatermark}
	ctx.Timers = timers
	op := &Window{}
	if err := op.Open(ctx); err != nil {
		b.Fatal(err)
	}
	keys := make([][]byte, windowBenchKeys)
	for i := range keys {
		keys[i] = strconv.AppendInt(nil, int64(i), 10)
	}
	// Values as the source formats them, from a table: the benchmark
	// measures the operator, not the formatting.
	values := make([][]byte, 4096)
	for i := range values {
		values[i] = strconv.AppendInt(nil, int64(1_000_000+i), 10)
	}
	out := &discard{}
	var i, newest int64
	fire := func(wm int64) {
		if wm <= timers.wm {
			return
		}
		timers.wm = wm
		for {
			tm, ok := timers.svc.Pop(timer.EventTime, wm)
			if !ok {
				return
			}
			timers.key = tm.Key
			if err := op.OnTimer(sdk.Timer{Domain: sdk.EventTime, Timestamp: tm.Timestamp, Key: tm.Key, Namespace: tm.Namespace}, out); err != nil {
				b.Fatal(err)
			}
		}
	}
	// Warm up to the steady state: the lag's worth of open windows.
	warm := func() {
		k := keys[i%windowBenchKeys]
		t := ts(i)
		newest = max(newest, t)
		timers.key = k
		ctx.Heap.SetCurrentKey(k)
		if err := op.ProcessRecord(sdk.Record{Key: k, Value: values[i%int64(len(values))], Timestamp: t}, out); err != nil {
			b.Fatal(err)
		}
		i++
		if i%windowBenchWatermarkEvery == 0 {
			fire(newest - 1 - lag)
		}
	}
	for i < 2*lag+100_000 {
		warm()
	}
	i0, out0 := i, out.n
	b.ReportAllocs()
	for b.Loop() {
		warm()
	}
	n := float64(i - i0)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/record")
	b.ReportMetric(float64(out.n-out0)/n, "windows/record")
	b.ReportMetric(float64(timers.svc.Len())/windowBenchKeys, "timers/key")
}
func stepTimestamps(i int64) int64 { return i }

// BenchmarkWindowTumbling is a 1 s tumbling sum window.
func BenchmarkWindowTumbling(b *testing.B) {
	benchWindow(b, sdk.Config{"type": "tumbling", "size": "60s", "aggregate": "sum"}, stepTimestamps)
}

// BenchmarkWindowSliding is a 10 s sum window sliding by 1 s: ten 1 s
// panes per window, each record folded into one.
func BenchmarkWindowSliding(b *testing.B) {
	benchWindow(b, sdk.Config{"type": "sliding", "size": "600s", "slide": "60s", "aggregate": "sum"}, stepTimestamps)
}

// BenchmarkWindowSession is a session sum window with a 1100 ms gap over
// timestamps that make sessions of about 25 records per key (see
// sessionBenchJitterPeriod).
func BenchmarkWindowSession(b *testing.B) {
	benchWindow(b, sdk.Config{"type": "session", "gap": "1100ms", "aggregate": "sum"}, func(i int64) int64 {
		return i / sessionBenchJitterPeriod * sessionBenchJitterPeriod
	})
}
