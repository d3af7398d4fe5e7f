package check

import (
	"maps"
	"strings"
	"testing"
)

func TestBatchJoins(t *testing.T) {
	left := []Record{{"a", 10, 1}, {"a", 20, 2}, {"b", 10, 3}, {"c", -3, 4}}
	right := []Record{{"a", 8, 5}, {"a", 10, 5}, {"a", 15, 6}, {"a", 25, 7}, {"b", 30, 8}, {"c", -1, 9}}
	for _, tc := range []struct {
		name string
		got  map[string]int
		want map[string]int
	}{
		// r.ts in [l.ts-2, l.ts+5]: both ends inclusive; two right records
		// with equal values make one line twice.
		{"interval", BatchIntervalJoin(left, right, -2, 5),
			map[string]int{"a,1|5": 2, "a,1|6": 1, "a,2|7": 1, "c,4|9": 1}},
		// Windows [0,10), [10,20), [20,30); -3 and -1 share [-10,0).
		{"window", BatchWindowJoin(left, right, 10),
			map[string]int{"a,1|5": 1, "a,1|6": 1, "a,2|7": 1, "c,4|9": 1}},
	} {
		if !maps.Equal(tc.got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

// Every way a join run can break must be caught.
func TestJoinsFailsOnBrokenRuns(t *testing.T) {
	want := map[string]int{"a,1|5": 2, "a,1|6": 1, "b,3|8": 1}
	good := []string{"a,1|6", "a,1|5", "b,3|8", "a,1|5"}
	if err := Joins(good, want); err != nil {
		t.Fatalf("a correct run fails: %v", err)
	}
	for name, tc := range map[string]struct {
		lines []string
		msg   string
	}{
		"lost":                {good[:3], "1 lost"},
		"lost entirely":       {[]string{"a,1|5", "a,1|5", "a,1|6"}, "pair b,3|8 lost"},
		"duplicated":          {append(append([]string{}, good...), "b,3|8"), "1 duplicated"},
		"unexpected":          {append(append([]string{}, good...), "c,4|9"), "1 unexpected"},
		"sides swapped":       {[]string{"a,1|6", "a,1|5", "b,8|3", "a,1|5"}, "1 lost, 0 duplicated, 1 unexpected"},
		"lost and duplicated": {[]string{"a,1|6", "a,1|5", "b,3|8", "b,3|8"}, "1 lost, 1 duplicated"},
		"malformed":           {[]string{"a,1|5", "a1|5"}, "malformed"},
		"no right value":      {[]string{"a,1"}, "malformed"},
	} {
		err := Joins(tc.lines, want)
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: Joins = %v, want an error with %q", name, err, tc.msg)
		}
	}
}
