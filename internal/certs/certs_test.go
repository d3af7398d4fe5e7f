package certs

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestInitWritesVerifiableLeaves(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	written, err := Init(dir, []string{"jm.example", "10.0.0.7", "tm1"}, false)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ca.pem", "ca-key.pem", "jm.example.pem", "jm.example-key.pem", "10.0.0.7.pem", "10.0.0.7-key.pem", "tm1.pem", "tm1-key.pem", "client.pem", "client-key.pem"}
	var got []string
	for _, p := range written {
		got = append(got, filepath.Base(p))
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("written %v, want %v", got, want)
	}
	for _, name := range want {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		perm := os.FileMode(0o644)
		if strings.HasSuffix(name, "-key.pem") {
			perm = 0o600
		}
		if fi.Mode().Perm() != perm {
			t.Errorf("%s: mode %v, want %v", name, fi.Mode().Perm(), perm)
		}
	}

	caCert := parseCert(t, filepath.Join(dir, CAFile))
	if !caCert.IsCA || !caCert.MaxPathLenZero {
		t.Errorf("CA: IsCA %v MaxPathLenZero %v", caCert.IsCA, caCert.MaxPathLenZero)
	}
	roots := x509.NewCertPool()
	roots.AddCert(caCert)
	for _, tc := range []struct{ leaf, host string }{
		{"jm.example", "jm.example"}, {"jm.example", "localhost"}, {"jm.example", "127.0.0.1"},
		{"10.0.0.7", "10.0.0.7"}, {"tm1", "tm1"}, {"client", "localhost"},
	} {
		leaf := parseCert(t, filepath.Join(dir, tc.leaf+".pem"))
		for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: tc.host, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
				t.Errorf("%s for %s, usage %v: %v", tc.leaf, tc.host, usage, err)
			}
		}
		pair, err := tls.LoadX509KeyPair(filepath.Join(dir, tc.leaf+".pem"), filepath.Join(dir, tc.leaf+"-key.pem"))
		if err != nil {
			t.Fatalf("%s: %v", tc.leaf, err)
		}
		key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
		if !ok || key.Curve != elliptic.P256() {
			t.Errorf("%s: key %T, want ECDSA P-256", tc.leaf, pair.PrivateKey)
		}
	}
	if _, err := parseCert(t, filepath.Join(dir, "tm1.pem")).Verify(x509.VerifyOptions{Roots: roots, DNSName: "jm.example"}); err == nil {
		t.Error("tm1's certificate is valid for jm.example")
	}
}

func TestInitRefusesToReplaceCA(t *testing.T) {
	dir := t.TempDir()
	if _, err := Init(dir, []string{"a"}, false); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(filepath.Join(dir, CAFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Init(dir, []string{"a"}, false); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("second Init: %v, want a refusal naming --force", err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, CAFile)); !bytes.Equal(before, after) {
		t.Fatal("refused Init changed the CA")
	}
	if _, err := Init(dir, []string{"a"}, true); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, CAFile)); bytes.Equal(before, after) {
		t.Fatal("Init with force kept the old CA")
	}
}

func TestInitRejectsFileNames(t *testing.T) {
	for _, h := range []string{"", "ca", "../x", "a/b", ".hidden", "node-key"} {
		if _, err := Init(t.TempDir(), []string{h}, false); err == nil {
			t.Errorf("host %q accepted", h)
		}
	}
}

func parseCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("%s: no certificate", path)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
