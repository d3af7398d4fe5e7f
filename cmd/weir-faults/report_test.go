package main

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/check"
	"github.com/weirproject/weir/internal/window"
	"github.com/weirproject/weir/sdk"
)

func TestReplaceSectionKeepsTheRest(t *testing.T) {
	doc := "# Reliability\n\nintro\n"
	doc = replaceSection(doc, matrixBegin, matrixEnd, "table 1\n")
	doc = replaceSection(doc, soakBegin, soakEnd, "soak 1\n")
	doc = replaceSection(doc, matrixBegin, matrixEnd, "table 2\n")
	want := "# Reliability\n\nintro\n\n" + matrixBegin + "\ntable 2\n" + matrixEnd + "\n\n" + soakBegin + "\nsoak 1\n" + soakEnd + "\n"
	if doc != want {
		t.Fatalf("got\n%s\nwant\n%s", doc, want)
	}
}

// A count that starts over under a new leader is summed, not lost.
func TestCounterAcrossLeaders(t *testing.T) {
	var c counter
	for _, v := range []int64{1, 5, 7, 2, 4, 0, 3} {
		c.observe(v)
	}
	if got := c.total(); got != 7+4+3 {
		t.Fatalf("total %d, want 14", got)
	}
}

// The checkers the tool runs fail on a deliberately broken output: a
// window lost, one committed twice.
func TestCheckWindowsFailsOnBrokenOutput(t *testing.T) {
	const count = 4000
	spec, err := window.Parse(sdk.Config(windowConfig))
	if err != nil {
		t.Fatal(err)
	}
	want := check.BatchWindows(spec, check.SequenceRecords(count, winKeys, etStepMs, etJitterMs))
	var lines []string
	for id, res := range want {
		lines = append(lines, id+","+res)
	}
	slices.Sort(lines)
	if err := checkWindows(lines, count); err != nil {
		t.Fatalf("the batch result itself: %v", err)
	}
	if err := checkWindows(lines[1:], count); err == nil || !strings.Contains(err.Error(), "1 lost") {
		t.Fatalf("a window lost: %v", err)
	}
	if err := checkWindows(append(lines, lines[0]), count); err == nil || !strings.Contains(err.Error(), "1 duplicated") {
		t.Fatalf("a window twice: %v", err)
	}
}

func TestRenderMatrixNamesFailures(t *testing.T) {
	f, _ := faultByName("tm-kill")
	rows := []rowResult{
		{fault: f, obs: &observation{target: "taskmanager-1", restarts: 2, redeploys: 6, failed: 1,
			reasons: map[string]int{"declined": 1}, recovery: 2345 * time.Millisecond, leaders: []string{"jobmanager-1"}},
			sum: verdict{Records: 10}, windows: verdict{Records: 3}},
		{fault: f, err: errors.New("expectation: no job restarted"), sum: verdict{Err: "check: key 3: 1 lost"}},
	}
	out := renderMatrix(runInfo{date: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC), commit: "abc1234", host: "2 cores"}, rows)
	for _, want := range []string{
		"2026-12-02 12:00 UTC, commit `abc1234`",
		"| taskmanager-1 | 2.3s | 1 (declined) | 2 / 6 | jm 1 | 0 / 0 | pass |",
		"**FAIL**",
		"- **tm-kill**: expectation: no job restarted; running sum: check: key 3: 1 lost",
		"clock:",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("matrix lacks %q:\n%s", want, out)
		}
	}
}

func TestShortReasonNamesTheKind(t *testing.T) {
	for in, want := range map[string]string{
		"coordinator: checkpoint failed: CHECKPOINT_FAILURE_REASON_IO_EXCEPTION: declined by x: state: upload": "IO_EXCEPTION",
		"CHECKPOINT_FAILURE_REASON_CHECKPOINT_EXPIRED":                                                         "CHECKPOINT_EXPIRED",
		"task lost (taskmanager-1)": "task lost",
	} {
		if got := shortReason(in); got != want {
			t.Errorf("shortReason(%q) = %q, want %q", in, got, want)
		}
	}
}

// Every kind of fault comes once per round of the soak's deck.
func TestDeckDealsEveryFaultEachRound(t *testing.T) {
	d := &deck{r: newRand(7)}
	for round := range 3 {
		seen := map[string]bool{}
		for range faults {
			seen[d.deal().name] = true
		}
		if len(seen) != len(faults) {
			t.Fatalf("round %d dealt %d kinds of %d", round, len(seen), len(faults))
		}
	}
}
