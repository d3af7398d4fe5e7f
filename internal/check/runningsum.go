// Package check verifies committed job output: it fails on any lost or
// duplicated record, which is what exactly-once means to a user.
package check

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ReadCommitted returns the lines of every committed (visible) file in dir;
// hidden files are uncommitted epochs of a two-phase-commit sink.
func ReadCommitted(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	var lines []string
	for _, e := range entries {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") || strings.HasPrefix(e.Name(), "_") {
			continue
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("check: %w", err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("check: read %s: %w", e.Name(), err)
		}
	}
	return lines, nil
}

// RunningSum checks the output of the running-sum job over sequence-source
// records i in [0, count) with key i mod keys: for each key, the emitted
// sums sorted ascending must step up by exactly the key's input values,
// each once. A lost record leaves a step missing, a duplicated one adds a
// step (or repeats a sum), so both are caught, whatever order records of
// different source subtasks interleaved in.
func RunningSum(lines []string, count, keys int64) error {
	sums := make(map[int64][]int64, keys)
	for n, l := range lines {
		k, v, ok := strings.Cut(l, ",")
		key, err1 := strconv.ParseInt(k, 10, 64)
		sum, err2 := strconv.ParseInt(v, 10, 64)
		if !ok || err1 != nil || err2 != nil || key < 0 || key >= keys {
			return fmt.Errorf("check: line %d: malformed record %q", n+1, l)
		}
		sums[key] = append(sums[key], sum)
	}
	for key := int64(0); key < keys; key++ {
		var want []int64
		for i := key; i < count; i += keys {
			want = append(want, i)
		}
		got := sums[key]
		if len(got) != len(want) {
			return fmt.Errorf("check: key %d: %d output records for %d inputs (%s)", key, len(got), len(want), lostOrDup(len(got), len(want)))
		}
		slices.Sort(got)
		steps := make([]int64, len(got))
		prev := int64(0)
		for i, s := range got {
			steps[i], prev = s-prev, s
		}
		slices.Sort(steps)
		for i := range want {
			if steps[i] != want[i] {
				return fmt.Errorf("check: key %d: running sums do not step by the inputs: input %d expected, step %d found (a record was lost and another duplicated)", key, want[i], steps[i])
			}
		}
	}
	return nil
}

func lostOrDup(got, want int) string {
	if got < want {
		return fmt.Sprintf("%d lost", want-got)
	}
	return fmt.Sprintf("%d duplicated", got-want)
}
