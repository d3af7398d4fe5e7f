package auth

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Enforcer checks the tokens of the REST API's and the gRPC client API's
// requests, logs and counts what it refuses. The token itself is never
// logged nor counted.
type Enforcer struct {
	tokens  *Tokens
	log     *slog.Logger
	refused *prometheus.CounterVec
}

// NewEnforcer returns an Enforcer of tokens whose counter
// weir_auth_refused_total{api,reason} registers with reg (when not nil).
func NewEnforcer(tokens *Tokens, log *slog.Logger, reg prometheus.Registerer) *Enforcer {
	e := &Enforcer{
		tokens: tokens,
		log:    log.With("component", "auth"),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_auth_refused_total",
			Help: "Requests refused for a missing or unknown token (reason unauthenticated) or a role too low (reason forbidden), by API (rest, grpc).",
		}, []string{"api", "reason"}),
	}
	for _, api := range []string{"rest", "grpc"} {
		for _, reason := range []string{"unauthenticated", "forbidden"} {
			e.refused.WithLabelValues(api, reason)
		}
	}
	if reg != nil {
		reg.MustRegister(e.refused)
	}
	return e
}

func (d Decision) reason() string {
	if d == Forbidden {
		return "forbidden"
	}
	return "unauthenticated"
}

// HTTPRole is the role a REST request needs: read for the methods that
// change nothing, admin for the others.
func HTTPRole(r *http.Request) Role {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return Read
	}
	return Admin
}

// HTTP serves next the requests whose "Authorization: Bearer" token has
// the role HTTPRole asks; others get 401 (with WWW-Authenticate) or 403
// and Flink's error body.
func (e *Enforcer) HTTP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		need := HTTPRole(r)
		d := e.tokens.Check(BearerToken(r.Header.Get("Authorization")), need)
		if d == Allow {
			next.ServeHTTP(w, r)
			return
		}
		e.refused.WithLabelValues("rest", d.reason()).Inc()
		e.log.Warn("request refused", "api", "rest", "reason", d.reason(), "need", need.String(),
			"method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
		code, msg := http.StatusUnauthorized, "a bearer token is required: send \"Authorization: Bearer <token>\""
		if d == Forbidden {
			code, msg = http.StatusForbidden, "the token's role may not "+strings.ToLower(r.Method)+" "+r.URL.Path+": it needs the "+need.String()+" role"
		} else {
			w.Header().Set("WWW-Authenticate", `Bearer realm="weir"`)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(map[string][]string{"errors": {msg}})
	})
}

// clientService is the gRPC service the tokens guard; the others carry
// the daemons' own traffic, which mutual TLS guards.
const clientService = "/weir.v1.ClientService/"

// GRPCRole is the role a gRPC call needs: read for the client API's Get
// and List methods, admin for its others, none outside the client API.
func GRPCRole(fullMethod string) Role {
	m, ok := strings.CutPrefix(fullMethod, clientService)
	switch {
	case !ok:
		return None
	case strings.HasPrefix(m, "Get"), strings.HasPrefix(m, "List"):
		return Read
	}
	return Admin
}

// UnaryInterceptor refuses client API calls whose "authorization: Bearer"
// metadata lacks the role GRPCRole asks: Unauthenticated or
// PermissionDenied.
func (e *Enforcer) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		need := GRPCRole(info.FullMethod)
		if need == None {
			return handler(ctx, req)
		}
		var token string
		if md, ok := metadata.FromIncomingContext(ctx); ok {
			if v := md.Get("authorization"); len(v) > 0 {
				token = BearerToken(v[0])
			}
		}
		d := e.tokens.Check(token, need)
		if d == Allow {
			return handler(ctx, req)
		}
		e.refused.WithLabelValues("grpc", d.reason()).Inc()
		remote := ""
		if p, ok := peer.FromContext(ctx); ok {
			remote = p.Addr.String()
		}
		e.log.Warn("request refused", "api", "grpc", "reason", d.reason(), "need", need.String(), "method", info.FullMethod, "remote", remote)
		if d == Forbidden {
			return nil, status.Errorf(codes.PermissionDenied, "auth: %s needs the %s role", info.FullMethod, need)
		}
		return nil, status.Error(codes.Unauthenticated, "auth: a bearer token is required (the CLI reads it from --token-file or WEIR_TOKEN)")
	}
}

// Credentials sends a bearer token with every call: the client side of
// UnaryInterceptor.
type Credentials struct{ Token string }

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (c Credentials) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + c.Token}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials. A
// token sent in clear can be read on the path, but refusing to send it
// would only make an open cluster harder to close step by step.
func (c Credentials) RequireTransportSecurity() bool { return false }
