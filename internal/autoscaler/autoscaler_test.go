package autoscaler

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// epoch is where every scenario's clock starts; output is relative to it.
var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// TestScenarios drives the autoscaler with a fluid model of a job: records
// arrive at the sources at a set rate into a backlog (the Kafka lag) and
// flow through a pipeline of units, each subtask of which handles at most
// its capacity per second. Each tick the model reports what Weir's
// TaskManagers would (busy time, record rates, the lag); decisions are
// applied at once unless a scenario makes them fail.
func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := &harness{now: epoch, maxParallelism: 128, slots: 64, running: true}
		datadriven.RunTest(t, path, h.run)
	})
}

type modelUnit struct {
	Unit
	capacity  float64 // records/s per subtask
	reporting int32   // -1: all
}

type harness struct {
	now            time.Time
	cfg            Config
	a              *Autoscaler
	units          []*modelUnit
	maxParallelism int32
	slots          int
	rate           float64
	lag            float64
	running        bool
	state          string
	restarts       int32
	failNext       bool
	stallNext      bool // the next rescale leaves the job RESTARTING

	printed      int // history entries printed
	rescaleTimes []time.Time
}

func (h *harness) run(t *testing.T, td *datadriven.TestData) string {
	var b strings.Builder
	args := map[string]string{}
	for _, a := range td.CmdArgs {
		args[a.Key] = strings.Join(a.Vals, ",")
	}
	str := func(k, def string) string {
		if v, ok := args[k]; ok {
			return v
		}
		return def
	}
	dur := func(k, def string) time.Duration {
		d, err := time.ParseDuration(str(k, def))
		if err != nil {
			t.Fatalf("%s: %s: %v", td.Pos, k, err)
		}
		return d
	}
	num := func(k string, def float64) float64 {
		v, ok := args[k]
		if !ok {
			return def
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatalf("%s: %s: %v", td.Pos, k, err)
		}
		return f
	}
	switch td.Cmd {
	case "config":
		h.cfg = Config{
			TargetUtilization:   num("target-utilization", DefaultTargetUtilization),
			UtilizationBoundary: num("boundary", DefaultUtilizationBoundary),
			Interval:            dur("interval", "10s"),
			MetricsWindow:       dur("window", "30s"),
			Stabilization:       dur("stabilization", "10s"),
			ScaleDownDelay:      dur("scale-down-delay", "1m"),
			CatchUpDuration:     dur("catch-up", "1m"),
			RestartTime:         dur("restart", "0s"),
			MaxRescalesPerHour:  int(num("max-rescales", 10)),
			MaxScaleDownFactor:  num("max-down", DefaultMaxScaleDownFactor),
			MaxScaleUpFactor:    num("max-up", DefaultMaxScaleUpFactor),
			MinParallelism:      int32(num("min", 0)),
			MaxParallelism:      int32(num("max", 0)),
		}
		if v, ok := args["vertex"]; ok {
			name, rest, _ := strings.Cut(v, ":")
			lo, hi, _ := strings.Cut(rest, ":")
			l, _ := strconv.Atoi(lo)
			u, _ := strconv.Atoi(hi)
			h.cfg.Vertices = map[string]Bounds{name: {Min: int32(l), Max: int32(u)}}
		}
		if err := h.cfg.Validate(); err != nil {
			return "invalid: " + err.Error()
		}
		h.slots = int(num("slots", float64(h.slots)))
		h.a = New(h.cfg, h.now, nil)
		return "ok"
	case "unit":
		u := &modelUnit{Unit: Unit{
			Name: str("name", ""), Parallelism: int32(num("parallelism", 1)), MaxParallelism: h.maxParallelism,
			Splits: int32(num("splits", 0)), PendingRecords: -1,
		}, capacity: num("capacity", 1e6), reporting: -1}
		u.Vertices = []string{u.Name}
		if c, ok := args["chained"]; ok {
			u.Vertices = append(u.Vertices, strings.Split(c, ",")...)
		}
		if in, ok := args["inputs"]; ok {
			u.Inputs = strings.Split(in, ",")
		}
		_, u.Source = args["source"]
		_, u.Keyed = args["keyed"]
		u.SlotSharingGroup = str("group", "")
		h.units = append(h.units, u)
		return "ok"
	case "rate":
		h.rate = num("rps", 0)
		return "ok"
	case "set":
		for _, u := range h.units {
			if u.Name == str("name", "") {
				u.reporting = int32(num("reporting", -1))
				u.capacity = num("capacity", u.capacity)
				u.Splits = int32(num("splits", float64(u.Splits)))
				if p, ok := args["parallelism"]; ok {
					n, _ := strconv.Atoi(p)
					u.Parallelism = int32(n)
				}
			}
		}
		return "ok"
	case "job":
		h.running = str("running", "true") == "true"
		h.state = str("state", "RUNNING")
		if _, ok := args["restart"]; ok {
			h.restarts++
		}
		return "ok"
	case "slots":
		h.slots = int(num("n", 0))
		return "ok"
	case "fail-next":
		h.failNext = true
		return "ok"
	case "stall-next":
		h.stallNext = true
		return "ok"
	case "run":
		every := dur("every", "1s")
		end := h.now.Add(dur("for", "1m"))
		for h.now.Before(end) {
			h.now = h.now.Add(every)
			h.tick(t, every)
			h.printNew(&b)
		}
		fmt.Fprintf(&b, "%s: %s lag %.0f\n", h.rel(h.now), h.shape(), h.lag)
		return b.String()
	case "history":
		for _, e := range h.a.History() {
			fmt.Fprintln(&b, h.entry(e))
		}
		return b.String()
	case "evaluations":
		var e Entry
		for _, x := range h.a.History() {
			if x.Evaluations != nil {
				e = x
			}
		}
		fmt.Fprintf(&b, "%s %s\n", h.rel(e.Time), e.Kind)
		for _, ev := range e.Evaluations {
			fmt.Fprintf(&b, "%s p=%d busy=%.0f in=%.0f out=%.0f tpr=%.0f target=%.0f catch-up=%.0f pending=%d util=%.2f → %d (%d): %s\n",
				ev.Vertex, ev.Parallelism, ev.BusyMsPerSecond, ev.RecordsInPerSecond, ev.RecordsOutPerSecond, ev.TrueProcessingRate,
				ev.TargetRate, ev.CatchUpRate, ev.PendingRecords, ev.Utilization, ev.Recommended, ev.Chosen, ev.Reason)
		}
		return b.String()
	default:
		t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
	}
	return ""
}

