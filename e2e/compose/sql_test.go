package compose

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/check"
	"github.com/weirproject/weir/internal/kafka/kafkatest"
)

// The SQL example (deploy/kafka-windows.sql), as the docs run it: one job
// writes the sequence source's records to sql-events, the other sums them
// per key and second of event time into sql-windows.
const sqlWindowMs = 1000

var sqlOption = regexp.MustCompile(`(count|keys|event_time\.step|event_time\.jitter|event_time\.start) = '([^']*)'`)

// sqlScript is deploy/kafka-windows.sql, and what it generates: count
// records over keys, step and jitter ms apart, from start (Unix ms).
func sqlScript(root string) (script string, count, keys, step, jitter, start int64, err error) {
	b, err := os.ReadFile(filepath.Join(root, "deploy", "kafka-windows.sql"))
	if err != nil {
		return "", 0, 0, 0, 0, 0, err
	}
	opts := map[string]int64{}
	for _, m := range sqlOption.FindAllStringSubmatch(string(b), -1) {
		v := m[2]
		if t, err := time.Parse(time.RFC3339, v); err == nil {
			opts[m[1]] = t.UnixMilli()
			continue
		}
		if d, err := time.ParseDuration(v); err == nil {
			opts[m[1]] = d.Milliseconds()
			continue
		}
		if opts[m[1]], err = strconv.ParseInt(v, 10, 64); err != nil {
			return "", 0, 0, 0, 0, 0, fmt.Errorf("deploy/kafka-windows.sql: %s = %q", m[1], v)
		}
	}
	return string(b), opts["count"], opts["keys"], opts["event_time.step"], opts["event_time.jitter"], opts["event_time.start"], nil
}

// sqlWindow is a row of sql-windows.
type sqlWindow struct {
	K           int64  `json:"k"`
	WindowStart string `json:"window_start"`
	WindowEnd   string `json:"window_end"`
	N           int64  `json:"n"`
	Total       int64  `json:"total"`
}

// sqlWindows reads sql-windows read_committed, as "k,start-ms" → the
// row's "n,total", failing on a window written twice.
func sqlWindows(ctx context.Context, published string) (map[string]string, error) {
	recs, err := kafkatest.ReadCommitted(ctx, "sql-windows", kafkaOpts(published)...)
	if err != nil {
		return nil, fmt.Errorf("read sql-windows: %w", err)
	}
	got := map[string]string{}
	for _, r := range recs {
		var w sqlWindow
		if err := json.Unmarshal(r.Value, &w); err != nil {
			return nil, fmt.Errorf("sql-windows: %q: %w", r.Value, err)
		}
		start, err := time.Parse("2006-01-02 15:04:05", w.WindowStart)
		if err != nil {
			return nil, fmt.Errorf("sql-windows: %q: window_start: %w", r.Value, err)
		}
		id := fmt.Sprintf("%d,%d", w.K, start.UnixMilli())
		if _, dup := got[id]; dup {
			return nil, fmt.Errorf("sql-windows: window %s written twice", id)
		}
		got[id] = fmt.Sprintf("%d,%d", w.N, w.Total)
	}
	return got, nil
}

// sqlWant is every window of the generated records, as sqlWindows gives
// them, and the ones the watermark must have closed: those ending at
// least closeMs before the newest record's time (the source's
// out-of-orderness and the records still in flight); the last ones
// close only when more records come.
func sqlWant(count, keys, step, jitter, start, closeMs int64) (want map[string]string, closed []string) {
	type acc struct{ n, total int64 }
	accs := map[string]*acc{}
	var newest int64
	for _, r := range check.SequenceRecords(count, keys, step, jitter) {
		r.Timestamp += start
		newest = max(newest, r.Timestamp)
		id := fmt.Sprintf("%s,%d", r.Key, r.Timestamp/sqlWindowMs*sqlWindowMs)
		a := accs[id]
		if a == nil {
			a = &acc{}
			accs[id] = a
		}
		a.n++
		a.total += r.Value
	}
	want = map[string]string{}
	for id, a := range accs {
		want[id] = fmt.Sprintf("%d,%d", a.n, a.total)
		var k, start int64
		fmt.Sscanf(id, "%d,%d", &k, &start)
		if start+sqlWindowMs <= newest-closeMs {
			closed = append(closed, id)
		}
	}
	return want, closed
}

// errWindowMissing is a closed window not (yet) in sql-windows.
var errWindowMissing = errors.New("missing")

// checkSQLWindows: every window written is one of the records' with its
// count and sum (once: sqlWindows refuses a second), and the closed ones
// are all there.
func checkSQLWindows(got, want map[string]string, closed []string) error {
	for id, g := range got {
		w, ok := want[id]
		if !ok {
			return fmt.Errorf("window %s is not one of the records'", id)
		}
		if g != w {
			return fmt.Errorf("window %s: n,total %s, want %s", id, g, w)
		}
	}
	for _, id := range closed {
		if _, ok := got[id]; !ok {
			return fmt.Errorf("window %s: %w", id, errWindowMissing)
		}
	}
	return nil
}

// TestSQLWindowsChecker: the check of sql-windows fails on a window with
// another count or sum, on a window of no records and on a closed window
// missing, and passes on the windows themselves (no Docker needed).
func TestSQLWindowsChecker(t *testing.T) {
	want, closed := sqlWant(20000, 8, 1, 20, 1767225600000, 3000)
	if len(closed) == 0 || len(closed) == len(want) {
		t.Fatalf("%d of %d windows closed: nothing to tell apart", len(closed), len(want))
	}
	got := maps.Clone(want)
	if err := checkSQLWindows(got, want, closed); err != nil {
		t.Fatalf("the windows themselves: %v", err)
	}
	for name, broken := range map[string]func(map[string]string){
		"a count off":    func(m map[string]string) { m[closed[0]] = "1,1" },
		"a stray window": func(m map[string]string) { m["99,0"] = "1,1" },
		"a window lost":  func(m map[string]string) { delete(m, closed[0]) },
	} {
		m := maps.Clone(want)
		broken(m)
		if err := checkSQLWindows(m, want, closed); err == nil {
			t.Errorf("%s: the checker passed", name)
		}
	}
}
