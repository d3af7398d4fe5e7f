package main

import (
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/weirproject/weir/internal/auth"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	weirv1grpc "github.com/weirproject/weir/proto/weir/v1/weirv1grpc"
)

// TestToken: the CLI sends the token of --token-file ($WEIR_TOKEN_FILE),
// else $WEIR_TOKEN, and says what to do when the JobManager wants one or
// refuses it.
func TestToken(t *testing.T) {
	const readToken, adminToken = "read-token-0123456789", "admin-token-0123456789"
	tokens, err := auth.Parse([]byte("read " + readToken + "\nadmin " + adminToken + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(auth.NewEnforcer(tokens, slog.New(slog.DiscardHandler), nil).UnaryInterceptor()))
	weirv1grpc.RegisterClientServiceServer(srv, &fakeJobManager{jobs: []*weirv1.JobInfo{sampleJob()}})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	addr := lis.Addr().String()
	dir := t.TempDir()
	adminFile := filepath.Join(dir, "admin")
	if err := os.WriteFile(adminFile, []byte(adminToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name   string
		env    map[string]string
		args   []string
		ok     bool
		stderr string
	}{
		{"no token", nil, []string{"job", "list"}, false, "wants a token: give --token-file or $WEIR_TOKEN"},
		{"unknown token", map[string]string{envToken: "nobody-0123456789"}, []string{"job", "list"}, false, "refused the token"},
		{"read lists", map[string]string{envToken: readToken}, []string{"job", "list"}, true, ""},
		{"read may not cancel", map[string]string{envToken: readToken}, []string{"job", "cancel", "job-a"}, false, "the token may not do this"},
		{"file beats env", map[string]string{envToken: readToken}, []string{"--token-file", adminFile, "checkpoint", "trigger", "job-a"}, true, ""},
		{"file from the environment", map[string]string{"WEIR_TOKEN_FILE": adminFile, envToken: readToken}, []string{"checkpoint", "trigger", "job-a"}, true, ""},
		{"missing file", nil, []string{"--token-file", filepath.Join(dir, "none"), "job", "list"}, false, "--token-file"},
		{"empty file", nil, []string{"--token-file", empty, "job", "list"}, false, "holds no token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, tc.env, "", append([]string{"--jobmanager", addr}, tc.args...)...)
			if (r.code == 0) != tc.ok || !strings.Contains(r.stderr, tc.stderr) {
				t.Fatalf("exit %d, stderr %q; want ok=%v and %q", r.code, r.stderr, tc.ok, tc.stderr)
			}
			for _, tok := range []string{readToken, adminToken} {
				if strings.Contains(r.stderr+r.stdout, tok) {
					t.Errorf("the output shows a token: %q", r.stderr+r.stdout)
				}
			}
		})
	}
}
