package watermark

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// start is the scenarios' processing time origin; times print relative to it.
var start = time.Unix(1_000_000, 0)

// TestValveScenarios runs testdata/valve. Commands:
//
//	valve n=<channels>
//	wm ch=<i> ts=<ms|min|max>
//	idle ch=<i>
//	active ch=<i>
//	eop ch=<i>
//	explain
//
// The valve's invariants are checked after every command.
func TestValveScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/valve", func(t *testing.T, path string) {
		var h *valveHarness
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd == "valve" {
				h = newValveHarness(intArg(t, d, "n"))
				return "ok"
			}
			if h == nil {
				d.Fatalf(t, "%s before valve", d.Cmd)
			}
			var out string
			switch d.Cmd {
			case "wm":
				out = h.step(func(v *Valve) Output { return v.OnWatermark(intArg(t, d, "ch"), tsArg(t, d, "ts")) })
			case "idle":
				out = h.step(func(v *Valve) Output { return v.OnStatus(intArg(t, d, "ch"), true) })
			case "active":
				out = h.step(func(v *Valve) Output { return v.OnStatus(intArg(t, d, "ch"), false) })
			case "eop":
				out = h.step(func(v *Valve) Output { return v.OnEndOfPartition(intArg(t, d, "ch")) })
			case "explain":
				out = formatExplanation(h.v.Explain())
			default:
				d.Fatalf(t, "unknown command %q", d.Cmd)
			}
			if err := h.check(); err != nil {
				d.Fatalf(t, "invariant: %v", err)
			}
			return out
		})
	})
}

// TestGeneratorScenarios runs testdata/generator. Commands:
//
//	gen [ooo=<d>] [idle=<d>] [interval=<d>]
//	split add id=<id> | split remove id=<id>
//	record [split=<id>] ts=<ms>
//	tick d=<duration>        moves processing time
//	poll
//	next                     NextPoll, relative to the scenario start
//	end
//	explain
//
// The generator's invariants are checked after every command.
func TestGeneratorScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/generator", func(t *testing.T, path string) {
		var h *genHarness
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd == "gen" {
				h = newGenHarness(Strategy{
					MaxOutOfOrderness: durArg(t, d, "ooo"),
					IdleTimeout:       durArg(t, d, "idle"),
					Interval:          durArg(t, d, "interval"),
				})
				return "ok"
			}
			if h == nil {
				d.Fatalf(t, "%s before gen", d.Cmd)
			}
			var out string
			switch d.Cmd {
			case "split":
				id := strArg(t, d, "id")
				switch {
				case d.HasArg("add"):
					h.g.AddSplit(id, h.now)
				case d.HasArg("remove"):
					h.g.RemoveSplit(id, h.now)
				default:
					d.Fatalf(t, "split add|remove")
				}
				out = "ok"
			case "record":
				id := ""
				if d.HasArg("split") {
					id = strArg(t, d, "split")
				}
				h.g.OnRecord(id, tsArg(t, d, "ts"), h.now)
				out = "ok"
			case "tick":
				h.now = h.now.Add(durArg(t, d, "d"))
				out = "now=" + rel(h.now)
			case "poll":
				out = h.step(h.g.Poll(h.now), false)
			case "end":
				out = h.step(h.g.End(), true)
			case "next":
				if at, ok := h.g.NextPoll(h.now); ok {
					out = rel(at)
				} else {
					out = "none"
				}
			case "explain":
				out = formatGenExplanation(h.g.Explain())
			default:
				d.Fatalf(t, "unknown command %q", d.Cmd)
			}
			if err := h.check(); err != nil {
				d.Fatalf(t, "invariant: %v", err)
			}
			return out
		})
	})
}

