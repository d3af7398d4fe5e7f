package kubeha

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/weirproject/weir/internal/checkpoint"
	"github.com/weirproject/weir/internal/ha"
)

const (
	keyCounter      = "counter"
	checkpointKey   = "checkpoint-"
	keyGraph        = "graph"
	keyStatus       = "status"
	checkpointWidth = 20
)

// Checkpoints is one job's checkpoint ID counter and completed-checkpoint
// store, in the job's checkpoints ConfigMap. A ConfigMap holds at most
// 1 MiB: thousands of retained checkpoints, each a path.
type Checkpoints struct {
	obj      *object
	retained int
}

// NewCheckpoints returns the counter and store of jobID keeping the newest
// retained (≥ 1) checkpoints, writing under fence (the zero Fence reads
// only).
func NewCheckpoints(cfg Config, jobID string, retained int, fence Fence) (*Checkpoints, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if jobID == "" {
		return nil, errors.New("kubeha: checkpoints: empty job ID")
	}
	return &Checkpoints{obj: newObject(cfg, NewNames(cfg.ClusterID), typeCheckpoints, jobID, fence), retained: max(retained, 1)}, nil
}

// Name is the ConfigMap's name.
func (c *Checkpoints) Name() string { return c.obj.name }

func (c *Checkpoints) wrap(what string, err error) error {
	return fmt.Errorf("kubeha: checkpoints %s: %s: %w", c.obj.name, what, err)
}

func parseCounter(cm *corev1.ConfigMap) (int64, error) {
	v, ok := cm.Data[keyCounter]
	if !ok {
		return 0, nil
	}
	last, err := strconv.ParseInt(v, 10, 64)
	if err != nil || last < 0 {
		return 0, fmt.Errorf("corrupt counter %q", v)
	}
	return last, nil
}

// Next claims and returns a fresh checkpoint ID, one above the last issued.
func (c *Checkpoints) Next(ctx context.Context) (int64, error) {
	ctx, cancel := c.obj.cfg.bound(ctx)
	defer cancel()
	var id int64
	_, err := c.obj.update(ctx, func(cm *corev1.ConfigMap) (bool, error) {
		last, err := parseCounter(cm)
		if err != nil {
			return false, err
		}
		if last == math.MaxInt64 {
			return false, fmt.Errorf("counter at its maximum %d", last)
		}
		id = last + 1
		setData(cm, keyCounter, strconv.FormatInt(id, 10))
		return true, nil
	})
	if err != nil {
		return 0, c.wrap("next ID", err)
	}
	return id, nil
}

// SetIfHigher raises the last issued ID to v if it is lower.
func (c *Checkpoints) SetIfHigher(ctx context.Context, v int64) error {
	ctx, cancel := c.obj.cfg.bound(ctx)
	defer cancel()
	_, err := c.obj.update(ctx, func(cm *corev1.ConfigMap) (bool, error) {
		last, err := parseCounter(cm)
		if err != nil || v <= last {
			return false, err
		}
		setData(cm, keyCounter, strconv.FormatInt(v, 10))
		return true, nil
	})
	if err != nil {
		return c.wrap(fmt.Sprintf("set counter if higher than %d", v), err)
	}
	return nil
}

// Last returns the last ID issued, 0 if none.
func (c *Checkpoints) Last(ctx context.Context) (int64, error) {
	ctx, cancel := c.obj.cfg.bound(ctx)
	defer cancel()
	cm, err := c.obj.read(ctx)
	if err != nil || cm == nil {
		return 0, err
	}
	last, err := parseCounter(cm)
	if err != nil {
		return 0, c.wrap("counter", err)
	}
	return last, nil
}

// entry is one stored checkpoint as read.
type entry struct {
	key string
	id  int64
	cp  checkpoint.Completed
	err error
}

