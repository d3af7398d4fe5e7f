package rpc

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/weirproject/weir/internal/certs"
	"github.com/weirproject/weir/internal/tlsconfig"
)

// pki writes a CA's certificate and leaves to a directory.
type pki struct {
	t   *testing.T
	dir string
	ca  *certs.CA
}

func newPKI(t *testing.T, dir string) *pki {
	t.Helper()
	p := &pki{t: t, dir: dir}
	p.ca = p.newCA()
	p.write("ca.pem", p.ca.CertPEM())
	return p
}

func (p *pki) newCA() *certs.CA {
	ca, err := certs.NewCA("test CA", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	if err != nil {
		p.t.Fatal(err)
	}
	return ca
}

// leaf writes name's certificate, valid from notBefore to notAfter, and
// returns its files with the CA file.
func (p *pki) leaf(name string, notBefore, notAfter time.Time) tlsconfig.Files {
	p.t.Helper()
	cert, key, err := p.ca.Issue(name, notBefore, notAfter)
	if err != nil {
		p.t.Fatal(err)
	}
	p.write(name+".pem", cert)
	p.write(name+"-key.pem", key)
	return tlsconfig.Files{Cert: filepath.Join(p.dir, name+".pem"), Key: filepath.Join(p.dir, name+"-key.pem"), CA: filepath.Join(p.dir, "ca.pem")}
}

func (p *pki) valid(name string) tlsconfig.Files {
	return p.leaf(name, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
}

// write replaces a file the way rotation tools do: a new file renamed
// into place.
func (p *pki) write(name string, data []byte) {
	p.t.Helper()
	tmp := filepath.Join(p.dir, ".tmp-"+name)
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		p.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(p.dir, name)); err != nil {
		p.t.Fatal(err)
	}
}

// records is a slog handler that hands every record to the test.
type records chan slog.Record

func (r records) Enabled(context.Context, slog.Level) bool { return true }
func (r records) Handle(_ context.Context, rec slog.Record) error {
	select {
	case r <- rec.Clone():
	default:
	}
	return nil
}
func (r records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r records) WithGroup(string) slog.Handler      { return r }

// next returns the attributes of the next record whose message contains
// msg and whose error contains errPart.
func (r records) next(t *testing.T, msg, errPart string) map[string]string {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case rec := <-r:
			attrs := map[string]string{}
			rec.Attrs(func(a slog.Attr) bool {
				attrs[a.Key] = a.Value.String()
				return true
			})
			if strings.Contains(rec.Message, msg) && strings.Contains(attrs["err"], errPart) {
				return attrs
			}
		case <-timeout:
			t.Fatalf("no log %q", msg)
			return nil
		}
	}
}

func reloader(t *testing.T, f tlsconfig.Files) *tlsconfig.Reloader {
	t.Helper()
	r, err := tlsconfig.New(f, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// serve runs a gRPC server with creds on loopback until the test ends.
func serve(t *testing.T, creds credentials.TransportCredentials) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g, _ := NewServer(creds)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = g.Serve(lis)
	}()
	t.Cleanup(func() {
		g.Stop()
		<-done
	})
	return lis.Addr().String()
}

// check makes one call with creds and returns its error and the server's
// certificate, when the call went through.
func check(t *testing.T, addr string, creds credentials.TransportCredentials) (*x509.Certificate, error) {
	t.Helper()
	conn, err := Dial(addr, creds)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var p peer.Peer
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p)); err != nil {
		return nil, err
	}
	return p.AuthInfo.(credentials.TLSInfo).State.PeerCertificates[0], nil
}

