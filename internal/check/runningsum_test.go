package check

import (
	"fmt"
	"strings"
	"testing"
)

// output simulates a correct run: two source subtasks interleaved.
func output(count, keys int64) []string {
	sums := map[int64]int64{}
	var lines []string
	for a, b := int64(0), int64(1); a < count || b < count; a, b = a+2, b+2 {
		for _, i := range []int64{b, a} {
			if i < count {
				sums[i%keys] += i
				lines = append(lines, fmt.Sprintf("%d,%d", i%keys, sums[i%keys]))
			}
		}
	}
	return lines
}

func TestRunningSumAcceptsACorrectRun(t *testing.T) {
	if err := RunningSum(output(1000, 7), 1000, 7); err != nil {
		t.Fatal(err)
	}
}

// Every way a run can break must be caught.
func TestRunningSumFailsOnBrokenRuns(t *testing.T) {
	good := output(1000, 7)
	cases := map[string]struct {
		lines []string
		want  string
	}{
		"lost record":       {append(append([]string{}, good[:10]...), good[11:]...), "lost"},
		"duplicated record": {append(append([]string{}, good...), good[42]), "duplicated"},
		// Same key (i=101 and i=115), so only the sums tell.
		"lost and duplicated": {
			append(append(append([]string{}, good[:100]...), good[101:]...), good[114]),
			"do not step",
		},
		"wrong sum":   {append(append([]string{}, good[:5]...), append([]string{strings.Split(good[5], ",")[0] + ",999999"}, good[6:]...)...), "do not step"},
		"malformed":   {append([]string{"x"}, good...), "malformed"},
		"empty":       {nil, "lost"},
		"unknown key": {append([]string{"9,1"}, good...), "malformed"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			err := RunningSum(c.lines, 1000, 7)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}
