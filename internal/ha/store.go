package ha

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/weirproject/weir/internal/checkpoint"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// checkpointRecord is the JSON value of a completed-checkpoint key. It is
// separate from checkpoint.Completed so that the stored format changes only
// on purpose.
type checkpointRecord struct {
	ID           int64  `json:"id"`
	MetadataPath string `json:"metadata_path"`
	Dir          string `json:"dir,omitempty"`
	Savepoint    bool   `json:"savepoint,omitempty"`
}

// EtcdStore is the completed-checkpoint store of one job in etcd: one key
// per retained checkpoint, named by its zero-padded ID, holding the path
// of its _metadata (never the metadata itself). Writes are fenced.
type EtcdStore struct {
	cfg      Config
	prefix   string // Keys.Completed(job)
	keys     Keys
	jobID    string
	retained int
	fence    Fence
}

// SkippedCheckpoint is a store entry that Recover could not use.
type SkippedCheckpoint struct {
	Key string
	ID  int64 // 0 when the key itself is unreadable
	Err error
}

// NewEtcdStore returns the store of jobID keeping the newest retained (≥ 1)
// checkpoints, writing under fence (the zero Fence gives a store that can
// only read).
func NewEtcdStore(cfg Config, jobID string, retained int, fence Fence) (*EtcdStore, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	keys, err := NewKeys(cfg.ClusterID)
	if err != nil {
		return nil, err
	}
	if err := checkName("job ID", jobID); err != nil {
		return nil, fmt.Errorf("ha: checkpoint store: %w", err)
	}
	return &EtcdStore{
		cfg:      cfg,
		prefix:   keys.Completed(jobID),
		keys:     keys,
		jobID:    jobID,
		retained: max(retained, 1),
		fence:    fence,
	}, nil
}

// Prefix is the etcd prefix of the store's keys.
func (s *EtcdStore) Prefix() string { return s.prefix }

// entry is one key of the store as read.
type entry struct {
	key    string
	modRev int64
	id     int64 // from the key; 0 if the key is not an ID
	cp     checkpoint.Completed
	err    error // why the entry is unreadable
}

// list reads every key of the store, ordered by key, which is ID order.
func (s *EtcdStore) list(ctx context.Context) ([]entry, int64, error) {
	resp, err := s.cfg.Client.Get(ctx, s.prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, 0, err
	}
	out := make([]entry, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out = append(out, s.decode(kv))
	}
	return out, resp.Header.Revision, nil
}

func (s *EtcdStore) decode(kv *mvccpb.KeyValue) entry {
	e := entry{key: string(kv.Key), modRev: kv.ModRevision}
	name, _ := trimPrefix(kv.Key, s.prefix)
	id, err := strconv.ParseInt(name, 10, 64)
	if err != nil || id <= 0 || len(name) != 20 {
		e.err = fmt.Errorf("key is not a 20-digit checkpoint ID")
		return e
	}
	e.id = id
	e.cp, e.err = DecodeCheckpoint(id, kv.Value)
	return e
}

// EncodeCheckpoint is the stored value of one completed checkpoint: a
// pointer to its _metadata, never the metadata itself. Every HA backend
// stores the same JSON, so that its format changes only on purpose.
func EncodeCheckpoint(cp checkpoint.Completed) ([]byte, error) {
	if cp.ID <= 0 {
		return nil, errors.New("checkpoint ID must be positive")
	}
	if cp.MetadataPath == "" {
		return nil, errors.New("no metadata path")
	}
	return json.Marshal(checkpointRecord{ID: cp.ID, MetadataPath: cp.MetadataPath, Dir: cp.Dir, Savepoint: cp.Savepoint})
}

// DecodeCheckpoint reads a value EncodeCheckpoint wrote for checkpoint id.
func DecodeCheckpoint(id int64, v []byte) (checkpoint.Completed, error) {
	var rec checkpointRecord
	switch err := json.Unmarshal(v, &rec); {
	case err != nil:
		return checkpoint.Completed{}, fmt.Errorf("unreadable value: %w", err)
	case rec.ID != id:
		return checkpoint.Completed{}, fmt.Errorf("value holds checkpoint %d", rec.ID)
	case rec.MetadataPath == "":
		return checkpoint.Completed{}, errors.New("value has no metadata path")
	}
	return checkpoint.Completed{ID: rec.ID, MetadataPath: rec.MetadataPath, Dir: rec.Dir, Savepoint: rec.Savepoint}, nil
}

