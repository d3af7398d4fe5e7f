package layering

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// pure are the cores: state machines (and the pure structures they use)
// that decide, while drivers carry out what they decide.
var pure = []string{
	"internal/attempts",
	"internal/barrier",
	"internal/checkpoint",
	"internal/connector",
	"internal/coordinator",
	"internal/keygroup",
	"internal/members",
	"internal/registration",
	"internal/restart",
	"internal/rpcpolicy",
	"internal/scheduler",
	"internal/storedgraph",
	"internal/sweep",
	"internal/timer",
	"internal/watermark",
}

// io are the packages a pure core must not link, directly or not, with
// every package under them: the network, storage, coordination and
// messaging clients, metrics. (net itself, exactly: net/url and
// net/netip only parse.)
var io_ = []string{
	"net/http",
	"os/exec",
	"google.golang.org/grpc",
	"github.com/cockroachdb/pebble",
	"go.etcd.io/etcd",
	"github.com/minio/minio-go",
	"github.com/twmb/franz-go",
	"github.com/prometheus/client_golang",
}

// allowed are packages under a forbidden path that a core may link,
// without looking further into what they import.
var allowed = []string{"google.golang.org/grpc/codes"}

func forbidden(path string) bool {
	if path == "net" {
		return true
	}
	for _, p := range io_ {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

type pkg struct {
	ImportPath string
	Imports    []string
}

const module = "github.com/weirproject/weir/"

// TestPureCoresLinkNoIO lists each core's dependencies and fails, naming
// the chain of imports, on any I/O package among them.
func TestPureCoresLinkNoIO(t *testing.T) {
	for _, core := range pure {
		t.Run(core, func(t *testing.T) {
			if bad := violations(t, core); len(bad) > 0 {
				t.Errorf("%s links I/O packages, which a pure core must not:\n  %s", core, strings.Join(bad, "\n  "))
			}
		})
	}
}

// registryOnly are the packages that work with operators and connectors
// only through internal/connector's registry: they link none of them.
var registryOnly = []string{"internal/connector", "internal/jobgraph", "internal/jobmanager", "internal/scheduler"}

// connectors are the connectors' packages (and their clients).
var connectors = []string{
	"github.com/weirproject/weir/internal/kafka",
	"github.com/weirproject/weir/internal/nexmark",
	"github.com/weirproject/weir/internal/operators",
	"github.com/twmb/franz-go",
}

// TestRegistryOnlyLinksNoConnector: the job graph's validation and the
// JobManager know connectors by the registry alone, so adding one touches
// its own directory and the builtin list, not them.
func TestRegistryOnlyLinksNoConnector(t *testing.T) {
	for _, p := range registryOnly {
		out, err := exec.Command("go", "list", "-deps", module+p).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", p, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, c := range connectors {
				if dep == c || strings.HasPrefix(dep, c+"/") {
					t.Errorf("%s links %s: it must know connectors through internal/connector only", p, dep)
				}
			}
		}
	}
}

// TestModelLinksNoConnectorNorCLI: the root package weir is the
// programming model only; connectors live in their own packages (kafka,
// nexmark, files, with the file sink and its S3 client in
// internal/filesink), the entry point in program.
func TestModelLinksNoConnectorNorCLI(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", strings.TrimSuffix(module, "/")).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	// The connectors' packages themselves (their configurations' parsing,
	// in kafkacfg, is what the job graph's validation links), and whole
	// modules.
	exact := []string{connectors[0], connectors[1], module + "worker", module + "internal/taskmanager", module + "internal/filesink"}
	modules := []string{connectors[3], "github.com/spf13/cobra", "google.golang.org/grpc", "github.com/minio/minio-go"}
	for _, dep := range strings.Fields(string(out)) {
		for _, b := range append(slices.Clone(exact), modules...) {
			if dep == b || (slices.Contains(modules, b) && strings.HasPrefix(dep, b+"/")) {
				t.Errorf("package weir links %s: the programming model links no connector, CLI or TaskManager", dep)
			}
		}
	}
}

