package stats

import "testing"

func TestSummarize(t *testing.T) {
	s := Summarize([]float64{5, 1, 4, 2, 3}, false)
	if s.N != 5 || s.Median != 3 || s.Min != 1 || s.Max != 5 || s.Mean != 3 {
		t.Fatalf("got %+v", s)
	}
	if s.P99 < 4.9 || s.P99 > 5 {
		t.Fatalf("latency p99 = %v, want the high tail", s.P99)
	}
	if h := Summarize([]float64{5, 1, 4, 2, 3}, true); h.P99 < 1 || h.P99 > 1.1 {
		t.Fatalf("throughput p99 = %v, want the low tail", h.P99)
	}
	if e := Summarize(nil, false); e.N != 0 {
		t.Fatalf("empty: %+v", e)
	}
}
