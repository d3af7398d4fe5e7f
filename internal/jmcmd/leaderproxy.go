package jmcmd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"

	"github.com/weirproject/weir/internal/ha"
	"github.com/weirproject/weir/internal/jobmanager"
	"github.com/weirproject/weir/internal/kubeha"
)

// proxiedHeader marks a request a standby forwarded, so that two standbys
// that each think the other leads cannot bounce a request between them.
const proxiedHeader = "X-Weir-Proxied-By"

// leaderProxy serves the REST API on a standby JobManager by forwarding to
// the leader. Flink's standbys answer with the leader's address instead,
// which breaks scripts pointed at a load balancer or at a docker-compose
// port whose container happens to be the standby; forwarding keeps one
// address working whichever JobManager leads.
type leaderProxy struct {
	s      *jobmanager.Server
	cfg    jobmanager.Config
	local  http.Handler
	leader atomic.Pointer[ha.LeaderInfo]
	// scheme and transport reach the leader's HTTP address, served with
	// HTTPS when this JobManager's is: the cluster's JobManagers share
	// their configuration.
	scheme    string
	transport http.RoundTripper
}

func newLeaderProxy(s *jobmanager.Server, cfg jobmanager.Config, local http.Handler, https bool) *leaderProxy {
	p := &leaderProxy{s: s, cfg: cfg, local: local, scheme: "http", transport: http.DefaultTransport}
	if https {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.DialTLSContext = p.dialTLS
		p.scheme, p.transport = "https", t
	}
	return p
}

// dialTLS verifies the leader's HTTPS certificate with the cluster's CA
// as it is at each connection, so a rotated CA needs no restart, and with
// the system's roots when the REST certificate is a separate one (which a
// public CA may have signed).
func (p *leaderProxy) dialTLS(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("leader address %s: %w", addr, err)
	}
	cfg := &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	if p.cfg.RESTTLS != nil {
		if cfg.RootCAs, err = x509.SystemCertPool(); err != nil {
			return nil, fmt.Errorf("system certificate pool: %w", err)
		}
	}
	if p.cfg.TLS != nil {
		cfg = p.cfg.TLS.ClientConfig(cfg)
	}
	return (&tls.Dialer{Config: cfg}).DialContext(ctx, network, addr)
}

// follow keeps the leader's address current until ctx ends.
func (p *leaderProxy) follow(ctx context.Context) {
	var leaders <-chan ha.LeaderInfo
	switch p.cfg.HA {
	case "kubernetes":
		leaders = kubeha.Observe(ctx, p.cfg.Kube)
	default:
		keys, err := ha.NewKeys(p.cfg.Etcd.ClusterID)
		if err != nil {
			p.s.Logger().Error("cannot follow the leader for the REST API", "err", err)
			return
		}
		leaders = ha.Observe(ctx, p.cfg.Etcd.Client, keys.Leader())
	}
	for info := range leaders {
		p.leader.Store(&info)
	}
}

func (p *leaderProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p.s.Leading() {
		p.local.ServeHTTP(w, r)
		return
	}
	info := p.leader.Load()
	if info == nil || info.HTTPAddr == "" || info.ID == p.s.ID() || r.Header.Get(proxiedHeader) != "" {
		// Flink's answer while no leader is known, word for word.
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(map[string][]string{
			"errors": {"Service temporarily unavailable due to an ongoing leader election. Please refresh."},
		})
		return
	}
	target := &url.URL{Scheme: p.scheme, Host: info.HTTPAddr}
	rp := &httputil.ReverseProxy{
		Transport: p.transport,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.SetXForwarded()
			pr.Out.Header.Set(proxiedHeader, p.s.ID())
		},
		ModifyResponse: func(resp *http.Response) error {
			resp.Header.Set("X-Weir-Leader", info.ID)
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			p.s.Logger().Warn("forwarding a REST request to the leader failed", "leader", info.HTTPAddr, "err", err)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadGateway)
			_ = json.NewEncoder(w).Encode(map[string][]string{
				"errors": {"this JobManager is a standby and could not reach the leader at " + info.HTTPAddr + ": " + err.Error()},
			})
		},
	}
	rp.ServeHTTP(w, r)
}