// TestValveRandom drives valves with random events, checking the invariants
// after each.
func TestValveRandom(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 1))
		n := r.IntN(5) + 1
		h := newValveHarness(n)
		var trace []string
		for range 60 {
			ch := r.IntN(n)
			var op string
			switch k := r.IntN(10); {
			case k < 6:
				ts := int64(r.IntN(40))
				op = fmt.Sprintf("wm ch=%d ts=%d", ch, ts)
				h.step(func(v *Valve) Output { return v.OnWatermark(ch, ts) })
			case k < 8:
				op = fmt.Sprintf("idle ch=%d", ch)
				h.step(func(v *Valve) Output { return v.OnStatus(ch, true) })
			case k < 10 && r.IntN(4) > 0:
				op = fmt.Sprintf("active ch=%d", ch)
				h.step(func(v *Valve) Output { return v.OnStatus(ch, false) })
			default:
				op = fmt.Sprintf("eop ch=%d", ch)
				h.step(func(v *Valve) Output { return v.OnEndOfPartition(ch) })
			}
			trace = append(trace, op)
			if err := h.check(); err != nil {
				t.Fatalf("seed %d n=%d: %v after:\n%s", seed, n, err, strings.Join(trace, "\n"))
			}
		}
	}
}

// TestGeneratorRandom drives generators with random events, checking the
// invariants (NextPoll's included) after each.
func TestGeneratorRandom(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 2))
		s := Strategy{
			MaxOutOfOrderness: time.Duration(r.IntN(3)) * 10 * time.Millisecond,
			IdleTimeout:       time.Duration(r.IntN(3)) * 500 * time.Millisecond,
			Interval:          time.Duration(r.IntN(3)) * 100 * time.Millisecond,
		}
		h := newGenHarness(s)
		ids := []string{"", "a", "b"}
		var trace []string
		for range 80 {
			id := ids[r.IntN(len(ids))]
			var op string
			switch k := r.IntN(20); {
			case k < 6:
				ts := int64(r.IntN(1000))
				op = fmt.Sprintf("record split=%q ts=%d", id, ts)
				h.g.OnRecord(id, ts, h.now)
			case k < 8:
				op = "split add " + strconv.Quote(id)
				h.g.AddSplit(id, h.now)
			case k < 9:
				op = "split remove " + strconv.Quote(id)
				h.g.RemoveSplit(id, h.now)
			case k < 13:
				d := time.Duration(r.IntN(700)) * time.Millisecond
				op = "tick " + d.String()
				h.now = h.now.Add(d)
			case k < 19:
				op = "poll"
				h.step(h.g.Poll(h.now), false)
			case r.IntN(10) == 0:
				op = "end"
				h.step(h.g.End(), true)
			default:
				op = "next"
				h.g.NextPoll(h.now)
			}
			trace = append(trace, op)
			if err := h.check(); err != nil {
				t.Fatalf("seed %d %+v: %v after:\n%s", seed, s, err, strings.Join(trace, "\n"))
			}
		}
	}
}

type valveHarness struct {
	v    *Valve
	last Output // what the previous step left, to check monotonicity
	err  error  // an output inconsistent with its step
}

func newValveHarness(n int) *valveHarness {
	v := NewValve(n)
	return &valveHarness{v: v, last: Output{Watermark: v.Watermark(), Idle: v.Idle()}}
}

func (h *valveHarness) step(f func(*Valve) Output) string {
	o := f(h.v)
	if h.err == nil {
		h.err = checkOutput(h.last, o, h.v.Watermark(), h.v.Idle())
	}
	h.last = o
	return o.String()
}

