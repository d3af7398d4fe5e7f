package task

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirproject/weir/sdk"
)

// operatorMetrics holds the gauges operators publish through
// sdk.Context.Metrics. Operators name their families while they run, so
// this is an unchecked collector: it describes nothing up front, and
// the registry takes whatever families it collects.
type operatorMetrics struct {
	mu       sync.Mutex
	families map[string]*opFamily
}

type opFamily struct {
	desc   *prometheus.Desc
	help   string
	labels []string             // the operator's, after the subtask's
	series map[string]*opSeries // by every label value, NUL-joined
}

type opSeries struct {
	values []string
	value  float64
}

func newOperatorMetrics() *operatorMetrics {
	return &operatorMetrics{families: map[string]*opFamily{}}
}

func (m *operatorMetrics) Describe(chan<- *prometheus.Desc) {}

func (m *operatorMetrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, f := range m.families {
		for _, s := range f.series {
			ch <- prometheus.MustNewConstMetric(f.desc, prometheus.GaugeValue, s.value, s.values...)
		}
	}
}

// family returns the family name, creating it at its first use. A
// second definition that disagrees is a bug in an operator: it panics,
// which fails that subtask with the message as its cause.
func (m *operatorMetrics) family(name, help string, subtaskLabels, labels []string) *opFamily {
	m.mu.Lock()
	defer m.mu.Unlock()
	if f, ok := m.families[name]; ok {
		if f.help != help || !slices.Equal(f.labels, labels) {
			panic(fmt.Sprintf("operator metric %s defined twice: labels %v and %v", name, f.labels, labels))
		}
		return f
	}
	f := &opFamily{
		desc:   prometheus.NewDesc(name, help, append(slices.Clone(subtaskLabels), labels...), nil),
		help:   help,
		labels: slices.Clone(labels),
		series: map[string]*opSeries{},
	}
	m.families[name] = f
	return f
}

// subtaskGroup is one subtask's sdk.MetricGroup: it prefixes the
// subtask's label values and remembers its series, so release removes
// them all.
type subtaskGroup struct {
	m      *operatorMetrics
	labels []string // the subtask's label names
	values []string // and values

	mu    sync.Mutex
	owned map[*opFamily]map[string]bool
}

func (m *operatorMetrics) forSubtask(labels, values []string) *subtaskGroup {
	return &subtaskGroup{m: m, labels: labels, values: values, owned: map[*opFamily]map[string]bool{}}
}

func (g *subtaskGroup) Gauge(name, help string, labels ...string) sdk.Gauge {
	return &opGauge{g: g, f: g.m.family(name, help, g.labels, labels)}
}

// release removes every series the subtask set.
func (g *subtaskGroup) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.m.mu.Lock()
	defer g.m.mu.Unlock()
	for f, keys := range g.owned {
		for k := range keys {
			delete(f.series, k)
		}
	}
	g.owned = map[*opFamily]map[string]bool{}
}

type opGauge struct {
	g *subtaskGroup
	f *opFamily
}

func (o *opGauge) key(labelValues []string) ([]string, string) {
	if len(labelValues) != len(o.f.labels) {
		panic(fmt.Sprintf("operator metric %s: %d label values for labels %v", o.f.desc, len(labelValues), o.f.labels))
	}
	values := append(slices.Clone(o.g.values), labelValues...)
	return values, strings.Join(values, "\x00")
}

func (o *opGauge) Set(v float64, labelValues ...string) {
	values, k := o.key(labelValues)
	o.g.mu.Lock()
	defer o.g.mu.Unlock()
	o.g.m.mu.Lock()
	defer o.g.m.mu.Unlock()
	s, ok := o.f.series[k]
	if !ok {
		s = &opSeries{values: values}
		o.f.series[k] = s
		if o.g.owned[o.f] == nil {
			o.g.owned[o.f] = map[string]bool{}
		}
		o.g.owned[o.f][k] = true
	}
	s.value = v
}

func (o *opGauge) Delete(labelValues ...string) {
	_, k := o.key(labelValues)
	o.g.mu.Lock()
	defer o.g.mu.Unlock()
	o.g.m.mu.Lock()
	defer o.g.m.mu.Unlock()
	delete(o.f.series, k)
	delete(o.g.owned[o.f], k)
}
