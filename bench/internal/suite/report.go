// Package suite holds the benchmark suite and the report it fills:
// one table on stdout and the same as JSON (bench/results/latest.json,
// schema in bench/README.md).
package suite

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/weirproject/weir/bench/internal/stats"
)

// SchemaVersion is bumped on incompatible changes of the JSON report.
const SchemaVersion = 1

// Report is one run of the suite.
type Report struct {
	SchemaVersion int       `json:"schema_version"`
	StartedAt     time.Time `json:"started_at"`
	FinishedAt    time.Time `json:"finished_at"`
	DurationS     float64   `json:"duration_s"`
	Machine       Machine   `json:"machine"`
	Git           Git       `json:"git"`
	Options       Options   `json:"options"`
	Benchmarks    []*Bench  `json:"benchmarks"`
	// Problems are system problems the harness noticed (daemons that did
	// not shut down cleanly, jobs that failed), benchmark by benchmark.
	Problems []string `json:"problems,omitempty"`
}

// Machine is where the run happened.
type Machine struct {
	Hostname   string `json:"hostname"`
	CPUs       int    `json:"cpus"`
	CPUModel   string `json:"cpu_model"`
	MemTotalMB int64  `json:"mem_total_mb"`
	Kernel     string `json:"kernel"`
	GoVersion  string `json:"go_version"`
	TmpFS      string `json:"work_filesystem"`
}

// Git is the commit the binaries were built from.
type Git struct {
	Commit string `json:"commit"`
	Dirty  bool   `json:"dirty"`
}

// Options are the harness settings of the run.
type Options struct {
	Only    []string `json:"only,omitempty"`
	Quick   bool     `json:"quick"`
	Profile bool     `json:"profile"`
	WorkDir string   `json:"work_dir"`
}

// Bench is one benchmark's outcome.
type Bench struct {
	ID        string   `json:"id"`
	Title     string   `json:"title"`
	Status    string   `json:"status"` // ok, error
	Error     string   `json:"error,omitempty"`
	DurationS float64  `json:"duration_s"`
	Points    []*Point `json:"points"`
	Goals     []*Goal  `json:"goals,omitempty"`
	Notes     []string `json:"notes,omitempty"`
	Profiles  []string `json:"profiles,omitempty"`
	// Host is the load the rest of the machine put on it meanwhile.
	Host *HostLoad `json:"host_load,omitempty"`
}

// HostLoad is how busy the machine was with processes the harness did not
// start, while one benchmark ran: the suite shares the machine.
type HostLoad struct {
	ForeignCoresMean float64 `json:"foreign_cpu_cores_mean"`
	ForeignCoresPeak float64 `json:"foreign_cpu_cores_peak"`
	LoadAvgStart     float64 `json:"loadavg_1m_start"`
	QuietWaitS       float64 `json:"quiet_wait_s,omitempty"`
}

// Point is one measured quantity, repeated.
type Point struct {
	Name           string `json:"name"`
	Unit           string `json:"unit"`
	HigherIsBetter bool   `json:"higher_is_better"`
	stats.Summary
	Samples []float64 `json:"samples,omitempty"`
	// Baseline names the in-run baseline this point is compared with and
	// BaselineValue is its median; Ratio is Median / BaselineValue.
	Baseline      string  `json:"baseline,omitempty"`
	BaselineValue float64 `json:"baseline_value,omitempty"`
	BaselineUnit  string  `json:"baseline_unit,omitempty"`
	Ratio         float64 `json:"ratio,omitempty"`
	// Extra holds secondary numbers of the point (CPU cores used, bytes
	// per record, ...), named with their unit.
	Extra map[string]float64 `json:"extra,omitempty"`
}

// Goal is one of the targets, checked against a measured value.
type Goal struct {
	Text   string  `json:"text"`
	Value  float64 `json:"value"`
	Op     string  `json:"op"` // "<=" or ">="
	Target float64 `json:"target"`
	Unit   string  `json:"unit,omitempty"`
	Met    bool    `json:"met"`
}

// maxSamples bounds the samples kept in the JSON per point.
const maxSamples = 300

// Add records a point from raw samples.
func (b *Bench) Add(name, unit string, higherIsBetter bool, samples []float64) *Point {
	p := &Point{Name: name, Unit: unit, HigherIsBetter: higherIsBetter, Summary: stats.Summarize(samples, higherIsBetter)}
	if len(samples) <= maxSamples {
		p.Samples = roundAll(samples)
	}
	b.Points = append(b.Points, p)
	return p
}

// Against sets the point's baseline.
func (p *Point) Against(name string, value float64, unit string) *Point {
	p.Baseline, p.BaselineValue, p.BaselineUnit = name, value, unit
	if value != 0 {
		p.Ratio = p.Median / value
	}
	return p
}

