package daemon

import (
	"flag"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirproject/weir/internal/certs"
	"github.com/weirproject/weir/internal/rpc"
	"github.com/weirproject/weir/internal/tlsconfig"
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

func TestTLSFlagsFromEnvAndHalfConfigured(t *testing.T) {
	dir := t.TempDir()
	if _, err := certs.Init(dir, []string{"jm"}, false); err != nil {
		t.Fatal(err)
	}
	t.Setenv("WEIR_TLS_CERT", filepath.Join(dir, "jm.pem"))
	t.Setenv("WEIR_TLS_CA", filepath.Join(dir, "ca.pem"))
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	var sec TLS
	sec.Register(fs)
	if err := Parse(fs, nil); err != nil {
		t.Fatal(err)
	}
	_, err := MutualTLS(sec.GRPC, nil)
	if err == nil || !strings.Contains(err.Error(), "mutual TLS needs all of --tls-cert, --tls-key, --tls-ca: missing --tls-key") {
		t.Fatalf("cert and CA without key: %v", err)
	}
	sec.GRPC.Key = filepath.Join(dir, "jm-key.pem")
	if r, err := MutualTLS(sec.GRPC, nil); err != nil || r == nil {
		t.Fatalf("all three files: %v, %v", r, err)
	}
	if r, err := MutualTLS(tlsconfig.Files{}, nil); err != nil || r != nil {
		t.Fatalf("no files: %v, %v; want TLS off", r, err)
	}
	if _, err := ServerTLS("--rest-tls-cert", "", "--rest-tls-key", sec.GRPC.Key, nil); err == nil {
		t.Fatal("a REST key without its certificate was accepted")
	}
	if _, err := EtcdClient("localhost:2379", tlsconfig.Files{Cert: sec.GRPC.Cert}, nil); err == nil || !strings.Contains(err.Error(), "--etcd-key") {
		t.Fatalf("etcd certificate without key: %v", err)
	}
}
