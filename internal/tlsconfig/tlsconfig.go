// Package tlsconfig turns certificate files into TLS configurations that
// follow the files: a certificate, key or CA replaced on disk is used from
// the next handshake on, so certificates rotate without a restart.
package tlsconfig

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
)

// Files are PEM files: a certificate with its key, and CA certificates
// to verify peers with. Any of them may be empty where the use allows it.
type Files struct {
	Cert, Key, CA string
	// ServerName, when set, is the name every server's certificate is
	// verified against instead of the host dialled: on Kubernetes, where
	// daemons reach each other by pod IPs that no certificate can name
	// in advance, the cluster's certificate names the cluster.
	ServerName string
}

// IsZero reports whether no file is given.
func (f Files) IsZero() bool { return f == Files{} }

// Reloader serves the certificate and CA of its Files, checking before
// each handshake whether they changed on disk (one stat per file), and
// reading them again when they did. A replacement that does not load (a
// key that does not match the certificate yet, half way through a
// rotation) is logged once and the previous files stay in use.
type Reloader struct {
	files Files
	log   *slog.Logger

	mu   sync.Mutex
	pair watched
	ca   watched
	cert *tls.Certificate
	// cas are the CA certificates; pool holds them for verification.
	cas  []*x509.Certificate
	pool *x509.CertPool
}

// watched is the state of one group of files (certificate and key, or CA).
type watched struct {
	stamp   stamp
	content []byte
	// failed is the stamp and error of the last replacement that did not
	// load, so it is logged once, not at every handshake.
	failed    stamp
	failedErr string
}

// stamp identifies the version of up to two files on disk: the file
// (a rotation that renames a new file into place makes another one), its
// modification time and size.
type stamp [2]os.FileInfo

func (s stamp) equal(o stamp) bool {
	for i := range s {
		a, b := s[i], o[i]
		if a == nil || b == nil {
			if a != b {
				return false
			}
			continue
		}
		if !os.SameFile(a, b) || !a.ModTime().Equal(b.ModTime()) || a.Size() != b.Size() {
			return false
		}
	}
	return true
}

// New loads files. Cert and Key go together; at least one of Cert and CA
// is needed. Errors of the first load are returned; later ones logged.
func New(files Files, log *slog.Logger) (*Reloader, error) {
	if (files.Cert == "") != (files.Key == "") {
		return nil, errors.New("tlsconfig: a certificate needs its key and a key its certificate")
	}
	if files.Cert == "" && files.CA == "" {
		return nil, errors.New("tlsconfig: no certificate and no CA")
	}
	if log == nil {
		log = slog.Default()
	}
	r := &Reloader{files: files, log: log}
	if files.Cert != "" {
		if err := r.reloadPair(true); err != nil {
			return nil, err
		}
	}
	if files.CA != "" {
		if err := r.reloadCA(true); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// current returns the certificate (nil without Cert) and CA pool (nil
// without CA) after taking in changes on disk.
func (r *Reloader) current() (*tls.Certificate, []*x509.Certificate, *x509.CertPool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.files.Cert != "" {
		_ = r.reloadPair(false)
	}
	if r.files.CA != "" {
		_ = r.reloadCA(false)
	}
	return r.cert, r.cas, r.pool
}

// ServerConfig returns a server configuration that presents the current
// certificate and, when r has a CA, verifies client certificates with the
// current CA. base sets everything else (ClientAuth, NextProtos,
// MinVersion); it is not modified.
func (r *Reloader) ServerConfig(base *tls.Config) *tls.Config {
	base = base.Clone()
	return &tls.Config{
		MinVersion: base.MinVersion,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, _, pool := r.current()
			if cert == nil {
				return nil, errors.New("tlsconfig: no server certificate configured")
			}
			c := base.Clone()
			c.Certificates = []tls.Certificate{*cert}
			if pool != nil {
				c.ClientCAs = pool
			}
			return c, nil
		},
	}
}

// ClientConfig returns a client configuration that verifies servers with
// the CA as it is now, added to base.RootCAs when base has them, and
// presents the certificate current at each handshake. Build one per
// connection to follow a CA rotation. base is not modified.
func (r *Reloader) ClientConfig(base *tls.Config) *tls.Config {
	c := base.Clone()
	if c == nil {
		c = &tls.Config{}
	}
	_, cas, pool := r.current()
	switch {
	case pool == nil:
	case c.RootCAs == nil:
		c.RootCAs = pool
	default:
		c.RootCAs = c.RootCAs.Clone()
		for _, ca := range cas {
			c.RootCAs.AddCert(ca)
		}
	}
	if r.files.ServerName != "" {
		c.ServerName = r.files.ServerName
	}
	if r.files.Cert != "" {
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cert, _, _ := r.current()
			return cert, nil
		}
	}
	return c
}

