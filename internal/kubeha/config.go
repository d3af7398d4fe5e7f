package kubeha

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
)

// Labels and annotations of Weir's HA objects.
const (
	LabelCluster   = "weir.dev/cluster"
	LabelType      = "weir.dev/type"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	AnnotTerm      = "weir.dev/term"
	AnnotJobID     = "weir.dev/job-id"
	AnnotLeader    = "weir.dev/leader"

	typeJob         = "job"
	typeCheckpoints = "checkpoints"
	typeTerm        = "term"
)

// Defaults of Config.
const (
	DefaultLeaseDuration  = 10 * time.Second
	DefaultRequestTimeout = 5 * time.Second
)

// Config is what the Kubernetes-backed types share.
type Config struct {
	// Client reaches the API server.
	Client kubernetes.Interface
	// Namespace holds the cluster's Lease and ConfigMaps.
	Namespace string
	// ClusterID names the Weir cluster: a DNS label (lower-case letters,
	// digits and '-', at most 40 characters so that every name built
	// from it stays a valid object name).
	ClusterID string
	// LeaseDuration is how long a leader that cannot renew may still
	// believe it leads (it steps down after two thirds of it), and how
	// long the takeover after a crashed leader waits. Whole seconds.
	// Default DefaultLeaseDuration.
	LeaseDuration time.Duration
	// RequestTimeout bounds each operation, retries included. Default
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
	// Logger receives what callers cannot act on. Default: discard.
	Logger *slog.Logger
}

// Validate reports whether c can be used.
func (c Config) Validate() error {
	if c.Client == nil {
		return errors.New("kubeha: config: Client is nil")
	}
	if errs := validation.IsDNS1123Label(c.Namespace); len(errs) > 0 {
		return fmt.Errorf("kubeha: config: namespace %q: %s", c.Namespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Label(c.ClusterID); len(errs) > 0 || len(c.ClusterID) > 40 {
		return fmt.Errorf("kubeha: config: cluster ID %q must be a DNS label of at most 40 characters (lower-case letters, digits, '-')", c.ClusterID)
	}
	if c.LeaseDuration < 0 || c.RequestTimeout < 0 {
		return errors.New("kubeha: config: negative LeaseDuration or RequestTimeout")
	}
	return nil
}

func (c Config) withDefaults() (Config, error) {
	if err := c.Validate(); err != nil {
		return c, err
	}
	if c.LeaseDuration == 0 {
		c.LeaseDuration = DefaultLeaseDuration
	}
	c.LeaseDuration = max(time.Second, c.LeaseDuration.Round(time.Second))
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// bound limits ctx to the request timeout.
func (c Config) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.RequestTimeout)
}

// Names builds the object names of one cluster.
type Names struct{ cluster string }

// NewNames returns the names of cluster clusterID.
func NewNames(clusterID string) Names { return Names{cluster: clusterID} }

// Lease is the election's Lease.
func (n Names) Lease() string { return "weir-" + n.cluster + "-leader" }

// Term is the ConfigMap where each leadership records its term.
func (n Names) Term() string { return "weir-" + n.cluster + "-term" }

// Job is the ConfigMap of job id's graph and status.
func (n Names) Job(id string) string { return "weir-" + n.cluster + "-job-" + jobPart(id) }

// Checkpoints is the ConfigMap of job id's counter and completed
// checkpoints.
func (n Names) Checkpoints(id string) string {
	return "weir-" + n.cluster + "-checkpoints-" + jobPart(id)
}

// jobPart is the job ID itself when it is a short DNS label, else a hash
// that is one (the ID is kept in an annotation either way).
func jobPart(id string) string {
	if len(validation.IsDNS1123Label(id)) == 0 && len(id) <= 180 {
		return id
	}
	h := fnv.New64a()
	h.Write([]byte(id))
	return fmt.Sprintf("h%016x", h.Sum64())
}

func (n Names) labels(typ string) map[string]string {
	return map[string]string{LabelCluster: n.cluster, LabelType: typ, LabelManagedBy: "weir"}
}

func (n Names) selector(typ string) string {
	return LabelCluster + "=" + n.cluster + "," + LabelType + "=" + typ
}
