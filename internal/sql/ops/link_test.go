package ops

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLinksNoParser: the SQL operators, and so the TaskManager that runs
// them, link neither the planner nor PostgreSQL's parser (cgo): a query
// reaches them compiled, as data.
func TestLinksNoParser(t *testing.T) {
	const module = "github.com/weirproject/weir/"
	for _, pkg := range []string{"internal/sql/ops", "internal/operators/all", "cmd/taskmanager"} {
		out, err := exec.Command("go", "list", "-deps", module+pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if dep == module+"internal/sql/compile" || strings.HasPrefix(dep, "github.com/pganalyze/pg_query_go") {
				t.Errorf("%s links %s: the TaskManager links no SQL parser", pkg, dep)
			}
		}
	}
}
