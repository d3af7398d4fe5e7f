package compile

import (
	"strings"
	"testing"
)

// A filter alone (a WHERE that nothing projects, above a join, a UNION
// ALL, or a subquery or view of one) keeps the columns it reads needed
// below it: the sources' calcs must not write NULL for them, or the
// filter above reads NULL.
func TestPruneKeepsColumnsAFilterAboveReads(t *testing.T) {
	const src = "CREATE SOURCE s (k BIGINT, v BIGINT, ts TIMESTAMP) WITH (connector = 'sequence');\n" +
		"CREATE SOURCE s2 (k BIGINT, v BIGINT, ts TIMESTAMP) WITH (connector = 'sequence');\n"
	for name, tc := range map[string]struct {
		query string
		// the calcs reading these sources must not NULL the column.
		reads   []string
		mustNot string
	}{
		// WHERE over a UNION ALL subquery: v is read only by the filter.
		"union": {"SELECT k FROM (SELECT k, v FROM s UNION ALL SELECT k, v FROM s2) u WHERE v < 10", []string{"read s;", "read s2;"}, "NULL AS v"},
		// An anti-join: the WHERE on the side NULLs pad stays above the
		// join; b.ts is read only by it.
		"anti-join": {"SELECT a.k, a.v FROM s a LEFT JOIN s2 b ON a.k = b.k WHERE b.ts IS NULL", []string{"read s2;"}, "NULL AS ts"},
		// WHERE over a view that is a join.
		"join-view": {"CREATE VIEW j AS SELECT a.k, b.v FROM s a JOIN s2 b ON a.k = b.k;\nEXPLAIN SELECT k FROM j WHERE v > 5", []string{"read s2;"}, "NULL AS v"},
	} {
		t.Run(name, func(t *testing.T) {
			q := tc.query
			if !strings.Contains(q, "EXPLAIN") {
				q = "EXPLAIN " + q
			}
			res, err := Script(src+q+";", Options{Parallelism: 1, CollectAddress: "127.0.0.1:1"})
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range res.Jobs {
				for _, l := range strings.Split(j.Explain.Physical, "\n") {
					for _, r := range tc.reads {
						if strings.Contains(l, r) && strings.Contains(l, tc.mustNot) {
							t.Errorf("%s\nlogical:\n%s\nphysical:\n%s\nthe filter above reads the column this calc NULLs: %s",
								tc.query, j.Explain.Logical, j.Explain.Physical, l)
						}
					}
				}
			}
		})
	}
}
