package jmcmd

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/weirproject/weir/internal/auth"
	"github.com/weirproject/weir/internal/ha"
	"github.com/weirproject/weir/internal/jobmanager"
	"github.com/weirproject/weir/internal/restapi"
	"github.com/weirproject/weir/internal/rpc"
	"github.com/weirproject/weir/internal/webui"
)

// Serve serves s, built from cfg, until ctx ends, then shuts it down: the
// gRPC services (client API, TaskManager gateway) behind the leader gate
// and, with --auth-token-file, the tokens; on the HTTP address Flink's
// REST API (forwarded to the leader from a standby), the dashboard,
// /metrics and /healthz.
func Serve(ctx context.Context, s *jobmanager.Server, cfg jobmanager.Config) error {
	log := s.Logger()
	rpcLis, httpLis, err := rpc.Listen(cfg.RPCListener, cfg.RPCAddr, cfg.HTTPListener, cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("jobmanager: %w", err)
	}
	interceptors := []grpc.UnaryServerInterceptor{s.Interceptor()}
	var enforcer *auth.Enforcer
	if cfg.Tokens != nil {
		enforcer = auth.NewEnforcer(cfg.Tokens, log, s.Metrics())
		interceptors = append([]grpc.UnaryServerInterceptor{enforcer.UnaryInterceptor()}, interceptors...)
	} else {
		log.Warn("no --auth-token-file: the REST API and the gRPC client API take requests from anyone who reaches them, to submit, cancel and dispose too")
	}
	g, _ := rpc.NewServer(s.Credentials(), grpc.ChainUnaryInterceptor(interceptors...))
	s.Register(g)
	restTLS := cfg.RESTTLS
	if restTLS == nil {
		restTLS = cfg.TLS
	}
	if restTLS != nil {
		httpLis = rpc.HTTPS(httpLis, restTLS)
	}
	log.Info("jobmanager started", "id", s.ID(), "rpc_addr", rpcLis.Addr().String(), "http_addr", httpLis.Addr().String(),
		"checkpoint_dir", cfg.CheckpointDir, "ha", cfg.HA, "grpc_mtls", cfg.TLS != nil, "https", restTLS != nil)
	switch {
	case cfg.TLS == nil && restTLS == nil:
		log.Warn("TLS is off: gRPC and HTTP are plaintext and accept any client that reaches them (--tls-cert, --tls-key and --tls-ca turn on mutual TLS)")
	case cfg.TLS == nil:
		log.Warn("TLS is off for gRPC: it is plaintext and accepts any client that reaches it (--tls-cert, --tls-key and --tls-ca turn on mutual TLS)")
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		s.Background(ctx, ha.LeaderInfo{
			ID:       s.ID(),
			RPCAddr:  advertise(cfg.AdvertiseAddr, rpcLis.Addr()),
			HTTPAddr: advertise(cfg.AdvertiseHTTPAddr, httpLis.Addr()),
		})
	})
	rest := restapi.New(s, log)
	defer rest.Close()
	var api http.Handler = rest
	if cfg.HA != "none" {
		proxy := newLeaderProxy(s, cfg, rest, restTLS != nil)
		api = proxy
		wg.Go(func() { proxy.follow(ctx) })
	}
	if enforcer != nil {
		// Checked here, on a standby too: a request without the role is
		// refused before it is forwarded to the leader.
		api = enforcer.HTTP(api)
	}
	mux := rpc.HTTPMux(s.Metrics())
	// Flink's REST API, from the same core as the gRPC client API; its
	// paths, with and without Flink's /v1 prefix.
	for _, p := range []string{"/overview", "/config", "/jobmanager/", "/jobs", "/jobs/", "/taskmanagers", "/taskmanagers/", "/savepoint-disposal", "/savepoint-disposal/", "/v1/"} {
		mux.Handle(p, api)
	}
	// The web dashboard is everything else.
	mux.Handle("/", webui.Handler())
	err = rpc.Serve(ctx, log, g, rpcLis, mux, httpLis, 5*time.Second)
	wg.Wait()
	s.Shutdown()
	return err
}

// advertise derives a reachable address from a listener when none is set.
func advertise(configured string, lis net.Addr) string {
	if configured != "" {
		return configured
	}
	host, port, _ := net.SplitHostPort(lis.String())
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
