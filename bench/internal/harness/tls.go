package harness

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/weirproject/weir/internal/certs"
	"github.com/weirproject/weir/internal/rpc"
	"github.com/weirproject/weir/internal/tlsconfig"
)

// JobManagerCertName is the certificate GenerateCerts issues for the
// JobManager; each TaskManager's is named by its ID (tm-0, tm-1, …).
const JobManagerCertName = "jobmanager"

// GenerateCerts writes a CA and certificates for a JobManager, the
// TaskManagers tm-0 … tm-<taskManagers-1> and the harness's client to dir,
// replacing what is there. Each TaskManager gets its own certificate, as
// deployed: with mutual TLS the JobManager knows a TaskManager by it.
func GenerateCerts(dir string, taskManagers int) error {
	hosts := []string{JobManagerCertName}
	for i := range taskManagers {
		hosts = append(hosts, fmt.Sprintf("tm-%d", i))
	}
	if _, err := certs.Init(dir, hosts, true); err != nil {
		return fmt.Errorf("certificates in %s: %w", dir, err)
	}
	return nil
}

// certFiles are the files of the certificate named name in dir, as
// certs.Init writes them, with the CA.
func certFiles(dir, name string) tlsconfig.Files {
	return tlsconfig.Files{
		Cert: filepath.Join(dir, name+".pem"),
		Key:  filepath.Join(dir, name+"-key.pem"),
		CA:   filepath.Join(dir, certs.CAFile),
	}
}

// tlsFlags are a daemon's flags for mutual TLS with the certificate
// named name; an error when GenerateCerts did not issue it.
func tlsFlags(dir, name string) ([]string, error) {
	f := certFiles(dir, name)
	if _, err := os.Stat(f.Cert); err != nil {
		return nil, fmt.Errorf("no certificate for %s: %w", name, err)
	}
	return []string{"--tls-cert", f.Cert, "--tls-key", f.Key, "--tls-ca", f.CA}, nil
}

// clientTLS is what the harness needs to talk to a cluster on mutual TLS:
// the gRPC credentials of its client certificate, as the weir CLI dials,
// and an HTTPS client for /metrics, which the daemons then serve with
// their gRPC certificate.
func clientTLS(dir string) (credentials.TransportCredentials, *http.Client, error) {
	r, err := tlsconfig.New(certFiles(dir, certs.ClientName), nil)
	if err != nil {
		return nil, nil, fmt.Errorf("client certificate: %w", err)
	}
	// A transport of its own keeps the connections (and their handshakes)
	// of one cluster apart from plaintext scrapes.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = r.ClientConfig(&tls.Config{MinVersion: tls.VersionTLS13})
	return rpc.Credentials(r, nil), &http.Client{Timeout: 5 * time.Second, Transport: tr}, nil
}
