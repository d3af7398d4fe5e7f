// Package certs creates a private certificate authority and the
// certificates a Weir cluster uses for mutual TLS, with nothing but the
// standard library: enough to secure a cluster without a PKI of one's own.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// File names in the directory Init writes.
const (
	CAFile    = "ca.pem"
	CAKeyFile = "ca-key.pem"
	// ClientName is the leaf certificate of the weir CLI.
	ClientName = "client"
)

// Validity of what Init creates: the CA outlives several generations of
// leaves, which are short enough to be rotated as a matter of routine.
const (
	CAValidity   = 10 * 365 * 24 * time.Hour
	LeafValidity = 365 * 24 * time.Hour
)

// clockSkew backdates certificates so that a peer whose clock is a little
// behind does not see them as not yet valid.
const clockSkew = 5 * time.Minute

// CA is a certificate authority that can issue leaf certificates.
type CA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

// NewCA creates a self-signed CA valid from notBefore to notAfter.
func NewCA(name string, notBefore, notAfter time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("certs: CA key: %w", err)
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		IsCA:                  true,
		BasicConstraintsValid: true,
		// Leaves only: no intermediate CA can be made from a stolen leaf.
		MaxPathLenZero: true,
		KeyUsage:       x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("certs: CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("certs: CA certificate: %w", err)
	}
	return &CA{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// CertPEM is the CA's certificate, the file peers trust (--tls-ca).
func (ca *CA) CertPEM() []byte { return ca.certPEM }

// KeyPEM is the CA's private key.
func (ca *CA) KeyPEM() ([]byte, error) { return keyPEM(ca.key) }

// Issue creates a leaf certificate for name valid from notBefore to
// notAfter, for servers and clients alike: every Weir daemon is both. It
// is valid for name, localhost and 127.0.0.1, so a cluster on one machine
// works with any leaf.
func (ca *CA) Issue(name string, notBefore, notAfter time.Time) (certPEM, keyPEMBytes []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: key of %s: %w", name, err)
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	if ip := net.ParseIP(name); ip != nil {
		if !ip.Equal(tmpl.IPAddresses[0]) {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		}
	} else if name != "localhost" {
		tmpl.DNSNames = append([]string{name}, tmpl.DNSNames...)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: certificate of %s: %w", name, err)
	}
	kp, err := keyPEM(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), kp, nil
}

// Init writes a new CA to dir (CAFile, CAKeyFile) and, for each host and
// for ClientName, <name>.pem and <name>-key.pem signed by it. It refuses
// to replace an existing CA unless force: every certificate the old one
// signed would stop being trusted. It returns the files written.
func Init(dir string, hosts []string, force bool) ([]string, error) {
	names, err := leafNames(hosts)
	if err != nil {
		return nil, err
	}
	if !force {
		for _, f := range []string{CAFile, CAKeyFile} {
			_, err := os.Stat(filepath.Join(dir, f))
			if err == nil {
				return nil, fmt.Errorf("certs: %s already exists: replacing the CA distrusts every certificate it signed (--force to do it anyway)", filepath.Join(dir, f))
			}
			if !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("certs: %w", err)
			}
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	now := time.Now()
	ca, err := NewCA("Weir CA", now.Add(-clockSkew), now.Add(CAValidity))
	if err != nil {
		return nil, err
	}
	caKey, err := ca.KeyPEM()
	if err != nil {
		return nil, err
	}
	var written []string
	write := func(name string, data []byte, perm os.FileMode) error {
		path := filepath.Join(dir, name)
		if err := writeFile(path, data, perm); err != nil {
			return err
		}
		written = append(written, path)
		return nil
	}
	// The CA goes last: after a failure part way through, running again
	// needs no --force.
	for _, name := range names {
		cert, key, err := ca.Issue(name, now.Add(-clockSkew), now.Add(LeafValidity))
		if err != nil {
			return written, err
		}
		if err := write(name+"-key.pem", key, 0o600); err != nil {
			return written, err
		}
		if err := write(name+".pem", cert, 0o644); err != nil {
			return written, err
		}
	}
	if err := write(CAKeyFile, caKey, 0o600); err != nil {
		return written, err
	}
	if err := write(CAFile, ca.CertPEM(), 0o644); err != nil {
		return written, err
	}
	return written, nil
}

// leafNames checks the host names and adds ClientName once.
func leafNames(hosts []string) ([]string, error) {
	seen := map[string]bool{}
	var names []string
	for _, h := range append(hosts, ClientName) {
		h = strings.TrimSpace(h)
		switch {
		case h == "":
			return nil, errors.New("certs: empty host name")
		case h == "ca" || strings.HasPrefix(h, ".") || strings.ContainsAny(h, `/\`) || strings.HasSuffix(h, "-key"):
			// It names the files: it must not escape the directory or
			// collide with the CA's or another leaf's key.
			return nil, fmt.Errorf("certs: %q cannot name a certificate file", h)
		case seen[h]:
			continue
		}
		seen[h] = true
		names = append(names, h)
	}
	return names, nil
}

// writeFile replaces path atomically, so a daemon reloading its
// certificate never reads half a file, with perm whatever the file had.
func writeFile(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	defer os.Remove(f.Name())
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("certs: write %s: %w", path, err)
	}
	return nil
}

func keyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("certs: marshal key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func serialNumber() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("certs: serial number: %w", err)
	}
	return n, nil
}
