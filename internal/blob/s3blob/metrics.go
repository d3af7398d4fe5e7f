package s3blob

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The object store's requests, counted where they leave the process: a
// request the client retries counts once per attempt, with its result.
var (
	requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "weir_storage_requests_total",
		Help: "Requests to checkpoint object storage (S3), each attempt of a retried request counted, by operation and result (ok, not-found, client-error, throttled, server-error, error).",
	}, []string{"op", "result"})
	durations = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "weir_storage_request_duration_seconds",
		Help:    "Time of one request to checkpoint object storage (S3), until its response headers, by operation.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18),
	}, []string{"op"})
)

// Collectors are the storage metrics, for a daemon's registry.
func Collectors() []prometheus.Collector { return []prometheus.Collector{requests, durations} }

func observe(op, result string, d time.Duration) {
	requests.WithLabelValues(op, result).Inc()
	durations.WithLabelValues(op).Observe(d.Seconds())
}

// requestOp names an S3 request by its method and query.
func requestOp(req *http.Request) string {
	q := req.URL.Query()
	_, upload := q["uploadId"]
	_, uploads := q["uploads"]
	_, del := q["delete"]
	switch req.Method {
	case http.MethodGet:
		if q.Has("list-type") || q.Has("prefix") || q.Has("delimiter") || q.Has("location") || req.URL.Path == "/" || len(req.URL.Path) > 0 && req.URL.Path[len(req.URL.Path)-1] == '/' {
			return "list"
		}
		return "get"
	case http.MethodHead:
		return "stat"
	case http.MethodPut:
		if upload {
			return "put-part"
		}
		return "put"
	case http.MethodPost:
		switch {
		case uploads:
			return "multipart-start"
		case upload:
			return "multipart-complete"
		case del:
			return "delete"
		}
	case http.MethodDelete:
		if upload {
			return "multipart-abort"
		}
		return "delete"
	}
	return "other"
}

func result(resp *http.Response, err error) string {
	switch {
	case err != nil:
		return "error"
	case resp.StatusCode == http.StatusNotFound:
		return "not-found"
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable:
		return "throttled"
	case resp.StatusCode >= 500:
		return "server-error"
	case resp.StatusCode >= 400:
		return "client-error"
	}
	return "ok"
}