func entries(cm *corev1.ConfigMap) []entry {
	if cm == nil {
		return nil
	}
	var out []entry
	for k, v := range cm.Data {
		name, ok := strings.CutPrefix(k, checkpointKey)
		if !ok {
			continue
		}
		e := entry{key: k}
		id, err := strconv.ParseInt(name, 10, 64)
		if err != nil || id <= 0 || len(name) != checkpointWidth {
			e.err = errors.New("key is not a 20-digit checkpoint ID")
		} else {
			e.id = id
			e.cp, e.err = ha.DecodeCheckpoint(id, []byte(v))
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}

func checkpointName(id int64) string {
	return fmt.Sprintf("%s%0*d", checkpointKey, checkpointWidth, id)
}

// Add stores cp and removes the checkpoints beyond the newest retained in
// one fenced update, returning the removed ones, oldest first. Adding the
// same ID again overwrites it.
func (c *Checkpoints) Add(ctx context.Context, cp checkpoint.Completed) ([]checkpoint.Completed, error) {
	val, err := ha.EncodeCheckpoint(cp)
	if err != nil {
		return nil, c.wrap(fmt.Sprintf("add checkpoint %d", cp.ID), err)
	}
	ctx, cancel := c.obj.cfg.bound(ctx)
	defer cancel()
	var subsumed []checkpoint.Completed
	_, err = c.obj.update(ctx, func(cm *corev1.ConfigMap) (bool, error) {
		subsumed = nil
		var kept []entry
		for _, e := range entries(cm) {
			switch {
			case e.id == 0:
				c.obj.cfg.Logger.Warn("kubeha: ignoring foreign key in checkpoint store", "configmap", c.obj.name, "key", e.key)
			case e.id > cp.ID:
				return false, fmt.Errorf("older than stored checkpoint %d", e.id)
			case e.id < cp.ID:
				kept = append(kept, e)
			}
		}
		setData(cm, checkpointName(cp.ID), string(val))
		if n := len(kept) + 1 - c.retained; n > 0 {
			for _, e := range kept[:n] {
				delete(cm.Data, e.key)
				if e.err != nil {
					subsumed = append(subsumed, checkpoint.Completed{ID: e.id})
					continue
				}
				subsumed = append(subsumed, e.cp)
			}
		}
		return true, nil
	})
	if err != nil {
		if errors.Is(err, errOutcomeUnknown) {
			err = fmt.Errorf("%w: %w", checkpoint.ErrOutcomeUnknown, err)
		}
		return nil, c.wrap(fmt.Sprintf("add checkpoint %d", cp.ID), err)
	}
	return subsumed, nil
}

// All returns the stored checkpoints, oldest first; an unreadable entry is
// an error.
func (c *Checkpoints) All(ctx context.Context) ([]checkpoint.Completed, error) {
	ctx, cancel := c.obj.cfg.bound(ctx)
	defer cancel()
	cm, err := c.obj.read(ctx)
	if err != nil {
		return nil, c.wrap("list", err)
	}
	var out []checkpoint.Completed
	for _, e := range entries(cm) {
		if e.err != nil {
			return nil, c.wrap("list", fmt.Errorf("%s: %w", e.key, e.err))
		}
		out = append(out, e.cp)
	}
	return out, nil
}

// RecoverReport claims the store for the caller's term (with a fence) and
// returns the entries that decode and pass validate, oldest first, and
// the ones it skipped.
func (c *Checkpoints) RecoverReport(ctx context.Context, validate func(checkpoint.Completed) error) ([]checkpoint.Completed, []ha.SkippedCheckpoint, error) {
	ctx, cancel := c.obj.cfg.bound(ctx)
	defer cancel()
	var cm *corev1.ConfigMap
	var err error
	if c.obj.fence.IsZero() {
		cm, err = c.obj.read(ctx)
	} else {
		cm, err = c.obj.update(ctx, func(*corev1.ConfigMap) (bool, error) { return false, nil })
	}
	if err != nil {
		return nil, nil, c.wrap("recover", err)
	}
	var kept []checkpoint.Completed
	var skipped []ha.SkippedCheckpoint
	for _, e := range entries(cm) {
		if e.err == nil && validate != nil {
			if verr := validate(e.cp); verr != nil {
				e.err = fmt.Errorf("invalid: %w", verr)
			}
		}
		if e.err != nil {
			skipped = append(skipped, ha.SkippedCheckpoint{Key: c.obj.name + "/" + e.key, ID: e.id, Err: e.err})
			continue
		}
		kept = append(kept, e.cp)
	}
	return kept, skipped, nil
}

// Shutdown ends the store. With discard (the job reached a globally
// terminal state) the ConfigMap is deleted and its checkpoints returned,
// oldest first, for the caller to discard.
func (c *Checkpoints) Shutdown(ctx context.Context, discard bool) ([]checkpoint.Completed, error) {
	if !discard {
		return nil, nil
	}
	ctx, cancel := c.obj.cfg.bound(ctx)
	defer cancel()
	cm, err := c.obj.read(ctx)
	if err != nil {
		return nil, c.wrap("shutdown", err)
	}
	if err := c.obj.remove(ctx); err != nil {
		return nil, c.wrap("shutdown", err)
	}
	var removed []checkpoint.Completed
	for _, e := range entries(cm) {
		if e.id == 0 {
			continue
		}
		cp := e.cp // zero but for the ID when the entry is unreadable
		cp.ID = e.id
		removed = append(removed, cp)
	}
	return removed, nil
}

// ShutdownCounter is the counter's part of Shutdown: the ConfigMap goes
// with the store's.
func (c *Checkpoints) ShutdownCounter(ctx context.Context, discard bool) error {
	if !discard {
		return nil
	}
	ctx, cancel := c.obj.cfg.bound(ctx)
	defer cancel()
	if err := c.obj.remove(ctx); err != nil {
		return c.wrap("shutdown counter", err)
	}
	return nil
}

func setData(cm *corev1.ConfigMap, k, v string) {
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[k] = v
}

// JobStore keeps the submitted job graphs of a cluster, one ConfigMap per
// job.
type JobStore struct {
	cfg   Config
	names Names
	fence Fence
}

// NewJobStore returns the job store of cfg.ClusterID, writing under fence.
func NewJobStore(cfg Config, fence Fence) (*JobStore, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &JobStore{cfg: cfg, names: NewNames(cfg.ClusterID), fence: fence}, nil
}

func (s *JobStore) object(id string) *object { return newObject(s.cfg, s.names, typeJob, id, s.fence) }

// maxObjectBytes is what a ConfigMap may hold (etcd's request limit on
// the API server's side).
const maxObjectBytes = 1 << 20

// Put stores (or replaces) the graph of jobID.
func (s *JobStore) Put(ctx context.Context, jobID string, graph []byte) error {
	if len(graph) > maxObjectBytes-64<<10 {
		return fmt.Errorf("kubeha: job store: put %s: the job graph is %d bytes; a ConfigMap holds at most 1 MiB", jobID, len(graph))
	}
	ctx, cancel := s.cfg.bound(ctx)
	defer cancel()
	o := s.object(jobID)
	if _, err := o.update(ctx, func(cm *corev1.ConfigMap) (bool, error) {
		if cm.BinaryData == nil {
			cm.BinaryData = map[string][]byte{}
		}
		cm.BinaryData[keyGraph] = graph
		return true, nil
	}); err != nil {
		return fmt.Errorf("kubeha: job store: put %s: %w", o.name, err)
	}
	return nil
}

// PutStatus stores (or replaces) the status record of jobID. A job whose
// graph is not stored gets none.
func (s *JobStore) PutStatus(ctx context.Context, jobID string, status []byte) error {
	ctx, cancel := s.cfg.bound(ctx)
	defer cancel()
	o := s.object(jobID)
	if _, err := o.update(ctx, func(cm *corev1.ConfigMap) (bool, error) {
		if cm.BinaryData[keyGraph] == nil {
			return false, fmt.Errorf("job %s is not stored", jobID)
		}
		setData(cm, keyStatus, string(status))
		return true, nil
	}); err != nil {
		return fmt.Errorf("kubeha: job store: put status %s: %w", o.name, err)
	}
	return nil
}

// Delete removes jobID's graph and status.
func (s *JobStore) Delete(ctx context.Context, jobID string) error {
	ctx, cancel := s.cfg.bound(ctx)
	defer cancel()
	o := s.object(jobID)
	if err := o.remove(ctx); err != nil {
		return fmt.Errorf("kubeha: job store: delete %s: %w", o.name, err)
	}
	return nil
}

// List claims every stored job for the caller's term (with a fence) and
// returns them.
func (s *JobStore) List(ctx context.Context) ([]ha.StoredJob, error) {
	ctx, cancel := s.cfg.bound(ctx)
	defer cancel()
	list, err := s.cfg.Client.CoreV1().ConfigMaps(s.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: s.names.selector(typeJob)})
	if err != nil {
		return nil, fmt.Errorf("kubeha: job store: list: %w", err)
	}
	var out []ha.StoredJob
	for i := range list.Items {
		cm := &list.Items[i]
		id := cm.Annotations[AnnotJobID]
		if id == "" || s.names.Job(id) != cm.Name {
			s.cfg.Logger.Warn("kubeha: ignoring a job configmap without a matching job ID", "configmap", cm.Name)
			continue
		}
		if !s.fence.IsZero() {
			o := s.object(id)
			o.remember(cm)
			if cm, err = o.update(ctx, func(*corev1.ConfigMap) (bool, error) { return false, nil }); err != nil {
				return nil, fmt.Errorf("kubeha: job store: claim %s: %w", o.name, err)
			}
			if cm == nil {
				continue // deleted meanwhile
			}
		}
		sj := ha.StoredJob{ID: id, Graph: cm.BinaryData[keyGraph]}
		if st, ok := cm.Data[keyStatus]; ok {
			sj.Status = []byte(st)
		}
		out = append(out, sj)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}