func TestMutualTLSRefusesPeers(t *testing.T) {
	p := newPKI(t, t.TempDir())
	logs := make(records, 16)
	creds := Credentials(reloader(t, p.valid("server")), slog.New(logs))
	// Every case comes from 127.0.0.1, which is otherwise logged once a
	// minute (TestRefusalsLoggedOncePerHost).
	creds.(*mutualTLS).refusals.interval = 0
	addr := serve(t, creds)

	if _, err := check(t, addr, Credentials(reloader(t, p.valid("client")), nil)); err != nil {
		t.Fatalf("client with a certificate of the CA: %v", err)
	}

	other := newPKI(t, t.TempDir())
	otherFiles := other.valid("intruder")
	otherFiles.CA = p.valid("x").CA // trusts the server, is not trusted by it
	expired := p.leaf("expired", time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour))
	noCert := tlsconfig.Files{CA: expired.CA}
	for _, tc := range []struct {
		name    string
		creds   credentials.TransportCredentials
		subject string
		why     string
	}{
		{"plaintext", insecure.NewCredentials(), "", "first record does not look like a TLS handshake"},
		{"no certificate", Credentials(reloader(t, noCert), nil), "", "didn't provide a certificate"},
		{"wrong CA", Credentials(reloader(t, otherFiles), nil), "CN=intruder", "unknown authority"},
		{"expired", Credentials(reloader(t, expired), nil), "CN=expired", "expired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := check(t, addr, tc.creds)
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("call: %v, want Unavailable", err)
			}
			logged := logs.next(t, "refused", tc.why)
			if logged["subject"] != tc.subject || logged["remote"] == "" {
				t.Fatalf("logged %v, want subject %q and the remote address", logged, tc.subject)
			}
		})
	}
}

func TestRotationWithoutRestart(t *testing.T) {
	p := newPKI(t, t.TempDir())
	server := reloader(t, p.valid("server"))
	addr := serve(t, Credentials(server, slog.New(slog.DiscardHandler)))
	oldClient := p.valid("old-client")
	if _, err := check(t, addr, Credentials(reloader(t, oldClient), nil)); err != nil {
		t.Fatal(err)
	}

	// A new CA, a new server certificate and a client of the new CA; the
	// server keeps running.
	p.ca = p.newCA()
	p.write("ca.pem", p.ca.CertPEM())
	p.valid("server")
	cert, err := check(t, addr, Credentials(reloader(t, p.valid("new-client")), nil))
	if err != nil {
		t.Fatalf("client of the rotated CA: %v", err)
	}
	if cert.Issuer.CommonName != "test CA" || cert.CheckSignatureFrom(caCert(t, p)) != nil {
		t.Fatal("the server presents its old certificate")
	}
	// The old client trusts the new CA now, but its certificate is of
	// the old one.
	oldClient.CA = filepath.Join(p.dir, "ca.pem")
	if _, err := check(t, addr, Credentials(reloader(t, oldClient), nil)); err == nil {
		t.Fatal("a certificate of the replaced CA was accepted")
	}
}

func caCert(t *testing.T, p *pki) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(p.ca.CertPEM())
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func TestRefusalsLoggedOncePerHost(t *testing.T) {
	logs := make(records, 16)
	l := &refusalLog{log: slog.New(logs), interval: time.Hour, last: map[string]time.Time{}, suppressed: map[string]int{}}
	a := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 1000}
	b := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 2), Port: 1000}
	l.refused(a, errors.New("first"))
	a.Port++
	l.refused(a, errors.New("again, another port"))
	l.refused(b, errors.New("another host"))
	if len(logs) != 2 {
		t.Fatalf("%d refusals logged, want 2: one per host", len(logs))
	}
	l.interval = 0
	l.refused(a, errors.New("after the interval"))
	logs.next(t, "refused", "first")
	logs.next(t, "refused", "another host")
	if got := logs.next(t, "refused", "after the interval"); got["refused_since_last_logged"] != "1" {
		t.Fatalf("log after the interval %v, want the one refusal not logged counted", got)
	}
}

func TestMessageSizeLimit(t *testing.T) {
	addr := serve(t, Credentials(nil, nil))
	conn, err := Dial(addr, Credentials(nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: strings.Repeat("x", MaxMessageSize)})
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "larger than max") {
		t.Fatalf("a message over MaxMessageSize: %v, want ResourceExhausted", err)
	}
}