// tick moves the model on by dt and lets the autoscaler observe it.
func (h *harness) tick(t *testing.T, dt time.Duration) {
	sec := dt.Seconds()
	capacity := math.Inf(1)
	for _, u := range h.units {
		capacity = min(capacity, u.capacity*float64(u.Parallelism))
	}
	processed := 0.0
	if h.running {
		h.lag += h.rate * sec
		processed = min(h.lag, capacity*sec)
		h.lag -= processed
	}
	o := Observation{Running: h.running, State: h.state, Restarts: h.restarts, Slots: h.slots}
	if o.State == "" {
		o.State = "RUNNING"
	}
	if h.running {
		for _, u := range h.units {
			x := u.Unit
			x.Reporting = x.Parallelism
			if u.reporting >= 0 {
				x.Reporting = u.reporting
			}
			r := processed / sec
			x.BusyMsPerSecond = min(1000, 1000*r/(u.capacity*float64(u.Parallelism)))
			x.RecordsOutPerSecond = r
			if !u.Source {
				x.RecordsInPerSecond = r
			} else {
				x.PendingRecords = int64(h.lag)
			}
			if len(h.units) > 0 && h.units[len(h.units)-1] == u {
				x.RecordsOutPerSecond = 0 // the sink
			}
			o.Units = append(o.Units, x)
		}
	}
	d := h.a.Observe(h.now, o)
	if d == nil {
		h.check(t)
		return
	}
	if h.failNext {
		h.failNext = false
		h.a.RescaleFailed(h.now, *d, errors.New("jobmanager: not enough slots"))
		h.check(t)
		return
	}
	for _, u := range h.units {
		if p, ok := d.Parallelism[u.Name]; ok {
			u.Parallelism = p
		}
	}
	h.rescaleTimes = append(h.rescaleTimes, h.now)
	h.a.Rescaled(h.now, *d)
	if h.stallNext {
		// Its restart does not end: a failover during it, the job
		// waiting for slots.
		h.stallNext, h.running, h.state = false, false, "RESTARTING"
		h.restarts++
	}
	h.check(t)
}

