package daemon

import (
	"flag"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirproject/weir/internal/rpc"
)

func TestEnvOverridesDefaultButNotFlag(t *testing.T) {
	t.Setenv("WEIR_RPC_ADDR", ":7000")
	t.Setenv("WEIR_SLOTS", "4")
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	addr := fs.String("rpc-addr", ":6123", "")
	slots := fs.Int("slots", 1, "")
	if err := Parse(fs, []string{"--slots", "2"}); err != nil {
		t.Fatal(err)
	}
	if *addr != ":7000" || *slots != 2 {
		t.Fatalf("rpc-addr %q slots %d", *addr, *slots)
	}
}

func TestBadEnvIsAnError(t *testing.T) {
	t.Setenv("WEIR_SLOTS", "many")
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.Int("slots", 1, "")
	if err := Parse(fs, nil); err == nil {
		t.Fatal("want an error for WEIR_SLOTS=many")
	}
}

// TestPprofFlag: --pprof (here from WEIR_PPROF) puts /debug/pprof/ on the
// daemons' HTTP mux.
func TestPprofFlag(t *testing.T) {
	t.Setenv("WEIR_PPROF", "true")
	if err := Parse(flag.NewFlagSet("x", flag.ContinueOnError), nil); err != nil {
		t.Fatal(err)
	}
	rr := httptest.NewRecorder()
	rpc.HTTPMux(prometheus.NewRegistry()).ServeHTTP(rr, httptest.NewRequest("GET", "/debug/pprof/", nil))
	if rr.Code != http.StatusOK {
		t.Fatalf("GET /debug/pprof/: %d", rr.Code)
	}
}
