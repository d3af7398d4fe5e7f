package check

import (
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/window"
)

func TestBatchWindows(t *testing.T) {
	recs := []Record{{"a", 1, 5}, {"a", 4, 1}, {"a", 12, 2}, {"b", 3, 7}}
	for _, tc := range []struct {
		spec window.Spec
		want map[string]string
	}{
		{window.Spec{Kind: window.Tumbling, Size: 10, Slide: 10, Aggregate: window.Sum},
			map[string]string{"a,0,10": "6", "a,10,20": "2", "b,0,10": "7"}},
		{window.Spec{Kind: window.Sliding, Size: 10, Slide: 5, Aggregate: window.Count},
			map[string]string{"a,-5,5": "2", "a,0,10": "2", "a,5,15": "1", "a,10,20": "1", "b,-5,5": "1", "b,0,10": "1"}},
		{window.Spec{Kind: window.Session, Gap: 3, Aggregate: window.Max},
			map[string]string{"a,1,7": "5", "a,12,15": "2", "b,3,6": "7"}},
	} {
		got := BatchWindows(tc.spec, recs)
		if len(got) != len(tc.want) {
			t.Errorf("%v: %v, want %v", tc.spec.Kind, got, tc.want)
		}
		for id, w := range tc.want {
			if got[id] != w {
				t.Errorf("%v: %s = %q, want %s", tc.spec.Kind, id, got[id], w)
			}
		}
	}
}

// Every way a windowed run can break must be caught.
func TestWindowsFailsOnBrokenRuns(t *testing.T) {
	want := map[string]string{"a,0,10": "6", "a,10,20": "2", "b,0,10": "7"}
	good := []string{"a,0,10,6", "b,0,10,7", "a,10,20,2"}
	if err := Windows(good, want); err != nil {
		t.Fatalf("a correct run fails: %v", err)
	}
	for name, tc := range map[string]struct {
		lines []string
		msg   string
	}{
		"lost":       {good[:2], "1 lost"},
		"duplicated": {append(append([]string{}, good...), "b,0,10,7"), "1 duplicated"},
		"refired":    {append(append([]string{}, good...), "a,10,20,3"), "committed twice"},
		"wrong":      {[]string{"a,0,10,5", "b,0,10,7", "a,10,20,2"}, "1 wrong"},
		"unexpected": {append(append([]string{}, good...), "c,0,10,1"), "1 unexpected"},
		"malformed":  {[]string{"a,0,10"}, "malformed"},
	} {
		err := Windows(tc.lines, want)
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: Windows = %v, want an error with %q", name, err, tc.msg)
		}
	}
}