// check verifies the valve's invariants against its explanation.
func (h *valveHarness) check() error {
	if h.err != nil {
		return h.err
	}
	e := h.v.Explain()
	if e.Watermark != h.v.Watermark() || e.Idle != h.v.Idle() {
		return fmt.Errorf("explanation %v/%v disagrees with %v/%v", e.Watermark, e.Idle, h.v.Watermark(), h.v.Idle())
	}
	live, idle, low, aligned := 0, 0, Max, false
	for i, c := range e.Channels {
		if c.Finished {
			if c.Aligned || c.Idle {
				return fmt.Errorf("finished channel %d counted as aligned or idle", i)
			}
			continue
		}
		live++
		if c.Idle {
			idle++
			if c.Aligned {
				return fmt.Errorf("idle channel %d aligned", i)
			}
			continue
		}
		// An active channel counts exactly when it cannot pull the output
		// back.
		if c.Aligned != (c.Watermark >= e.Watermark) {
			return fmt.Errorf("channel %d: aligned=%v with wm %d, output %d", i, c.Aligned, c.Watermark, e.Watermark)
		}
		if c.Aligned {
			low, aligned = min(low, c.Watermark), true
		}
	}
	if aligned && e.Watermark != low {
		return fmt.Errorf("output %d, min over active aligned channels %d", e.Watermark, low)
	}
	if want := live > 0 && idle == live; e.Idle != want {
		return fmt.Errorf("idle=%v with %d/%d unfinished channels idle", e.Idle, idle, live)
	}
	if len(e.Channels) > 0 && live == 0 && e.Watermark != Max {
		return fmt.Errorf("all channels finished, output %d", e.Watermark)
	}
	var holding []int
	for i, c := range e.Channels {
		if aligned && c.Aligned && c.Watermark == low {
			holding = append(holding, i)
		}
	}
	if fmt.Sprint(holding) != fmt.Sprint(e.Holding) {
		return fmt.Errorf("holding %v, want %v", e.Holding, holding)
	}
	return nil
}

// checkOutput verifies that an output reports exactly the change from the
// previous one and agrees with the machine's accessors.
func checkOutput(prev, o Output, wm int64, idle bool) error {
	switch {
	case o.Watermark != wm || o.Idle != idle:
		return fmt.Errorf("output %v disagrees with state wm=%d idle=%v", o, wm, idle)
	case o.Watermark < prev.Watermark:
		return fmt.Errorf("watermark went back from %d to %d", prev.Watermark, o.Watermark)
	case o.Advanced != (o.Watermark > prev.Watermark):
		return fmt.Errorf("advanced=%v from %d to %d", o.Advanced, prev.Watermark, o.Watermark)
	case o.StatusChanged != (o.Idle != prev.Idle):
		return fmt.Errorf("status changed=%v from idle=%v to %v", o.StatusChanged, prev.Idle, o.Idle)
	}
	return nil
}

type genHarness struct {
	g        *Generator
	s        Strategy
	now      time.Time
	last     Output
	lastEmit time.Time
	emitted  bool
	err      error
}

func newGenHarness(s Strategy) *genHarness {
	g := NewGenerator(s, start)
	if s.Interval == 0 {
		s.Interval = DefaultInterval
	}
	return &genHarness{g: g, s: s, now: start, last: Output{Watermark: Min}}
}

func (h *genHarness) step(o Output, end bool) string {
	e := h.g.Explain()
	if h.err == nil {
		h.err = checkOutput(h.last, o, e.Watermark, e.Idle)
	}
	if h.err == nil && o.Advanced && !end {
		switch {
		case o.Idle:
			h.err = fmt.Errorf("idle output advanced to %d", o.Watermark)
		case h.emitted && h.now.Sub(h.lastEmit) < h.s.Interval:
			h.err = fmt.Errorf("emitted %s after the previous emission", h.now.Sub(h.lastEmit))
		case o.Watermark != e.Combined:
			h.err = fmt.Errorf("emitted %d, combined is %d", o.Watermark, e.Combined)
		}
		h.lastEmit, h.emitted = h.now, true
	}
	h.last = o
	return o.String()
}