// Add stores cp, then removes the checkpoints beyond the newest retained,
// in one fenced transaction, and returns the removed ones, oldest first,
// for the caller to discard. cp must not be older than the newest stored
// checkpoint; adding the same ID again (retrying an Add whose outcome was
// unknown) overwrites it. A subsumed entry whose value was unreadable is
// returned with its ID only.
func (s *EtcdStore) Add(ctx context.Context, cp checkpoint.Completed) ([]checkpoint.Completed, error) {
	subsumed, err := s.add(ctx, cp)
	if err != nil {
		return nil, fmt.Errorf("ha: checkpoint store %s: add checkpoint %d: %w", s.prefix, cp.ID, err)
	}
	return subsumed, nil
}

func (s *EtcdStore) add(ctx context.Context, cp checkpoint.Completed) ([]checkpoint.Completed, error) {
	val, err := EncodeCheckpoint(cp)
	if err != nil {
		return nil, err
	}
	key := s.keys.CompletedCheckpoint(s.jobID, cp.ID)
	ctx, cancel := s.cfg.bound(ctx)
	defer cancel()
	for {
		entries, rev, err := s.list(ctx)
		if err != nil {
			return nil, err
		}
		var kept []entry // checkpoints other than cp, oldest first
		for _, e := range entries {
			switch {
			case e.id == 0:
				s.cfg.Logger.Warn("ha: ignoring foreign key in checkpoint store", "key", e.key)
			case e.id > cp.ID:
				return nil, fmt.Errorf("older than stored checkpoint %d", e.id)
			case e.id < cp.ID:
				kept = append(kept, e)
			}
		}
		var drop []entry
		if n := len(kept) + 1 - s.retained; n > 0 {
			drop = kept[:n]
		}
		// Apply only if nothing changed in the store since it was read, and
		// every key dropped is still there to drop (so each subsumed
		// checkpoint is reported once).
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(s.prefix), "<", rev+1).WithPrefix()}
		ops := []clientv3.Op{clientv3.OpPut(key, string(val))}
		for _, e := range drop {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(e.key), "=", e.modRev))
			ops = append(ops, clientv3.OpDelete(e.key))
		}
		_, ok, err := fencedTxn(ctx, s.cfg.Client, s.fence, cmps, ops)
		if err != nil && !errors.Is(err, ErrNotLeader) {
			// A timeout or a broken connection says nothing about whether
			// etcd applied the transaction: cp may be stored and older
			// checkpoints dropped.
			return nil, fmt.Errorf("%w: %w", checkpoint.ErrOutcomeUnknown, err)
		}
		if err != nil {
			return nil, err
		}
		if !ok {
			continue // a concurrent writer of the same leader: read again
		}
		var subsumed []checkpoint.Completed
		for _, e := range drop {
			if e.err != nil {
				s.cfg.Logger.Warn("ha: subsumed an unreadable checkpoint entry", "key", e.key, "err", e.err)
				subsumed = append(subsumed, checkpoint.Completed{ID: e.id})
				continue
			}
			subsumed = append(subsumed, e.cp)
		}
		return subsumed, nil
	}
}

// Latest returns the newest completed checkpoint; an unreadable newest
// entry is an error (Recover skips it instead).
func (s *EtcdStore) Latest(ctx context.Context) (checkpoint.Completed, bool, error) {
	ctx, cancel := s.cfg.bound(ctx)
	defer cancel()
	resp, err := s.cfg.Client.Get(ctx, s.prefix, clientv3.WithLastKey()...)
	if err != nil {
		return checkpoint.Completed{}, false, fmt.Errorf("ha: checkpoint store %s: latest: %w", s.prefix, err)
	}
	if len(resp.Kvs) == 0 {
		return checkpoint.Completed{}, false, nil
	}
	e := s.decode(resp.Kvs[0])
	if e.err != nil {
		return checkpoint.Completed{}, false, fmt.Errorf("ha: checkpoint store: latest: %s: %w", e.key, e.err)
	}
	return e.cp, true, nil
}

