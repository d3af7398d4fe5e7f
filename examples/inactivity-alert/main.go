// Command inactivity-alert raises an alert when a device sends nothing for
// 10 s of event time: a keyed process function with typed state and an
// event-time timer, built with the Go API.
//
//	go build -o bin/inactivity-alert ./examples/inactivity-alert
//	bin/inactivity-alert taskmanager --jobmanager localhost:6123 &
//	bin/inactivity-alert submit --jobmanager localhost:6123
//
// ALERT_OUT (default /tmp/weir-alerts) gets one "device,last-seen-ms"
// line per silence (and one for each device's last event, once the input
// ends); ALERT_EVENTS bounds the input (0: endless), ALERT_RATE is the
// events per second and source subtask.
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

// Silence is how long a device may stay quiet, in event time.
const Silence = 10 * time.Second

type Event struct {
	Device string
	Time   weir.Time
}

// Events is the i-th event: 16 devices reporting every 16 ms in turn,
// except device 3, which goes quiet for 20 s out of every minute.
func Events(i int64) Event {
	t := i
	d := i % 16
	if d == 3 && t%60_000 >= 40_000 {
		d = 4
	}
	return Event{Device: fmt.Sprintf("device-%02d", d), Time: weir.Time(t)}
}

type Alert struct {
	Device   string
	LastSeen weir.Time
}

// Inactivity finds each device's silences in event time, exactly, however
// the events of a device arrive (they come from several source splits,
// out of order): an event is only looked at once the watermark passed it,
// when every earlier one has arrived. Until then it waits in pending, with
// a timer at its time; timers fire in timestamp order, so the events are
// seen in order. Each one moves the device's silence timer to last+Silence;
// a silence timer that fires finds the device silent since last.
type Inactivity struct {
	pending *weir.MapState[weir.Time, bool] // event times the watermark has not reached
	last    *weir.ValueState[weir.Time]     // the latest event the watermark passed
}

func (f *Inactivity) ProcessElement(ctx *weir.Context[string, Alert], e Event) error {
	if e.Time <= ctx.CurrentWatermark() {
		return nil // later than the watermark allows; not the case here
	}
	f.pending.Put(ctx, e.Time, true)
	ctx.RegisterEventTimeTimer(e.Time)
	return nil
}

func (f *Inactivity) OnTimer(ctx *weir.Context[string, Alert], t weir.Timer) error {
	last, seen := f.last.Value(ctx)
	if _, isEvent := f.pending.Get(ctx, t.Timestamp); isEvent {
		f.pending.Remove(ctx, t.Timestamp)
		// The silence timer at last+Silence stays: it is ignored when it fires
		// after a later event. Deleting it could delete an event's timer
		// of the same timestamp (timers of a key are one per timestamp).
		f.last.Update(ctx, t.Timestamp)
		ctx.RegisterEventTimeTimer(t.Timestamp.Add(Silence))
		return nil
	}
	if seen && last.Add(Silence) == t.Timestamp {
		ctx.Emit(Alert{Device: ctx.Key(), LastSeen: last})
	}
	return nil
}

func main() {
	out := env("ALERT_OUT", "/tmp/weir-alerts")
	n, _ := strconv.ParseInt(env("ALERT_EVENTS", "600000"), 10, 64)
	rate, _ := strconv.ParseFloat(env("ALERT_RATE", "2000"), 64)

	job := weir.NewJob("inactivity-alert", weir.Checkpointing(time.Second))
	events := weir.FromSource(job, "events", weir.Generate(n, Events, weir.Rate(rate), weir.EventTime(time.Millisecond, 0)),
		weir.Parallelism(2), weir.Watermarks(100*time.Millisecond, 0))
	alerts := weir.Process(weir.KeyBy(events, func(e Event) string { return e.Device }), "inactivity",
		func() weir.KeyedProcessFunction[string, Event, Alert] {
			return &Inactivity{pending: weir.NewMapState[weir.Time, bool]("pending"), last: weir.NewValueState[weir.Time]("last-seen")}
		}, weir.Parallelism(2))
	weir.SinkTo(alerts, "alerts", files.Sink(out, func(a Alert) string { return fmt.Sprintf("%s,%d", a.Device, a.LastSeen) }))
	program.Main(job)
}

func env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
