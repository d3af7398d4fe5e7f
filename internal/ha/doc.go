// Package ha keeps the metadata a JobManager must not lose: the checkpoint
// ID counter and the completed-checkpoint store, the submitted job graphs,
// and who leads. The standalone implementations (StandaloneCounter,
// StandaloneStore) serve a single JobManager with no etcd (--ha none); the
// etcd ones (Elector, EtcdCounter, EtcdStore, EtcdJobStore) serve a
// cluster of JobManagers (see docs/high-availability.md).
//
// # Key layout
//
// Every key of a cluster lives under /weir/<cluster-id>/ (Keys builds
// them; cluster and job IDs contain no '/' or spaces):
//
//	/weir/<cluster>/leader/<lease-id-hex>            JSON LeaderInfo of one candidate JobManager,
//	                                                 attached to its session lease
//	/weir/<cluster>/jobs/<job-id>                    submitted job graph (bytes the caller marshalled)
//	/weir/<cluster>/job-status/<job-id>              the job's status record (bytes the caller marshalled:
//	                                                 JSON {"restarts","submitted_ms"} from the JobManager)
//	/weir/<cluster>/checkpoints/<job-id>/counter     last checkpoint ID issued, decimal ("0" never stored)
//	/weir/<cluster>/checkpoints/<job-id>/completed/<20-digit-id>
//	                                                 JSON {"id","metadata_path","dir"} of one retained
//	                                                 completed checkpoint (a pointer to its _metadata)
//
// The candidate with the lowest create revision under leader/ is the
// leader (the layout of go.etcd.io/etcd/client/v3/concurrency.Election, so
// `etcdctl elect --listen /weir/<cluster>/leader` follows it too). To look
// at a cluster:
//
//	etcdctl get --prefix /weir/<cluster>/
//	etcdctl get --prefix --sort-by=CREATE --limit=1 /weir/<cluster>/leader/   # the leader
//	etcdctl get --prefix /weir/<cluster>/checkpoints/<job-id>/completed/      # oldest first
//
// # Leadership and fencing
//
// Elector.Campaign grants a lease of Config.SessionTTL, keeps it alive in
// a concurrency.Session, puts the candidate key under the lease and waits
// until every candidate created before it is gone. The Leadership it
// returns lasts until one of:
//
//	leading ──Resign──────────────────────────────┐
//	   │  ──lease expired/revoked, etcd unreachable│
//	   │    for the TTL, client closed─────────────┼──► lost: Done() closed,
//	   │  ──leader key deleted (watch)─────────────┤    Err() wraps ErrNotLeader
//	   └──Elector.Close────────────────────────────┘
//
// Every write of a leader is a single etcd transaction whose first
// comparison is Fence.Cmp: CreateRevision(leaderKey) == leaderRev. A leader
// key, once deleted, never comes back with the same create revision, so a
// deposed leader that is still running (paused, partitioned, or not yet
// aware) cannot change anything: its writes fail with an error wrapping
// ErrNotLeader and it must step down. Reads are not fenced.
//
// # Timeouts and ambiguity
//
// Every operation is bounded by its context and by Config.RequestTimeout,
// so a missing etcd fails calls with a wrapped context error instead of
// hanging them. A write that fails that way may or may not have applied:
// EtcdCounter then at worst skips an ID (never reuses one), and
// EtcdStore.Add may be retried with the same checkpoint (it overwrites;
// checkpoints subsumed by the lost attempt are then not reported again).
package ha
