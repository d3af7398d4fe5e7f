package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// UpgradeMode is how a running job moves to a changed spec.
// +kubebuilder:validation:Enum=stateless;last-state;savepoint
type UpgradeMode string

const (
	// UpgradeStateless cancels the job and starts the new one empty.
	UpgradeStateless UpgradeMode = "stateless"
	// UpgradeLastState cancels the job, keeping its checkpoints, and
	// starts the new one from the latest completed checkpoint: no
	// savepoint to wait for, so the fastest upgrade that keeps state.
	UpgradeLastState UpgradeMode = "last-state"
	// UpgradeSavepoint stops the job with a savepoint and starts the new
	// one from it.
	UpgradeSavepoint UpgradeMode = "savepoint"
)

// ClusterSpec is what a cluster of JobManagers and TaskManagers runs with.
type ClusterSpec struct {
	// Image holds the jobmanager and taskmanager programs (and a Go
	// program's own, see JobSource.Program).
	// +kubebuilder:validation:MinLength=1
	Image string `json:"image"`
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
	// +optional
	JobManager JobManagerSpec `json:"jobManager,omitempty"`
	// +optional
	TaskManager TaskManagerSpec `json:"taskManager,omitempty"`
	// CheckpointStorage is the JobManager's --checkpoint-dir: an s3://
	// location, or a path every pod shares (a volume of Volumes).
	// +kubebuilder:default="/var/lib/weir/checkpoints"
	// +optional
	CheckpointStorage string `json:"checkpointStorage,omitempty"`
	// Env is added to every JobManager and TaskManager container (S3
	// credentials, WEIR_* flags).
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`
	// Volumes and VolumeMounts are added to every pod and container
	// (a shared volume for checkpoints that are not on S3).
	// +optional
	Volumes []corev1.Volume `json:"volumes,omitempty"`
	// +optional
	VolumeMounts []corev1.VolumeMount `json:"volumeMounts,omitempty"`
	// TLS turns mutual TLS between the daemons on or off; on when unset.
	// The operator issues the certificates into a Secret.
	// +optional
	TLS *TLSSpec `json:"tls,omitempty"`
}

// TLSSpec configures mutual TLS.
type TLSSpec struct {
	Enabled bool `json:"enabled"`
}

// JobManagerSpec sizes the JobManagers.
type JobManagerSpec struct {
	// Replicas: one leads, the others stand by (high availability on
	// the API server either way).
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
}

// TaskManagerSpec sizes the TaskManagers.
type TaskManagerSpec struct {
	// Replicas is the number of TaskManagers; by default as many as the
	// job's parallelism needs with Slots each.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// Slots per TaskManager.
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=1
	// +optional
	Slots int32 `json:"slots,omitempty"`
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
}

// JobSource is the job itself.
type JobSource struct {
	// Spec is the job as a YAML job spec, what `weir job submit -f`
	// takes (for a Go program: what its `plan` command prints).
	// +kubebuilder:validation:MinLength=1
	Spec string `json:"spec"`
	// Program, when set, runs the job's operators from a Go program in
	// the image: TaskManagers run Command followed by `taskmanager`
	// and their flags.
	// +optional
	Program *ProgramSpec `json:"program,omitempty"`
}

// ProgramSpec is a Go program built with the Go API.
type ProgramSpec struct {
	// +kubebuilder:validation:MinItems=1
	Command []string `json:"command"`
}

// CheckpointingSpec overrides the job spec's checkpointing.
type CheckpointingSpec struct {
	// Interval between checkpoints, e.g. 10s.
	// +optional
	Interval *metav1.Duration `json:"interval,omitempty"`
	// Mode: exactly-once or at-least-once.
	// +kubebuilder:validation:Enum=exactly-once;at-least-once
	// +optional
	Mode string `json:"mode,omitempty"`
}

// RollbackSpec says when an upgrade is rolled back.
type RollbackSpec struct {
	// Enabled rolls back an upgrade whose job does not reach RUNNING
	// within Timeout to the last spec that did, from the state the
	// upgrade started with.
	// +kubebuilder:default=true
	Enabled bool `json:"enabled"`
	// +kubebuilder:default="2m"
	// +optional
	Timeout metav1.Duration `json:"timeout,omitempty"`
}

// WeirJobSpec is the desired state of a WeirJob.
type WeirJobSpec struct {
	// ClusterRef names a WeirCluster in this namespace to run the job on
	// (a session cluster). Unset, the job gets a cluster of its own, made
	// from Cluster, which is then required.
	// +optional
	ClusterRef string `json:"clusterRef,omitempty"`
	// Cluster is the job's own cluster (application mode).
	// +optional
	Cluster *ClusterSpec `json:"cluster,omitempty"`
	Job     JobSource    `json:"job"`
	// Parallelism, when set, replaces every vertex's parallelism.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Parallelism *int32 `json:"parallelism,omitempty"`
	// +optional
	Checkpointing *CheckpointingSpec `json:"checkpointing,omitempty"`
	// UpgradeMode is how a running job moves to a changed spec, and how
	// it suspends.
	// +kubebuilder:default=savepoint
	// +optional
	UpgradeMode UpgradeMode `json:"upgradeMode,omitempty"`
	// Suspend stops the job (by UpgradeMode) and scales its own
	// TaskManagers to zero; unset again, it resumes from where it
	// stopped.
	// +optional
	Suspend bool `json:"suspend,omitempty"`
	// SavepointTriggerNonce: changing it to any other value takes a
	// savepoint of the running job.
	// +optional
	SavepointTriggerNonce int64 `json:"savepointTriggerNonce,omitempty"`
	// InitialSavepointPath is where the job's first run starts from.
	// +optional
	InitialSavepointPath string `json:"initialSavepointPath,omitempty"`
	// +optional
	Rollback *RollbackSpec `json:"rollback,omitempty"`
}

// Lifecycle states of a WeirJob.
const (
	StateCreated     = "CREATED"
	StateDeploying   = "DEPLOYING"
	StateRunning     = "RUNNING"
	StateUpgrading   = "UPGRADING"
	StateSuspended   = "SUSPENDED"
	StateRollingBack = "ROLLING_BACK"
	StateRolledBack  = "ROLLED_BACK"
	StateFailed      = "FAILED"
	StateFinished    = "FINISHED"
)

// SavepointInfo is one savepoint (or, for last-state, the checkpoint) the
// operator restored from or took.
type SavepointInfo struct {
	Path string `json:"path"`
	// Reason: upgrade, suspend, manual, rollback, initial.
	Reason string      `json:"reason"`
	Time   metav1.Time `json:"time"`
	// Checkpoint marks a retained checkpoint rather than a savepoint.
	// +optional
	Checkpoint bool `json:"checkpoint,omitempty"`
}

// CheckpointInfo is the job's latest completed checkpoint.
type CheckpointInfo struct {
	ID   int64  `json:"id"`
	Path string `json:"path,omitempty"`
}

// UpgradeStatus is an upgrade (or a suspension, a rollback) in progress.
type UpgradeStatus struct {
	// Phase: Stopping, Starting, Verifying.
	Phase string `json:"phase"`
	// Target is the generation being deployed.
	Target int64 `json:"target"`
	// Spec is the target's spec (JSON), fixed when the upgrade starts or
	// is retargeted before its old job stopped: a submission retried
	// after a lost status write submits what the first one did, whatever
	// the resource's spec became since.
	// +optional
	Spec string `json:"spec,omitempty"`
	// RestorePath is the savepoint or checkpoint the new job starts from
	// ("" for a stateless one).
	// +optional
	RestorePath string `json:"restorePath,omitempty"`
	// Rollback marks a rollback to the last stable spec.
	// +optional
	Rollback bool `json:"rollback,omitempty"`
	// Refused: the JobManager refused the step's submission for good (the
	// spec does not make a valid job, its state is unreadable, a claim is
	// held). Nothing runs: a newer spec or a suspension replaces it.
	// +optional
	Refused bool `json:"refused,omitempty"`
	// Reason: initial, upgrade, resume, rollback, recover.
	// +optional
	Reason string `json:"reason,omitempty"`
	// StartedAt is when the phase began: for Verifying, when the new
	// job was submitted; for Stopping, when the stop was first asked
	// (a savepoint waits that long at most for the job to run).
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
}

// WeirJobStatus is the observed state of a WeirJob.
type WeirJobStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// LifecycleState: CREATED, DEPLOYING, RUNNING, UPGRADING, SUSPENDED,
	// ROLLING_BACK, ROLLED_BACK, FAILED or FINISHED.
	// +optional
	LifecycleState string `json:"lifecycleState,omitempty"`
	// JobID of the job the JobManager runs for this resource.
	// +optional
	JobID string `json:"jobId,omitempty"`
	// JobState as the JobManager reports it.
	// +optional
	JobState string `json:"jobState,omitempty"`
	// DeployedGeneration is the generation of the spec the job runs, and
	// DeployedSpecHash a hash of what in it the job depends on (a change
	// of the nonce, suspend or rollback settings needs no upgrade).
	// +optional
	DeployedGeneration int64 `json:"deployedGeneration,omitempty"`
	// +optional
	DeployedSpecHash string `json:"deployedSpecHash,omitempty"`
	// FailedGeneration is a generation whose upgrade was rolled back: it
	// is not tried again until the spec changes.
	// +optional
	FailedGeneration int64 `json:"failedGeneration,omitempty"`
	// FailedSpecHash is the hash of that generation's spec: a later
	// generation with the same spec (a nonce, a suspension's toggle) does
	// not retry it either.
	// +optional
	FailedSpecHash string `json:"failedSpecHash,omitempty"`
	// StableGeneration is the last generation whose job reached
	// RUNNING, and StableSpec that spec (JSON): what a rollback returns
	// to.
	// +optional
	StableGeneration int64 `json:"stableGeneration,omitempty"`
	// +optional
	StableSpec string `json:"stableSpec,omitempty"`
	// +optional
	Upgrade *UpgradeStatus `json:"upgrade,omitempty"`
	// ResumeFrom is where a suspended job resumes from.
	// +optional
	ResumeFrom string `json:"resumeFrom,omitempty"`
	// +optional
	LastSavepoint *SavepointInfo `json:"lastSavepoint,omitempty"`
	// Savepoints are the latest savepoints, newest last (at most 10).
	// +optional
	Savepoints []SavepointInfo `json:"savepoints,omitempty"`
	// +optional
	LastCheckpoint *CheckpointInfo `json:"lastCheckpoint,omitempty"`
	// Submissions counts the jobs submitted for this resource; with the
	// upgrade it makes each job's ID.
	// +optional
	Submissions int64 `json:"submissions,omitempty"`
	// SavepointTriggerNonce is the nonce last acted on.
	// +optional
	SavepointTriggerNonce int64 `json:"savepointTriggerNonce,omitempty"`
	// Error is the latest error, "" once resolved.
	// +optional
	Error string `json:"error,omitempty"`
	// Conditions: Ready (the job runs the current spec), Upgrading.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// WeirJob is a Weir job run by the operator.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=wj
// +kubebuilder:printcolumn:name="Job",type=string,JSONPath=`.status.jobId`
// +kubebuilder:printcolumn:name="Lifecycle",type=string,JSONPath=`.status.lifecycleState`
// +kubebuilder:printcolumn:name="Job state",type=string,JSONPath=`.status.jobState`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type WeirJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WeirJobSpec   `json:"spec,omitempty"`
	Status WeirJobStatus `json:"status,omitempty"`
}

// WeirJobList is a list of WeirJobs.
//
// +kubebuilder:object:root=true
type WeirJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WeirJob `json:"items"`
}

// WeirClusterStatus is the observed state of a WeirCluster.
type WeirClusterStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Ready: the JobManager answers.
	// +optional
	Ready bool `json:"ready,omitempty"`
	// JobManager is the Service address the cluster's clients use.
	// +optional
	JobManager string `json:"jobManager,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// WeirCluster is a session cluster: JobManagers and TaskManagers that run
// the jobs of the WeirJobs naming it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=wc
// +kubebuilder:printcolumn:name="Ready",type=boolean,JSONPath=`.status.ready`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type WeirCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ClusterSpec       `json:"spec,omitempty"`
	Status WeirClusterStatus `json:"status,omitempty"`
}

// WeirClusterList is a list of WeirClusters.
//
// +kubebuilder:object:root=true
type WeirClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WeirCluster `json:"items"`
}