// TestJobManagerLeavesWiringToItsCommand: the REST API, the dashboard and
// the leader proxy are wired by the daemon's command (internal/jmcmd), not
// by the JobManager's core.
func TestJobManagerLeavesWiringToItsCommand(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", module+"internal/jobmanager").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, w := range []string{module + "internal/restapi", module + "internal/webui", module + "internal/jmcmd"} {
			if dep == w {
				t.Errorf("internal/jobmanager links %s: wiring belongs to internal/jmcmd", dep)
			}
		}
	}
}

// TestCompositionRootsRegisterBuiltins: what validates or runs jobs for
// users links the built-in connectors' registrations.
func TestCompositionRootsRegisterBuiltins(t *testing.T) {
	for _, root := range []string{"", "cmd/weir", "internal/jmcmd", "internal/testcluster"} {
		out, err := exec.Command("go", "list", "-deps", strings.TrimSuffix(module+root, "/")).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", root, err)
		}
		if !slices.Contains(strings.Fields(string(out)), module+"internal/connector/builtin") {
			t.Errorf("%q does not link internal/connector/builtin: jobs it validates would skip the connectors' checks", root)
		}
	}
}

// TestRuleFindsIO: the rule finds what a driver links, so a core that
// starts to link I/O cannot pass unseen.
func TestRuleFindsIO(t *testing.T) {
	bad := violations(t, "internal/checkpointing")
	if len(bad) == 0 {
		t.Fatal("the checkpoint coordinator's driver links no I/O package, by the rule: the rule sees nothing")
	}
	t.Logf("internal/checkpointing links, as a driver may:\n  %s", strings.Join(bad, "\n  "))
}

// violations lists the chains of imports from core to I/O packages.
func violations(t *testing.T, core string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-json=ImportPath,Imports", module+core).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list %s: %v\n%s", core, err, ee.Stderr)
		}
		t.Fatalf("go list %s: %v", core, err)
	}
	imports := map[string][]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		imports[p.ImportPath] = p.Imports
	}
	// Breadth first from the core, so each chain printed is a
	// shortest one.
	from := map[string]string{module + core: ""}
	queue := []string{module + core}
	var bad []string
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if slices.Contains(allowed, p) {
			continue
		}
		if forbidden(p) {
			bad = append(bad, chain(from, p))
			continue
		}
		for _, q := range imports[p] {
			if _, seen := from[q]; !seen {
				from[q] = p
				queue = append(queue, q)
			}
		}
	}
	slices.Sort(bad)
	return bad
}

// chain is the import path from the core to p.
func chain(from map[string]string, p string) string {
	var c []string
	for ; p != ""; p = from[p] {
		c = append(c, strings.TrimPrefix(p, "github.com/weirproject/weir/"))
	}
	slices.Reverse(c)
	return strings.Join(c, " → ")
}

// TestStorageLinksNoObjectStoreClient: checkpoint storage is an interface
// (internal/blob, with the local file system) and the checkpoint format
// on it (internal/storage); the S3 implementation is apart
// (internal/blob/s3blob), linked by what configures it.
func TestStorageLinksNoObjectStoreClient(t *testing.T) {
	for _, pkg := range []string{"internal/blob", "internal/storage"} {
		out, err := exec.Command("go", "list", "-deps", module+pkg).Output()
		if err != nil {
			t.Fatalf("go list: %v", err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, "github.com/minio/minio-go") || dep == module+"internal/blob/s3blob" {
				t.Errorf("%s links %s: the S3 client belongs to internal/blob/s3blob", pkg, dep)
			}
		}
	}
}

// TestDaemonsLinkNoSQLParser: the SQL operators, and the daemons that
// run them, link neither the planner nor PostgreSQL's parser (cgo): a
// query reaches them compiled, as data, so they stay static binaries.
func TestDaemonsLinkNoSQLParser(t *testing.T) {
	for _, pkg := range []string{"internal/sql/ops", "internal/sql/expr", "internal/sql/row", "internal/sql/plan",
		"internal/operators/all", "cmd/taskmanager", "cmd/jobmanager"} {
		out, err := exec.Command("go", "list", "-deps", module+pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if dep == module+"internal/sql/compile" || strings.HasPrefix(dep, "github.com/pganalyze/pg_query_go") {
				t.Errorf("%s links %s: the daemons link no SQL parser", pkg, dep)
			}
		}
	}
}
