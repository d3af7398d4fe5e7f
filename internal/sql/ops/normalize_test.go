package ops

import (
	"reflect"
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/sql/plan"
	"github.com/weirproject/weir/sdk"
)

// TestUpsertSourceNormalized reads an upsert topic's messages (JSON keys
// and values, tombstones with an empty value) through the calc that
// decodes them and the normalize that keeps each key's latest row: the
// changelog has the whole row in every retraction, nothing for a repeated
// row, and nothing for the deletion of a key it never had. A restore at
// another parallelism mid-stream changes nothing.
func TestUpsertSourceNormalized(t *testing.T) {
	in := schema("id", tBigint, "name", tVarchar)
	calc := &plan.Calc{In: plan.Decoding{Format: plan.FormatJSON, Schema: in, Timestamp: -1, Key: []int{0}, KeyFormat: plan.FormatJSON},
		Out: in, Enc: plan.Encoding{Format: plan.FormatRow, Changelog: true, Key: []int{0}}}
	c := &Calc{}
	if err := c.open(calc, nil); err != nil {
		t.Fatal(err)
	}
	msgs := []struct{ key, value string }{
		{`{"id":1}`, `{"id":1,"name":"a"}`},
		{`{"id":2}`, `{"id":2,"name":"x"}`},
		{`{"id":1}`, `{"id":1,"name":"b"}`},
		{`{"id":1}`, `{"id":1,"name":"b"}`}, // a repeat: nothing
		{`{"id":1}`, ``},                    // a tombstone
		{`{"id":3}`, ``},                    // a key never seen: nothing
		{`{"id":1}`, `{"id":1,"name":"c"}`},
		{`{"id":2}`, ``},
	}
	var events []event
	for i, m := range msgs {
		var out collector
		if err := c.ProcessRecord(sdk.Record{Key: []byte(m.key), Value: []byte(m.value), Timestamp: int64(i + 1)}, &out); err != nil {
			t.Fatal(err)
		}
		for _, r := range out.records {
			events = append(events, rec(r))
		}
	}
	p := &plan.Normalize{In: in, Key: []int{0}, Enc: plan.Encoding{Format: plan.FormatRow, Changelog: true}}
	want := []string{"1: +I 1,a", "2: +I 2,x", "3: -U 1,a", "3: +U 1,b", "5: -D 1,b", "7: +I 1,c", "8: -D 2,x"}
	for _, restoreAfter := range []int{-1, 3} {
		got := topNChanges(t, in, run(t, func() sdk.Operator { return &Normalize{} }, config(t, &plan.Operator{Normalize: p}), events, restoreAfter))
		if !reflect.DeepEqual(sortedByTs(got), want) {
			t.Errorf("restore after %d: changes\n%s\nwant\n%s", restoreAfter, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// sortedByTs orders changes of several subtasks by their timestamps (one
// subtask's stay in order).
func sortedByTs(lines []string) []string {
	out := append([]string(nil), lines...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && tsOf(out[j]) < tsOf(out[j-1]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func tsOf(l string) string {
	ts, _, _ := strings.Cut(l, ":")
	return strings.Repeat("0", 8-len(ts)) + ts
}
