package rpc

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/weirproject/weir/internal/tlsconfig"
)

// Credentials are the transport credentials of a daemon's gRPC server and
// of its clients: mutual TLS with r's certificate and CA, or plaintext
// when r is nil. The server refuses a peer without a certificate the CA
// signed, and logs it to log (nil: slog's default).
func Credentials(r *tlsconfig.Reloader, log *slog.Logger) credentials.TransportCredentials {
	if r == nil {
		return insecure.NewCredentials()
	}
	if log == nil {
		log = slog.Default()
	}
	return &mutualTLS{
		r: r,
		server: credentials.NewTLS(r.ServerConfig(&tls.Config{
			MinVersion: tls.VersionTLS13,
			ClientAuth: tls.RequireAndVerifyClientCert,
			// A resumed session skips the client certificate's
			// verification against the CA as it is now.
			SessionTicketsDisabled: true,
		})),
		refusals: &refusalLog{log: log, interval: refusalInterval, last: map[string]time.Time{}, suppressed: map[string]int{}},
	}
}

// mutualTLS builds its client configuration at each handshake: unlike a
// server's, a client's tls.Config has no hook that could pick up a
// rotated CA.
type mutualTLS struct {
	r          *tlsconfig.Reloader
	server     credentials.TransportCredentials
	serverName string
	refusals   *refusalLog
}

func (m *mutualTLS) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	cfg := m.r.ClientConfig(&tls.Config{MinVersion: tls.VersionTLS13, ServerName: m.serverName})
	return credentials.NewTLS(cfg).ClientHandshake(ctx, authority, conn)
}

func (m *mutualTLS) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	c, info, err := m.server.ServerHandshake(conn)
	if err != nil {
		m.refusals.refused(conn.RemoteAddr(), err)
	}
	return c, info, err
}

func (m *mutualTLS) Info() credentials.ProtocolInfo { return m.server.Info() }

func (m *mutualTLS) Clone() credentials.TransportCredentials {
	c := *m
	return &c
}

// OverrideServerName is part of the interface gRPC still requires.
func (m *mutualTLS) OverrideServerName(name string) error {
	m.serverName = name
	return nil
}

// refusalInterval is how often a refusal of the same host is logged: a
// misconfigured peer retrying every second must not flood the log.
const refusalInterval = time.Minute

// refusalLog logs refused handshakes, at most once per interval per
// remote host.
type refusalLog struct {
	log      *slog.Logger
	interval time.Duration

	mu   sync.Mutex
	last map[string]time.Time
	// suppressed counts the refusals not logged since the last one logged.
	suppressed map[string]int
}

func (l *refusalLog) refused(remote net.Addr, err error) {
	host := remote.String()
	if h, _, splitErr := net.SplitHostPort(host); splitErr == nil {
		host = h
	}
	now := time.Now()
	l.mu.Lock()
	if t, ok := l.last[host]; ok && now.Sub(t) < l.interval {
		l.suppressed[host]++
		l.mu.Unlock()
		return
	}
	if len(l.last) > 1024 {
		// Many peers, such as a scan: forget the old ones, not the
		// rate limit of the ones refused just now.
		for h, t := range l.last {
			if now.Sub(t) >= l.interval {
				delete(l.last, h)
				delete(l.suppressed, h)
			}
		}
	}
	l.last[host] = now
	suppressed := l.suppressed[host]
	delete(l.suppressed, host)
	l.mu.Unlock()
	attrs := []any{"remote", remote.String(), "err", err}
	if ve, ok := errors.AsType[*tls.CertificateVerificationError](err); ok && len(ve.UnverifiedCertificates) > 0 {
		c := ve.UnverifiedCertificates[0]
		attrs = append(attrs, "subject", c.Subject.String(), "issuer", c.Issuer.String(), "not_after", c.NotAfter)
	}
	if suppressed > 0 {
		attrs = append(attrs, "refused_since_last_logged", suppressed)
	}
	l.log.Warn("gRPC connection refused at the TLS handshake", attrs...)
}
