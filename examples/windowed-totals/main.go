// Command windowed-totals sums each account's payments per 1 s tumbling
// window of event time with the Go API: a keyed window aggregation with an
// accumulator of its own.
//
//	go build -o bin/windowed-totals ./examples/windowed-totals
//	bin/windowed-totals taskmanager --jobmanager localhost:6123 &
//	bin/windowed-totals submit --jobmanager localhost:6123
//
// TOTALS_OUT (default /tmp/weir-totals) gets one
// "account,window-start,window-end,total,payments" line per window;
// TOTALS_PAYMENTS bounds the input (0: endless), TOTALS_RATE is the
// payments per second and source subtask.
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/files"
	"github.com/weirproject/weir/program"
)

type Payment struct {
	Account string
	Cents   int64
}

// Payments is the i-th payment, at i ms of event time (up to 50 ms out of
// order).
func Payments(i int64) Payment {
	return Payment{Account: fmt.Sprintf("acct-%d", i%7), Cents: (i * 37) % 1000}
}

type Total struct {
	Cents, Payments int64
}

func main() {
	out := env("TOTALS_OUT", "/tmp/weir-totals")
	n, _ := strconv.ParseInt(env("TOTALS_PAYMENTS", "300000"), 10, 64)
	rate, _ := strconv.ParseFloat(env("TOTALS_RATE", "10000"), 64)

	job := weir.NewJob("windowed-totals", weir.Checkpointing(time.Second))
	payments := weir.FromSource(job, "payments", weir.Generate(n, Payments, weir.Rate(rate), weir.EventTime(time.Millisecond, 50*time.Millisecond)),
		weir.Parallelism(2), weir.Watermarks(50*time.Millisecond, 0))
	byAccount := weir.KeyBy(payments, func(p Payment) string { return p.Account })
	totals := weir.Aggregate(weir.Window(byAccount, weir.Tumbling(time.Second)), "totals", weir.AggregateFuncs[Payment, Total, Total]{
		CreateFn: func() Total { return Total{} },
		AddFn:    func(t Total, p Payment) Total { return Total{t.Cents + p.Cents, t.Payments + 1} },
		MergeFn:  func(a, b Total) Total { return Total{a.Cents + b.Cents, a.Payments + b.Payments} },
		ResultFn: func(t Total) Total { return t },
	}, weir.Parallelism(2))
	weir.SinkTo(totals, "sink", files.Sink(out, func(w weir.Windowed[string, Total]) string {
		return fmt.Sprintf("%s,%d,%d,%d,%d", w.Key, w.Start, w.End, w.Value.Cents, w.Value.Payments)
	}))
	program.Main(job)
}

func env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
