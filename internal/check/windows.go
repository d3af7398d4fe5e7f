package check

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/weirproject/weir/internal/window"
)

// Record is one input record of a windowed job, as the batch computation
// sees it.
type Record struct {
	Key       string
	Timestamp int64
	Value     int64
}

// SequenceRecords are the records sequence-source emits for count, keys
// and its event-time step and jitter (milliseconds): key i mod keys,
// value i, timestamp i*step − (i mod (jitter/step + 1))*step.
func SequenceRecords(count, keys, stepMs, jitterMs int64) []Record {
	period := jitterMs/stepMs + 1
	recs := make([]Record, count)
	for i := range recs {
		n := int64(i)
		recs[i] = Record{Key: strconv.FormatInt(n%keys, 10), Timestamp: n*stepMs - (n%period)*stepMs, Value: n}
	}
	return recs
}

// BatchWindows computes every window of spec over recs at once, as
// "key,start,end" → result: what a streaming run over the same records
// must commit, whatever order they came in and whatever failed on the way
// (given no record was late).
func BatchWindows(spec window.Spec, recs []Record) map[string]string {
	accs := map[string]*window.Acc{}
	add := func(key string, start, end, v int64) {
		id := key + "," + strconv.FormatInt(start, 10) + "," + strconv.FormatInt(end, 10)
		a := accs[id]
		if a == nil {
			a = &window.Acc{}
			accs[id] = a
		}
		a.Add(v)
	}
	if spec.Kind == window.Session {
		byKey := map[string][]Record{}
		for _, r := range recs {
			byKey[r.Key] = append(byKey[r.Key], r)
		}
		for key, rs := range byKey {
			sort.SliceStable(rs, func(i, j int) bool { return rs[i].Timestamp < rs[j].Timestamp })
			// A session grows while the next record starts no later than
			// its end (touching windows merge, as in Flink).
			for i := 0; i < len(rs); {
				start, end := rs[i].Timestamp, rs[i].Timestamp+spec.Gap
				j := i + 1
				for ; j < len(rs) && rs[j].Timestamp <= end; j++ {
					end = max(end, rs[j].Timestamp+spec.Gap)
				}
				for _, r := range rs[i:j] {
					add(key, start, end, r.Value)
				}
				i = j
			}
		}
	} else {
		for _, r := range recs {
			last := r.Timestamp - ((r.Timestamp%spec.Slide)+spec.Slide)%spec.Slide
			for start := last; start > r.Timestamp-spec.Size; start -= spec.Slide {
				add(r.Key, start, start+spec.Size, r.Value)
			}
		}
	}
	out := make(map[string]string, len(accs))
	for id, a := range accs {
		out[id] = string(a.AppendResult(nil, spec.Aggregate))
	}
	return out
}

// Windows checks committed window output, lines "key,start,end,result"
// (the window operator's records as file-sink writes them), against the
// batch result want: every window exactly once, with exactly its result.
// The error names the first few windows lost, duplicated, wrong or
// unexpected.
func Windows(lines []string, want map[string]string) error {
	got := make(map[string]string, len(lines))
	var ex examples
	report := ex.add
	dups, lost, wrong, extra := 0, 0, 0, 0
	for n, l := range lines {
		i := strings.LastIndexByte(l, ',')
		if i < 0 || strings.Count(l, ",") != 3 {
			return fmt.Errorf("check: line %d: malformed window %q (want key,start,end,result)", n+1, l)
		}
		id, res := l[:i], l[i+1:]
		if prev, dup := got[id]; dup {
			dups++
			report("window %s committed twice (%s, %s)", id, prev, res)
			continue
		}
		got[id] = res
	}
	ids := make([]string, 0, len(want))
	for id := range want {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		g, ok := got[id]
		switch {
		case !ok:
			lost++
			report("window %s lost (want %s)", id, want[id])
		case g != want[id]:
			wrong++
			report("window %s = %s, want %s", id, g, want[id])
		}
	}
	for id, g := range got {
		if _, ok := want[id]; !ok {
			extra++
			report("window %s = %s is not in the batch result", id, g)
		}
	}
	if len(ex) == 0 {
		return nil
	}
	return fmt.Errorf("check: %d windows: %d lost, %d duplicated, %d wrong, %d unexpected: %s",
		len(want), lost, dups, wrong, extra, ex.String())
}

// examples are the first few problems a checker found, for its error.
type examples []string

func (e *examples) add(format string, args ...any) {
	switch {
	case len(*e) < 5:
		*e = append(*e, fmt.Sprintf(format, args...))
	case len(*e) == 5:
		*e = append(*e, "...")
	}
}

func (e examples) String() string { return strings.Join(e, "; ") }