// check verifies the generator's invariants; those about NextPoll on a copy,
// so that checking does not move the scenario's generator.
func (h *genHarness) check() error {
	if h.err != nil {
		return h.err
	}
	e := h.g.Explain()
	if e.Watermark != h.last.Watermark || e.Idle != h.last.Idle {
		return fmt.Errorf("state %d/%v changed without a poll (last output %v)", e.Watermark, e.Idle, h.last)
	}
	for _, sp := range e.Splits {
		if sp.MaxTimestamp == Min && sp.Watermark != Min {
			return fmt.Errorf("split %q without records at %d", sp.ID, sp.Watermark)
		}
	}
	nothingNew := func(at time.Time) error {
		g := cloneGenerator(h.g)
		if o := g.Poll(at); o.Advanced || o.StatusChanged {
			return fmt.Errorf("poll at %s returned %v", rel(at), o)
		}
		return nil
	}
	at, ok := cloneGenerator(h.g).NextPoll(h.now)
	switch {
	case !ok:
		// Nothing pending means nothing will ever happen without input.
		return nothingNew(h.now.Add(100 * 24 * time.Hour))
	case at.Before(h.now):
		return fmt.Errorf("next poll %s before now %s", rel(at), rel(h.now))
	case at.Equal(h.now):
		if o := cloneGenerator(h.g).Poll(at); !o.Advanced && !o.StatusChanged {
			return fmt.Errorf("next poll is now, but poll returned nothing new")
		}
	default:
		// Nothing may happen before the announced instant; conditions only
		// become true as time passes, so its last moment is the worst case.
		return nothingNew(at.Add(-time.Nanosecond))
	}
	return nil
}

func cloneGenerator(g *Generator) *Generator {
	c := *g
	c.splits = maps.Clone(g.splits)
	for id, sp := range c.splits {
		cp := *sp
		c.splits[id] = &cp
	}
	return &c
}

func formatExplanation(e Explanation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "wm=%s %s holding=%v\n", FormatTimestamp(e.Watermark), status(e.Idle), e.Holding)
	for i, c := range e.Channels {
		switch {
		case c.Finished:
			fmt.Fprintf(&b, "ch%d: wm=%s finished\n", i, FormatTimestamp(c.Watermark))
		default:
			al := ""
			if !c.Idle && !c.Aligned {
				al = " unaligned"
			}
			fmt.Fprintf(&b, "ch%d: wm=%s %s%s\n", i, FormatTimestamp(c.Watermark), status(c.Idle), al)
		}
	}
	return b.String()
}

func formatGenExplanation(e GeneratorExplanation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "wm=%s combined=%s %s\n", FormatTimestamp(e.Watermark), FormatTimestamp(e.Combined), status(e.Idle))
	for _, sp := range e.Splits {
		fmt.Fprintf(&b, "split %q: max-ts=%s wm=%s %s\n", sp.ID, FormatTimestamp(sp.MaxTimestamp), FormatTimestamp(sp.Watermark), status(sp.Idle))
	}
	return b.String()
}

func status(idle bool) string {
	if idle {
		return "idle"
	}
	return "active"
}

func rel(t time.Time) string { return "+" + t.Sub(start).String() }

func strArg(t *testing.T, d *datadriven.TestData, key string) string {
	t.Helper()
	for _, a := range d.CmdArgs {
		if a.Key == key {
			if len(a.Vals) != 1 {
				d.Fatalf(t, "%s: want one value", key)
			}
			return a.Vals[0]
		}
	}
	d.Fatalf(t, "missing %s=", key)
	return ""
}

func intArg(t *testing.T, d *datadriven.TestData, key string) int {
	t.Helper()
	v, err := strconv.Atoi(strArg(t, d, key))
	if err != nil {
		d.Fatalf(t, "%s: %v", key, err)
	}
	return v
}

func tsArg(t *testing.T, d *datadriven.TestData, key string) int64 {
	t.Helper()
	switch s := strArg(t, d, key); s {
	case "min":
		return Min
	case "max":
		return Max
	default:
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			d.Fatalf(t, "%s: %v", key, err)
		}
		return v
	}
}

func durArg(t *testing.T, d *datadriven.TestData, key string) time.Duration {
	t.Helper()
	if !d.HasArg(key) {
		return 0
	}
	v, err := time.ParseDuration(strArg(t, d, key))
	if err != nil {
		d.Fatalf(t, "%s: %v", key, err)
	}
	return v
}
