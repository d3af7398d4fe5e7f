package main

import (
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/rpc"
	"github.com/weirproject/weir/internal/tlsconfig"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	weirv1grpc "github.com/weirproject/weir/proto/weir/v1/weirv1grpc"
)

// TestCertsInitThenMutualTLS: the files of `weir certs init` secure a
// JobManager, and the CLI reaches it with the client's, from flags or the
// environment, and not without.
func TestCertsInitThenMutualTLS(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	if r := runCLI(t, nil, "", "certs", "init", dir, "--hosts", "jobmanager,tm-1"); r.code != exitOK {
		t.Fatalf("certs init: %+v", r)
	}
	for _, name := range []string{"ca", "jobmanager", "tm-1", "client"} {
		for _, suffix := range []string{".pem", "-key.pem"} {
			fi, err := os.Stat(filepath.Join(dir, name+suffix))
			if err != nil {
				t.Fatal(err)
			}
			if suffix == "-key.pem" && fi.Mode().Perm() != 0o600 {
				t.Errorf("%s%s: mode %v, want 0600", name, suffix, fi.Mode().Perm())
			}
		}
	}
	if r := runCLI(t, nil, "", "certs", "init", dir, "--hosts", "jobmanager"); r.code != exitError || !strings.Contains(r.stderr, "--force") {
		t.Fatalf("second certs init: %+v, want a refusal naming --force", r)
	}

	files := func(name string) tlsconfig.Files {
		return tlsconfig.Files{Cert: filepath.Join(dir, name+".pem"), Key: filepath.Join(dir, name+"-key.pem"), CA: filepath.Join(dir, "ca.pem")}
	}
	jm, err := tlsconfig.New(files("jobmanager"), nil)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := rpc.NewServer(rpc.Credentials(jm, slog.New(slog.DiscardHandler)))
	weirv1grpc.RegisterClientServiceServer(srv, &fakeJobManager{jobs: []*weirv1.JobInfo{sampleJob()}})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	addr := lis.Addr().String()

	client := files("client")
	env := map[string]string{envJobManager: addr, "WEIR_TLS_CERT": client.Cert, "WEIR_TLS_KEY": client.Key, "WEIR_TLS_CA": client.CA}
	if r := runCLI(t, env, "", "job", "list", "-o", "json"); r.code != exitOK || !strings.Contains(r.stdout, sampleJob().GetId()) {
		t.Fatalf("job list with the client certificate from the environment: %+v", r)
	}
	if r := runCLI(t, nil, "", "job", "list", "--jobmanager", addr, "--tls-cert", client.Cert, "--tls-key", client.Key, "--tls-ca", client.CA); r.code != exitOK {
		t.Fatalf("job list with the client certificate from flags: %+v", r)
	}
	if r := runCLI(t, nil, "", "job", "list", "--jobmanager", addr, "--timeout", "2s"); r.code != exitError || !strings.Contains(r.stderr, "if it runs with TLS, give --tls-cert") {
		t.Fatalf("job list without a certificate: %+v, want refused", r)
	}
	if r := runCLI(t, nil, "", "job", "list", "--jobmanager", addr, "--tls-cert", client.Cert, "--tls-ca", client.CA); r.code != exitError || !strings.Contains(r.stderr, "missing --tls-key") {
		t.Fatalf("job list with a certificate but no key: %+v", r)
	}
}
