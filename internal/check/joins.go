package check

import (
	"fmt"
	"strconv"
	"strings"
)

// BatchIntervalJoin computes an interval join of left and right at once:
// every pair of a left record l and a right record r of the same key with
// l.ts + lowerMs <= r.ts <= l.ts + upperMs, as the line
// "key,<l.value>|<r.value>" the join's output makes in a file-sink, mapped
// to how many times it must be committed (pairs with equal values repeat).
// That is what a streaming run must commit whatever order the records
// came in and whatever failed on the way, given no record was late.
func BatchIntervalJoin(left, right []Record, lowerMs, upperMs int64) map[string]int {
	return batchJoin(left, right, func(l, r Record) bool {
		return l.Timestamp+lowerMs <= r.Timestamp && r.Timestamp <= l.Timestamp+upperMs
	})
}

// BatchWindowJoin computes a tumbling window join of left and right at
// once: every pair of records of the same key in the same window of
// sizeMs (windows start at multiples of sizeMs), as BatchIntervalJoin's
// lines.
func BatchWindowJoin(left, right []Record, sizeMs int64) map[string]int {
	start := func(ts int64) int64 { return ts - ((ts%sizeMs)+sizeMs)%sizeMs }
	return batchJoin(left, right, func(l, r Record) bool {
		return start(l.Timestamp) == start(r.Timestamp)
	})
}

func batchJoin(left, right []Record, match func(l, r Record) bool) map[string]int {
	byKey := map[string][]Record{}
	for _, r := range right {
		byKey[r.Key] = append(byKey[r.Key], r)
	}
	want := map[string]int{}
	for _, l := range left {
		for _, r := range byKey[l.Key] {
			if match(l, r) {
				want[joinLine(l.Key, l.Value, r.Value)]++
			}
		}
	}
	return want
}

func joinLine(key string, lv, rv int64) string {
	return key + "," + strconv.FormatInt(lv, 10) + "|" + strconv.FormatInt(rv, 10)
}

// Joins checks committed join output, lines "key,<left value>|<right
// value>", against the batch result want: every expected line exactly as
// many times as want says. The error names the first few pairs lost,
// duplicated or unexpected.
func Joins(lines []string, want map[string]int) error {
	got := make(map[string]int, len(want))
	for n, l := range lines {
		k, v, ok := strings.Cut(l, ",")
		if !ok || k == "" || !strings.Contains(v, "|") {
			return fmt.Errorf("check: line %d: malformed join output %q (want key,left|right)", n+1, l)
		}
		got[l]++
	}
	return compareCounts("joined pairs", "pair", got, want)
}