// reloadPair reads the certificate and key if they changed; r.mu is held
// or r not shared yet.
func (r *Reloader) reloadPair(first bool) error {
	st, err := statFiles(r.files.Cert, r.files.Key)
	if err == nil && st.equal(r.pair.stamp) {
		return nil
	}
	var certPEM, keyPEM []byte
	if err == nil {
		certPEM, err = os.ReadFile(r.files.Cert)
	}
	if err == nil {
		keyPEM, err = os.ReadFile(r.files.Key)
	}
	content := append(append([]byte{}, certPEM...), keyPEM...)
	if err == nil && bytes.Equal(content, r.pair.content) {
		r.pair.stamp = st
		return nil
	}
	var cert tls.Certificate
	if err == nil {
		cert, err = tls.X509KeyPair(certPEM, keyPEM)
	}
	if err != nil {
		err = fmt.Errorf("tlsconfig: certificate %s with key %s: %w", r.files.Cert, r.files.Key, err)
		r.failed(&r.pair, st, first, err)
		return err
	}
	r.cert, r.pair = &cert, watched{stamp: st, content: content}
	r.log.Info("TLS certificate loaded", "file", r.files.Cert, "subject", cert.Leaf.Subject.String(), "not_after", cert.Leaf.NotAfter)
	return nil
}

// reloadCA reads the CA certificates if they changed, as reloadPair.
func (r *Reloader) reloadCA(first bool) error {
	st, err := statFiles(r.files.CA)
	if err == nil && st.equal(r.ca.stamp) {
		return nil
	}
	var b []byte
	if err == nil {
		b, err = os.ReadFile(r.files.CA)
	}
	if err == nil && bytes.Equal(b, r.ca.content) {
		r.ca.stamp = st
		return nil
	}
	var cas []*x509.Certificate
	if err == nil {
		cas, err = parseCerts(b)
	}
	if err != nil {
		err = fmt.Errorf("tlsconfig: CA %s: %w", r.files.CA, err)
		r.failed(&r.ca, st, first, err)
		return err
	}
	pool := x509.NewCertPool()
	for _, c := range cas {
		pool.AddCert(c)
	}
	r.cas, r.pool, r.ca = cas, pool, watched{stamp: st, content: b}
	r.log.Info("TLS CA loaded", "file", r.files.CA, "certificates", len(cas))
	return nil
}

// failed logs a replacement that does not load, once per version of the
// files; the first load's error is the caller's to report.
func (r *Reloader) failed(w *watched, st stamp, first bool, err error) {
	if first || (st.equal(w.failed) && err.Error() == w.failedErr) {
		return
	}
	w.failed, w.failedErr = st, err.Error()
	r.log.Warn("TLS files changed but do not load; the previous ones stay in use", "err", err)
}

func statFiles(paths ...string) (stamp, error) {
	var st stamp
	for i, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return stamp{}, err
		}
		st[i] = fi
	}
	return st, nil
}

func parseCerts(b []byte) ([]*x509.Certificate, error) {
	var cas []*x509.Certificate
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		cas = append(cas, c)
	}
	if len(cas) == 0 {
		return nil, errors.New("no PEM certificate")
	}
	return cas, nil
}
