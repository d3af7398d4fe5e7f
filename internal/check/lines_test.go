package check

import (
	"strings"
	"testing"
)

func TestLinesAcceptsAnyOrder(t *testing.T) {
	want := []string{"a", "b", "b", "c"}
	if err := Lines([]string{"b", "c", "a", "b"}, want); err != nil {
		t.Fatal(err)
	}
	if err := Lines(nil, nil); err != nil {
		t.Fatal(err)
	}
}

func TestLinesFailsOnBrokenRuns(t *testing.T) {
	want := []string{"a", "b", "b", "c"}
	for _, tc := range []struct {
		name string
		got  []string
		msg  string
	}{
		{"lost", []string{"a", "b", "c"}, "1 lost, 0 duplicated, 0 unexpected"},
		{"lost entirely", []string{"a", "b", "b"}, "line c lost (committed 0 of 1 times)"},
		{"duplicated", []string{"a", "a", "b", "b", "c"}, "0 lost, 1 duplicated, 0 unexpected"},
		{"unexpected", []string{"a", "b", "b", "c", "d"}, "line d (1 times) is not in the batch result"},
		{"nothing committed", nil, "4 lost"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Lines(tc.got, want)
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v, want an error with %q", err, tc.msg)
			}
		})
	}
}
