// Package kubeha keeps a cluster's high-availability metadata on the
// Kubernetes API server itself (--ha kubernetes), so that a Weir cluster on
// Kubernetes needs no etcd of its own: who leads in a coordination.k8s.io
// Lease, and the job graphs, checkpoint ID counters and completed-checkpoint
// stores in ConfigMaps. It offers what package ha offers on etcd, with the
// same guarantees.
//
// # Objects
//
// Every object lives in Config.Namespace, is labelled
// weir.dev/cluster=<cluster-id> and app.kubernetes.io/managed-by=weir, and
// is named after the cluster (Names builds the names):
//
//	Lease     weir-<cluster>-leader              the election: spec.holderIdentity is the leader's
//	                                             campaign, annotation weir.dev/leader its JSON
//	                                             ha.LeaderInfo, spec.leaseTransitions its term
//	ConfigMap weir-<cluster>-term                annotation weir.dev/term: the latest term elected,
//	                                             data.holder: its leadership
//	ConfigMap weir-<cluster>-job-<job>           binaryData.graph: the submitted JobGraph (proto);
//	                                             data.status: the job's status record (JSON)
//	ConfigMap weir-<cluster>-checkpoints-<job>   data.counter: last checkpoint ID issued (decimal);
//	                                             data.checkpoint-<20-digit-id>: JSON {"id",
//	                                             "metadata_path","dir"} of one retained checkpoint
//
// <job> is the job ID when it is a DNS label already, else a hash of it;
// annotation weir.dev/job-id always holds the ID itself. To look at a
// cluster:
//
//	kubectl get lease weir-<cluster>-leader -o yaml
//	kubectl get configmaps -l weir.dev/cluster=<cluster>
//
// # Leadership
//
// A candidate takes the Lease when it is free (no holder) or expired: its
// resourceVersion has not changed for spec.leaseDurationSeconds of the
// candidate's own clock, so clocks need not agree across machines. Taking
// it raises spec.leaseTransitions by one: that number is the leader's term.
// The leader renews the Lease every third of its duration; when it has not
// renewed for two thirds of it (the API server unreachable, the process
// paused) it steps down, before any candidate may take over. A candidate
// that took the Lease leads only once it has recorded its term in the
// term ConfigMap, which refuses a term not above the one it holds: a
// Lease deleted by hand is created anew above the highest term the
// cluster's objects carry, and this makes that the deleted Lease's term
// too, even when its leader had written nothing else yet.
//
// # Fencing
//
// Kubernetes has no transaction across objects, so writes are fenced by
// term: every ConfigMap carries annotation weir.dev/term, the term of the
// last leader that wrote it. A write is a compare-and-swap on the object's
// resourceVersion that refuses (ErrNotLeader) an object carrying a higher
// term than the writer's. A new leader claims each object before it reads
// it for recovery (it writes its term into it), so no write of an earlier
// leader lands after the new leader has read the object. An object created
// by a leader is checked against the Lease after its creation: if the term
// moved on meanwhile, the creator deletes it and fails, and otherwise every
// later leader finds it when it recovers.
package kubeha
