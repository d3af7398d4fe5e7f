package jobmanager

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"

	"github.com/weirproject/weir/internal/ha"
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
	s      *Server
	local  http.Handler
	leader atomic.Pointer[ha.LeaderInfo]
}

func newLeaderProxy(s *Server, local http.Handler) *leaderProxy {
	return &leaderProxy{s: s, local: local}
}

// follow keeps the leader's address current until ctx ends.
func (p *leaderProxy) follow(ctx context.Context) {
	keys, err := ha.NewKeys(p.s.cfg.Etcd.ClusterID)
	if err != nil {
		p.s.log.Error("cannot follow the leader for the REST API", "err", err)
		return
	}
	for info := range ha.Observe(ctx, p.s.cfg.Etcd.Client, keys.Leader()) {
		p.leader.Store(&info)
	}
}

func (p *leaderProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p.s.leading.Load() {
		p.local.ServeHTTP(w, r)
		return
	}
	info := p.leader.Load()
	if info == nil || info.HTTPAddr == "" || info.ID == p.s.id || r.Header.Get(proxiedHeader) != "" {
		// Flink's answer while no leader is known, word for word.
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(map[string][]string{
			"errors": {"Service temporarily unavailable due to an ongoing leader election. Please refresh."},
		})
		return
	}
	target := &url.URL{Scheme: "http", Host: info.HTTPAddr}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.SetXForwarded()
			pr.Out.Header.Set(proxiedHeader, p.s.id)
		},
		ModifyResponse: func(resp *http.Response) error {
			resp.Header.Set("X-Weir-Leader", info.ID)
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			p.s.log.Warn("forwarding a REST request to the leader failed", "leader", info.HTTPAddr, "err", err)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadGateway)
			_ = json.NewEncoder(w).Encode(map[string][]string{
				"errors": {"this JobManager is a standby and could not reach the leader at " + info.HTTPAddr + ": " + err.Error()},
			})
		},
	}
	rp.ServeHTTP(w, r)
}