// All returns the stored checkpoints, oldest first; any unreadable entry
// is an error (Recover skips them instead).
func (s *EtcdStore) All(ctx context.Context) ([]checkpoint.Completed, error) {
	ctx, cancel := s.cfg.bound(ctx)
	defer cancel()
	entries, _, err := s.list(ctx)
	if err != nil {
		return nil, fmt.Errorf("ha: checkpoint store %s: list: %w", s.prefix, err)
	}
	out := make([]checkpoint.Completed, 0, len(entries))
	for _, e := range entries {
		if e.err != nil {
			return nil, fmt.Errorf("ha: checkpoint store: list: %s: %w", e.key, e.err)
		}
		out = append(out, e.cp)
	}
	return out, nil
}

// Recover reads the store for a JobManager taking over the job: it returns
// the entries that decode and pass validate (nil validate accepts all),
// oldest first, so the last one is the checkpoint to restore; skipped
// entries are logged. A newest entry that fails is skipped in favour of
// the one before it. Nothing is deleted: skipped entries age out through
// Add like any other. See RecoverReport for the reasons as data.
func (s *EtcdStore) Recover(ctx context.Context, validate func(checkpoint.Completed) error) ([]checkpoint.Completed, error) {
	kept, skipped, err := s.RecoverReport(ctx, validate)
	for _, sk := range skipped {
		s.cfg.Logger.Warn("ha: skipping completed checkpoint", "key", sk.Key, "id", sk.ID, "err", sk.Err)
	}
	return kept, err
}

// RecoverReport is Recover, returning the skipped entries (oldest first)
// with their reasons instead of logging them.
func (s *EtcdStore) RecoverReport(ctx context.Context, validate func(checkpoint.Completed) error) (kept []checkpoint.Completed, skipped []SkippedCheckpoint, err error) {
	ctx, cancel := s.cfg.bound(ctx)
	defer cancel()
	entries, _, err := s.list(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("ha: checkpoint store %s: recover: %w", s.prefix, err)
	}
	for _, e := range entries {
		if e.err == nil && validate != nil {
			if verr := validate(e.cp); verr != nil {
				e.err = fmt.Errorf("invalid: %w", verr)
			}
		}
		if e.err != nil {
			skipped = append(skipped, SkippedCheckpoint{Key: e.key, ID: e.id, Err: e.err})
			continue
		}
		kept = append(kept, e.cp)
	}
	return kept, skipped, nil
}

// Shutdown ends the store. With discard (the job reached a globally
// terminal state) it deletes every key of the store in one fenced
// transaction and returns the removed checkpoints, oldest first, for the
// caller to discard; without, the keys stay for the next leader.
func (s *EtcdStore) Shutdown(ctx context.Context, discard bool) ([]checkpoint.Completed, error) {
	if !discard {
		return nil, nil
	}
	ctx, cancel := s.cfg.bound(ctx)
	defer cancel()
	resp, _, err := fencedTxn(ctx, s.cfg.Client, s.fence, nil, []clientv3.Op{
		clientv3.OpGet(s.prefix, clientv3.WithPrefix()),
		clientv3.OpDelete(s.prefix, clientv3.WithPrefix()),
	})
	if err != nil {
		return nil, fmt.Errorf("ha: checkpoint store %s: shutdown: %w", s.prefix, err)
	}
	var removed []checkpoint.Completed
	for _, kv := range resp.Responses[0].GetResponseRange().GetKvs() {
		e := s.decode(kv)
		if e.id == 0 {
			continue
		}
		if e.err != nil {
			removed = append(removed, checkpoint.Completed{ID: e.id})
			continue
		}
		removed = append(removed, e.cp)
	}
	return removed, nil // key order is ID order
}
