package tlsconfig

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/certs"
)

// pki is a CA and files of leaves it issued, in a test directory.
type pki struct {
	t   *testing.T
	dir string
	ca  *certs.CA
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	ca, err := certs.NewCA("test CA", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	p := &pki{t: t, dir: t.TempDir(), ca: ca}
	p.write("ca.pem", ca.CertPEM())
	return p
}

// leaf issues a certificate for name into name.pem and name-key.pem,
// replacing them as a rotation would: new files renamed into place.
func (p *pki) leaf(name string) Files {
	p.t.Helper()
	cert, key, err := p.ca.Issue(name, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	if err != nil {
		p.t.Fatal(err)
	}
	p.write(name+".pem", cert)
	p.write(name+"-key.pem", key)
	return p.files(name)
}

func (p *pki) files(name string) Files {
	return Files{Cert: filepath.Join(p.dir, name+".pem"), Key: filepath.Join(p.dir, name+"-key.pem"), CA: filepath.Join(p.dir, "ca.pem")}
}

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

func TestNewRefusesIncompleteFiles(t *testing.T) {
	p := newPKI(t)
	f := p.leaf("a")
	for _, bad := range []Files{{}, {Cert: f.Cert}, {Key: f.Key, CA: f.CA}, {Cert: f.Cert, Key: f.CA}, {CA: f.Cert + ".missing"}} {
		if _, err := New(bad, nil); err == nil {
			t.Errorf("New(%+v) succeeded", bad)
		}
	}
	for _, good := range []Files{f, {CA: f.CA}, {Cert: f.Cert, Key: f.Key}} {
		if _, err := New(good, nil); err != nil {
			t.Errorf("New(%+v): %v", good, err)
		}
	}
}

// handshake runs one TLS handshake over a pipe and returns the server's
// and the client's errors.
func handshake(t *testing.T, server, client *tls.Config) (serverErr, clientErr error) {
	t.Helper()
	sc, cc := net.Pipe()
	defer sc.Close()
	defer cc.Close()
	errc := make(chan error, 1)
	go func() {
		s := tls.Server(sc, server)
		err := s.Handshake()
		if err == nil {
			// TLS 1.3 clients learn of a refused certificate on their
			// first read: write once so that they have something to read.
			_, err = s.Write([]byte{1})
		}
		sc.Close()
		errc <- err
	}()
	c := tls.Client(cc, client)
	clientErr = c.Handshake()
	if clientErr == nil {
		_, clientErr = c.Read(make([]byte, 1))
	}
	cc.Close()
	return <-errc, clientErr
}

func mutual(t *testing.T, f Files) (server, client *tls.Config) {
	t.Helper()
	r, err := New(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	server = r.ServerConfig(&tls.Config{MinVersion: tls.VersionTLS13, ClientAuth: tls.RequireAndVerifyClientCert})
	return server, r.ClientConfig(&tls.Config{ServerName: "localhost"})
}

func TestRotatedCertificateAndCA(t *testing.T) {
	p := newPKI(t)
	server, _ := mutual(t, p.leaf("server"))
	_, client := mutual(t, p.leaf("client"))
	if serr, cerr := handshake(t, server, client); serr != nil || cerr != nil {
		t.Fatalf("handshake: server %v, client %v", serr, cerr)
	}

	// The server's certificate is replaced: the client sees the new one
	// without the server's configuration being built again.
	old, err := tls.LoadX509KeyPair(p.files("server").Cert, p.files("server").Key)
	if err != nil {
		t.Fatal(err)
	}
	p.leaf("server")
	var seen []byte
	client.VerifyConnection = func(cs tls.ConnectionState) error {
		seen = cs.PeerCertificates[0].Raw
		return nil
	}
	if serr, cerr := handshake(t, server, client); serr != nil || cerr != nil {
		t.Fatalf("after rotation: server %v, client %v", serr, cerr)
	}
	if len(seen) == 0 || bytes.Equal(seen, old.Certificate[0]) {
		t.Fatal("the server still presents its old certificate")
	}

	// A new CA replaces the old one: a client of the new CA is accepted,
	// one of the old refused, with neither side restarted.
	p.ca = newPKI(t).ca
	p.write("ca.pem", p.ca.CertPEM())
	_, oldClient := mutual(t, p.files("client")) // trusts the new CA, presents a certificate of the old
	p.leaf("server")
	_, newClient := mutual(t, p.leaf("client2"))
	if serr, cerr := handshake(t, server, newClient); serr != nil || cerr != nil {
		t.Fatalf("client of the new CA: server %v, client %v", serr, cerr)
	}
	if serr, _ := handshake(t, server, oldClient); serr == nil || !strings.Contains(serr.Error(), "certificate signed by unknown authority") {
		t.Fatalf("a client of the replaced CA: server %v, want unknown authority", serr)
	}
}

func TestBrokenReplacementKeepsCertificate(t *testing.T) {
	p := newPKI(t)
	f := p.leaf("server")
	var logs bytes.Buffer
	r, err := New(f, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	before, _, _ := r.current()
	// Half a rotation: a new certificate, its key not written yet.
	cert, _, err := p.ca.Issue("server", time.Now(), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	p.write("server.pem", cert)
	for range 3 {
		if got, _, _ := r.current(); got != before {
			t.Fatal("a certificate without its key replaced the working one")
		}
	}
	if n := strings.Count(logs.String(), "do not load"); n != 1 {
		t.Fatalf("logged the broken replacement %d times, want once:\n%s", n, logs.String())
	}
}

func TestClientConfigAddsCAToBaseRoots(t *testing.T) {
	p := newPKI(t)
	r, err := New(Files{CA: p.files("x").CA}, nil)
	if err != nil {
		t.Fatal(err)
	}
	base := x509.NewCertPool()
	c := r.ClientConfig(&tls.Config{RootCAs: base})
	if c.RootCAs == base || c.RootCAs.Equal(base) {
		t.Fatal("the CA was not added to a copy of the base roots")
	}
	if c.GetClientCertificate != nil {
		t.Fatal("a client without certificate files presents one")
	}
}

// TestServerNameVerifiesTheNameNotTheAddress: a daemon dialling a pod's
// IP, which the cluster's certificate does not name, is refused unless
// Files.ServerName names the certificate instead.
func TestServerNameVerifiesTheNameNotTheAddress(t *testing.T) {
	p := newPKI(t)
	f := p.leaf("weir-sums")
	server, _ := mutual(t, f)
	dialled := &tls.Config{ServerName: "10.1.2.3"} // what gRPC sets from the address
	plain, err := New(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, cerr := handshake(t, server, plain.ClientConfig(dialled)); cerr == nil {
		t.Fatal("a certificate that does not name the IP dialled was accepted")
	}
	f.ServerName = "weir-sums"
	named, err := New(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	if serr, cerr := handshake(t, server, named.ClientConfig(dialled)); serr != nil || cerr != nil {
		t.Fatalf("with ServerName: server %v, client %v", serr, cerr)
	}
}