// check asserts the invariants after every step.
func (h *harness) check(t *testing.T) {
	t.Helper()
	for _, u := range h.units {
		lo, hi, _ := bounds(h.cfg, u.Unit)
		if p := u.Parallelism; h.rescaleTimes != nil && (p < lo || p > hi) {
			t.Fatalf("%s: %s runs at %d, outside %d..%d", h.rel(h.now), u.Name, p, lo, hi)
		}
	}
	if n := h.cfg.MaxRescalesPerHour; n > 0 {
		for i := range h.rescaleTimes {
			if i+n < len(h.rescaleTimes) && h.rescaleTimes[i+n].Sub(h.rescaleTimes[i]) < time.Hour {
				t.Fatalf("%s: more than %d rescales within an hour: %v", h.rel(h.now), n, h.rescaleTimes)
			}
		}
	}
	for i := 1; i < len(h.rescaleTimes); i++ {
		if gap := h.rescaleTimes[i].Sub(h.rescaleTimes[i-1]); gap < h.cfg.Stabilization+h.cfg.MetricsWindow {
			t.Fatalf("%s: rescales %s apart, within stabilization + metrics window", h.rel(h.now), gap)
		}
	}
	if len(h.a.History()) > historyLimit {
		t.Fatalf("history holds %d entries", len(h.a.History()))
	}
}

func (h *harness) printNew(b *strings.Builder) {
	hist := h.a.History()
	for ; h.printed < len(hist); h.printed++ {
		fmt.Fprintln(b, h.entry(hist[h.printed]))
	}
}

func (h *harness) entry(e Entry) string {
	s := fmt.Sprintf("%s %s: %s", h.rel(e.Time), e.Kind, e.Reason)
	if e.Repeats > 0 {
		s += fmt.Sprintf(" (×%d to %s)", e.Repeats+1, h.rel(e.Last))
	}
	return s
}

func (h *harness) shape() string {
	var parts []string
	for _, u := range h.units {
		parts = append(parts, fmt.Sprintf("%s=%d", u.Name, u.Parallelism))
	}
	return strings.Join(parts, " ")
}

func (h *harness) rel(t time.Time) string {
	return "+" + t.Sub(epoch).String()
}

func TestConfigValidate(t *testing.T) {
	good := Config{TargetUtilization: 0.7, UtilizationBoundary: 0.3, Interval: time.Second, MetricsWindow: time.Minute,
		CatchUpDuration: time.Minute, MaxScaleDownFactor: 0.6, MaxScaleUpFactor: 10, MaxRescalesPerHour: 10}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*Config){
		"utilization":   func(c *Config) { c.TargetUtilization = 1.5 },
		"boundary":      func(c *Config) { c.UtilizationBoundary = -1 },
		"window":        func(c *Config) { c.MetricsWindow = time.Millisecond },
		"catch-up":      func(c *Config) { c.CatchUpDuration = 0 },
		"bounds":        func(c *Config) { c.MinParallelism, c.MaxParallelism = 4, 2 },
		"vertex bounds": func(c *Config) { c.Vertices = map[string]Bounds{"x": {Min: 3, Max: 1}} },
		"down factor":   func(c *Config) { c.MaxScaleDownFactor = 0 },
		"NaN":           func(c *Config) { c.TargetUtilization = math.NaN() },
		"NaN boundary":  func(c *Config) { c.UtilizationBoundary = math.NaN() },
		"infinite up":   func(c *Config) { c.MaxScaleUpFactor = math.Inf(1) },
		"no rescales":   func(c *Config) { c.MaxRescalesPerHour = 0 },
	} {
		c := good
		c.Vertices = nil
		mutate(&c)
		if c.Validate() == nil {
			t.Errorf("%s: accepted %+v", name, c)
		}
	}
}

// The history folds a run of one non-decision into one entry and keeps
// at most historyLimit.
func TestHistoryBounded(t *testing.T) {
	a := New(Config{Interval: time.Second, MetricsWindow: time.Second, CatchUpDuration: time.Second}, epoch, nil)
	for i := range 3 * historyLimit {
		kind := KindWaiting
		if i%2 == 0 {
			kind = KindRescaled
		}
		a.record(Entry{Time: epoch.Add(time.Duration(i) * time.Second), Kind: kind})
	}
	if n := len(a.History()); n != historyLimit {
		t.Fatalf("%d entries, want %d", n, historyLimit)
	}
	a = New(Config{}, epoch, nil)
	for i := range 10 {
		a.record(Entry{Time: epoch.Add(time.Duration(i) * time.Second), Kind: KindNoChange})
	}
	h := a.History()
	if len(h) != 1 || h[0].Repeats != 9 || !h[0].Last.Equal(epoch.Add(9*time.Second)) {
		t.Fatalf("history %+v, want one entry repeated 9 times", h)
	}
	if !slices.Equal([]time.Time(nil), a.Rescales()) {
		t.Fatal("rescales without a rescale")
	}
}
