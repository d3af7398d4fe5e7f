package e2e

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSQL runs a script with `weir sql -e` on real daemons: the sink's
// job is submitted and its ID printed; the SELECT's job streams its rows
// from both its subtasks to the CLI, which prints the LIMIT's five and
// cancels the job before it returns.
func TestSQL(t *testing.T) {
	c := startCluster(t, 2)
	const script = `CREATE SOURCE s (k BIGINT, v BIGINT, ts TIMESTAMP) WITH (connector='sequence', count='1000', keys='4');
CREATE SINK out AS SELECT k, v FROM s WHERE v > 3 WITH (connector='blackhole');
SELECT k, v FROM s WHERE v < 10 LIMIT 5;`
	out, err := c.weir("sql", "-p", "2", "-e", script)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != 9 {
		t.Fatalf("weir sql printed %d lines, want the sink's job, a header, a rule, 5 rows and the count:\n%s", len(lines), out)
	}
	m := regexp.MustCompile(`^out: ([0-9a-f]{32})$`).FindStringSubmatch(lines[0])
	if m == nil {
		t.Fatalf("first line %q, want out: <job ID>", lines[0])
	}
	if f := strings.Fields(lines[1]); len(f) != 2 || f[0] != "k" || f[1] != "v" {
		t.Errorf("header %q", lines[1])
	}
	if lines[8] != "(5 rows)" {
		t.Errorf("last line %q, want (5 rows)", lines[8])
	}
	seen := map[int64]bool{}
	for _, l := range lines[3:8] {
		f := strings.Fields(l)
		if len(f) != 2 {
			t.Errorf("row %q, want k and v", l)
			continue
		}
		k, err1 := strconv.ParseInt(f[0], 10, 64)
		v, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || v >= 10 || k != v%4 || seen[v] {
			t.Errorf("row %q is not one of the sequence's rows with v < 10, once", l)
		}
		seen[v] = true
	}

	var jobs []jobJSON
	if err := c.weirJSON(&jobs, "job", "list"); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		switch j.Name {
		case "select-1":
			// The CLI waits for the cancellation it asked for.
			if j.State != "CANCELED" {
				t.Errorf("the SELECT's job is %s after weir sql returned, want CANCELED", j.State)
			}
		case "out":
			if j.ID != m[1] {
				t.Errorf("the sink's job is %s, weir sql printed %s", j.ID, m[1])
			}
		default:
			t.Errorf("unexpected job %v", j)
		}
	}
	if j := c.waitJob(m[1], 60*time.Second); j.State != "FINISHED" {
		t.Errorf("the sink's job ended %s (%s), want FINISHED", j.State, j.FailureCause)
	}
}

// TestSQLChangelogSelect: a SELECT whose results update streams its
// changelog to the terminal, each row with its kind in an op column.
func TestSQLChangelogSelect(t *testing.T) {
	c := startCluster(t, 1)
	const script = `CREATE SOURCE s (k BIGINT, v BIGINT, ts TIMESTAMP) WITH (connector='sequence', count='1000', keys='4');
SELECT k, count(*) AS n FROM s GROUP BY k LIMIT 6;`
	out, err := c.weir("sql", "-p", "1", "-e", script)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != 9 {
		t.Fatalf("weir sql printed %d lines, want a header, a rule, 6 rows and the count:\n%s", len(lines), out)
	}
	if f := strings.Fields(lines[0]); len(f) != 3 || f[0] != "op" || f[1] != "k" || f[2] != "n" {
		t.Errorf("header %q, want op k n", lines[0])
	}
	inserts := 0
	for _, l := range lines[2:8] {
		f := strings.Fields(l)
		if len(f) != 3 || (f[0] != "+I" && f[0] != "-U" && f[0] != "+U") {
			t.Errorf("row %q, want an op (+I, -U or +U), k and n", l)
		}
		if len(f) > 0 && f[0] == "+I" {
			inserts++
		}
	}
	if inserts == 0 {
		t.Errorf("no +I among the first rows:\n%s", out)
	}
}
