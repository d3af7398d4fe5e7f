package check

import (
	"fmt"
	"maps"
	"slices"
)

// Lines checks committed output against the lines a batch computation of
// the same query gives, as multisets (the order of committed lines is not
// defined): every line exactly as many times as in want. The error counts
// the lines lost, duplicated and unexpected, and names the first few.
func Lines(got, want []string) error {
	return compareCounts("lines", "line", count(got), count(want))
}

func count(lines []string) map[string]int {
	m := make(map[string]int, len(lines))
	for _, l := range lines {
		m[l]++
	}
	return m
}

// compareCounts compares how many times each item was committed (got) with
// how many times the batch result has it (want); items names them in the
// error, item one of them.
func compareCounts(items, item string, got, want map[string]int) error {
	var ex examples
	total, lost, dups, extra := 0, 0, 0, 0
	for _, l := range slices.Sorted(maps.Keys(want)) {
		w, g := want[l], got[l]
		total += w
		switch {
		case g < w:
			lost += w - g
			ex.add("%s %s lost (committed %d of %d times)", item, l, g, w)
		case g > w:
			dups += g - w
			ex.add("%s %s duplicated (committed %d times, want %d)", item, l, g, w)
		}
	}
	for _, l := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[l]; !ok {
			extra += got[l]
			ex.add("%s %s (%d times) is not in the batch result", item, l, got[l])
		}
	}
	if len(ex) == 0 {
		return nil
	}
	return fmt.Errorf("check: %d %s: %d lost, %d duplicated, %d unexpected: %s", total, items, lost, dups, extra, ex.String())
}