// With adds a secondary number.
func (p *Point) With(name string, v float64) *Point {
	if p.Extra == nil {
		p.Extra = map[string]float64{}
	}
	p.Extra[name] = round(v)
	return p
}

// Goal checks value op target.
func (b *Bench) Goal(text string, value float64, op string, target float64, unit string) {
	met := false
	switch op {
	case "<=":
		met = value <= target
	case ">=":
		met = value >= target
	}
	if math.IsNaN(value) {
		met = false
	}
	b.Goals = append(b.Goals, &Goal{Text: text, Value: round(value), Op: op, Target: target, Unit: unit, Met: met})
}

// Note adds a remark shown under the table.
func (b *Bench) Note(format string, args ...any) {
	b.Notes = append(b.Notes, fmt.Sprintf(format, args...))
}

// Point finds a point by name.
func (b *Bench) Point(name string) *Point {
	for _, p := range b.Points {
		if p.Name == name {
			return p
		}
	}
	return nil
}

func round(v float64) float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	// 4 significant digits.
	e := math.Pow(10, 3-math.Floor(math.Log10(math.Abs(v))))
	return math.Round(v*e) / e
}

func roundAll(s []float64) []float64 {
	out := make([]float64, len(s))
	for i, v := range s {
		out[i] = round(v)
	}
	return out
}

// fmtNum prints a number compactly with its unit.
func fmtNum(v float64, unit string) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	a := math.Abs(v)
	var s string
	switch {
	case a == 0:
		s = "0"
	case a >= 1e9:
		s = fmt.Sprintf("%.3gG", v/1e9)
	case a >= 1e6:
		s = fmt.Sprintf("%.3gM", v/1e6)
	case a >= 1e4:
		s = fmt.Sprintf("%.3gk", v/1e3)
	case a >= 100:
		s = fmt.Sprintf("%.0f", v)
	case a >= 1:
		s = fmt.Sprintf("%.3g", v)
	default:
		s = fmt.Sprintf("%.3g", v)
	}
	if unit != "" {
		s += " " + unit
	}
	return s
}

// WriteTable prints the report as one table, goals and notes below it.
func (r *Report) WriteTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "bench\tpoint\tmedian\tp99\tn\tbaseline (in-run)\tratio")
	for _, b := range r.Benchmarks {
		if b.Status != "ok" && len(b.Points) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t\t\t\t\t\n", b.ID, "ERROR: "+firstLine(b.Error))
			continue
		}
		for i, p := range b.Points {
			id := ""
			if i == 0 {
				id = b.ID
			}
			base, ratio := "", ""
			if p.Baseline != "" {
				base = fmt.Sprintf("%s = %s", p.Baseline, fmtNum(p.BaselineValue, p.BaselineUnit))
				if p.Ratio != 0 {
					ratio = fmt.Sprintf("%.3g", p.Ratio)
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", id, p.Name, fmtNum(p.Median, p.Unit), fmtNum(p.P99, p.Unit), p.N, base, ratio)
		}
		if b.Status != "ok" {
			fmt.Fprintf(tw, "%s\t%s\t\t\t\t\t\n", "", "ERROR: "+firstLine(b.Error))
		}
	}
	tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintln(w, "goals:")
	for _, b := range r.Benchmarks {
		for _, g := range b.Goals {
			mark := "MISSED"
			if g.Met {
				mark = "met"
			}
			fmt.Fprintf(w, "  %-3s %-6s %s: %s (target %s %s)\n", b.ID, mark, g.Text, fmtNum(g.Value, g.Unit), g.Op, fmtNum(g.Target, g.Unit))
		}
	}
	var notes []string
	for _, b := range r.Benchmarks {
		if h := b.Host; h != nil && h.ForeignCoresMean >= 0.1 {
			notes = append(notes, fmt.Sprintf("  %s: other processes on the host used %.2f CPU cores on average (peak %.2f) while it ran: its numbers are disturbed",
				b.ID, h.ForeignCoresMean, h.ForeignCoresPeak))
		}
		for _, n := range b.Notes {
			notes = append(notes, fmt.Sprintf("  %s: %s", b.ID, n))
		}
		for _, p := range b.Profiles {
			notes = append(notes, fmt.Sprintf("  %s: profile %s", b.ID, p))
		}
	}
	if len(notes) > 0 {
		fmt.Fprintln(w, "notes:")
		fmt.Fprintln(w, strings.Join(notes, "\n"))
	}
	if len(r.Problems) > 0 {
		fmt.Fprintln(w, "system problems noticed:")
		for _, p := range r.Problems {
			fmt.Fprintf(w, "  %s\n", firstLines(p, 6))
		}
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n    ")
}

// bench finds a benchmark of the report by ID.
func (r *Report) bench(id string) *Bench {
	for _, b := range r.Benchmarks {
		if b.ID == id {
			return b
		}
	}
	return nil
}
