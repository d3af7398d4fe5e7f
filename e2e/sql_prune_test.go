package e2e

import (
	"strings"
	"testing"
)

// TestSQLPruneFilterAboveUnion: a WHERE over a UNION ALL subquery reads
// v, which the select list does not: the sources' calcs must still emit
// v, or the filter sees NULL and drops every row.
func TestSQLPruneFilterAboveUnion(t *testing.T) {
	c := startCluster(t, 1)
	const script = `CREATE SOURCE s (k BIGINT, v BIGINT, ts TIMESTAMP) WITH (connector='sequence', count='20', keys='4');
SELECT k FROM (SELECT k, v FROM s UNION ALL SELECT k, v FROM s) u WHERE v < 10;`
	out, err := c.weir("sql", "-p", "1", "-e", script)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(string(out), "(20 rows)") {
		t.Errorf("want the 10 rows with v < 10 of each branch, 20 rows; weir sql printed:\n%s", out)
	}
}
