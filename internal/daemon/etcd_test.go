package daemon

import (
	"context"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"

	"github.com/weirproject/weir/internal/certs"
	"github.com/weirproject/weir/internal/tlsconfig"
)

// TestEtcdClientTLS: with --etcd-cert, --etcd-key and --etcd-ca the client
// reaches an etcd that requires client certificates.
func TestEtcdClientTLS(t *testing.T) {
	dir := t.TempDir()
	if _, err := certs.Init(dir, []string{"etcd"}, false); err != nil {
		t.Fatal(err)
	}
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir, cfg.LogLevel = "tls", t.TempDir(), "panic"
	client := url.URL{Scheme: "https", Host: "127.0.0.1:0"}
	peer := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ClientTLSInfo.CertFile = filepath.Join(dir, "etcd.pem")
	cfg.ClientTLSInfo.KeyFile = filepath.Join(dir, "etcd-key.pem")
	cfg.ClientTLSInfo.TrustedCAFile = filepath.Join(dir, certs.CAFile)
	cfg.ClientTLSInfo.ClientCertAuth = true
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		t.Fatal(err)
	case <-time.After(30 * time.Second):
		t.Fatal("etcd not ready")
	}
	endpoint := e.Clients[0].Addr().String()

	files := tlsconfig.Files{Cert: filepath.Join(dir, "client.pem"), Key: filepath.Join(dir, "client-key.pem"), CA: filepath.Join(dir, certs.CAFile)}
	c, err := EtcdClient(endpoint, files, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Put(ctx, "k", "v"); err != nil {
		t.Fatalf("put over TLS: %v", err)
	}

	plain, err := EtcdClient(endpoint, tlsconfig.Files{CA: files.CA}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	ctx, cancel = context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := plain.Get(ctx, "k"); err == nil {
		t.Fatal("a client without certificate read from an etcd that requires one")
	}
}
