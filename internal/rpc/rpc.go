// Package rpc holds what every Weir daemon does the same way with gRPC and
// HTTP: a server with health and reflection, client connections, and the
// /metrics and /healthz endpoints.
package rpc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"

	"github.com/weirproject/weir/internal/blob/s3blob"
	"github.com/weirproject/weir/internal/tlsconfig"
)

// MaxMessageSize bounds every gRPC message Weir sends or receives, on
// servers and clients alike; a larger one fails its call with
// ResourceExhausted naming both sizes, at the sender. The largest messages
// are data exchange buffers (at most task.Config.BatchSize records, 256 by
// default) and deployments or checkpoint acknowledgements carrying inline
// state; gRPC's default of 4 MiB for received messages would refuse a
// buffer of large records that 64 MiB admits, while still bounding what a
// peer can make a daemon allocate.
const MaxMessageSize = 64 << 20

// NewServer returns a gRPC server with creds (see Credentials), the
// message size limit and the health and reflection services.
func NewServer(creds credentials.TransportCredentials, opts ...grpc.ServerOption) (*grpc.Server, *health.Server) {
	s := grpc.NewServer(append([]grpc.ServerOption{
		grpc.Creds(creds),
		grpc.MaxRecvMsgSize(MaxMessageSize),
		grpc.MaxSendMsgSize(MaxMessageSize),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
	}, opts...)...)
	h := health.NewServer()
	healthpb.RegisterHealthServer(s, h)
	reflection.Register(s)
	return s, h
}

// JobManagerIDHeader carries the calling JobManager's ID on every call to a
// TaskManager, which obeys only the leader it registered with.
const JobManagerIDHeader = "weir-jobmanager-id"

// StampJobManager returns a dial option adding the JobManager's ID to calls.
func StampJobManager(id string) grpc.DialOption {
	return grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return invoker(metadata.AppendToOutgoingContext(ctx, JobManagerIDHeader, id), method, req, reply, cc, opts...)
	})
}

// Dial returns a client connection with creds (see Credentials) and the
// message size limit; gRPC connects lazily and reconnects.
func Dial(addr string, creds credentials.TransportCredentials, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient(addr, append([]grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageSize), grpc.MaxCallSendMsgSize(MaxMessageSize)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: true}),
	}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("rpc: dial %s: %w", addr, err)
	}
	return conn, nil
}

// HTTPS serves lis with TLS and r's certificate, without asking clients
// for one: browsers and Prometheus have none.
func HTTPS(lis net.Listener, r *tlsconfig.Reloader) net.Listener {
	return tls.NewListener(lis, r.ServerConfig(&tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}))
}

// NewRegistry returns a metrics registry with the Go runtime and process
// collectors and the checkpoint storage's request metrics, as every daemon
// exposes them.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(s3blob.Collectors()...)
	return reg
}

// pprofOn makes HTTPMux serve /debug/pprof; set once at start-up
// (EnablePprof), before any mux is built.
var pprofOn bool

// EnablePprof makes every HTTPMux built from now on serve net/http/pprof
// under /debug/pprof/ (the daemons' --pprof flag).
func EnablePprof() { pprofOn = true }

// HTTPMux serves /metrics from reg and /healthz, and /debug/pprof/ after
// EnablePprof.
func HTTPMux(reg *prometheus.Registry) *http.ServeMux {
	mux := http.NewServeMux()
	if pprofOn {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}

// Serve runs the gRPC server on rpcLis and the HTTP mux on httpLis until
// ctx ends, then shuts both down gracefully within grace.
func Serve(ctx context.Context, log *slog.Logger, g *grpc.Server, rpcLis net.Listener, mux http.Handler, httpLis net.Listener, grace time.Duration) error {
	hs := &http.Server{
		Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		// Failed TLS handshakes (a browser that does not trust the CA)
		// end up here, not on stderr.
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 2)
	go func() { errc <- g.Serve(rpcLis) }()
	go func() {
		if err := hs.Serve(httpLis); !errors.Is(err, http.ErrServerClosed) {
			errc <- err
			return
		}
		errc <- nil
	}()
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	log.Info("shutting down servers")
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	_ = hs.Shutdown(sctx)
	stopped := make(chan struct{})
	go func() { g.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-sctx.Done():
		g.Stop()
	}
	return err
}

// Listen returns the daemon's two listeners: the ones given, or new ones
// on the addresses (port 0 picks a free port; the daemon logs and
// advertises the one it got). On an error nothing stays open.
func Listen(rpcLis net.Listener, rpcAddr string, httpLis net.Listener, httpAddr string) (net.Listener, net.Listener, error) {
	var err error
	if rpcLis == nil {
		if rpcLis, err = net.Listen("tcp", rpcAddr); err != nil {
			if httpLis != nil {
				httpLis.Close()
			}
			return nil, nil, fmt.Errorf("listen rpc: %w", err)
		}
	}
	if httpLis == nil {
		if httpLis, err = net.Listen("tcp", httpAddr); err != nil {
			rpcLis.Close()
			return nil, nil, fmt.Errorf("listen http: %w", err)
		}
	}
	return rpcLis, httpLis, nil
}
