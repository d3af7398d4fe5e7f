package restapi

// JSON bodies, named after the Flink 1.15 REST classes they mirror. Field
// names and order follow Flink's; fields Flink does not have are marked
// "Weir addition". Flink serializes nulls, so nullable fields are pointers
// without omitempty unless Flink itself omits them (@JsonInclude NON_NULL).

// ErrorResponseBody.
type errorResponseBody struct {
	Errors []string `json:"errors"`
}

// TriggerResponse.
type triggerResponse struct {
	RequestID string `json:"request-id"`
}

// QueueStatus.
type queueStatus struct {
	ID string `json:"id"` // IN_PROGRESS or COMPLETED
}

// AsynchronousOperationResult. Operation is null while in progress.
type asynchronousOperationResult struct {
	Status    queueStatus `json:"status"`
	Operation any         `json:"operation"`
}

// SerializedThrowable as written by Flink's SerializedThrowableSerializer.
// "serialized-throwable" (a Java-serialized exception) has no Go
// equivalent and is left out.
type serializedThrowable struct {
	Class      string `json:"class"`
	StackTrace string `json:"stack-trace"`
}

// SavepointInfo (NON_NULL).
type savepointInfo struct {
	Location     string               `json:"location,omitempty"`
	FailureCause *serializedThrowable `json:"failure-cause,omitempty"`
}

// CheckpointInfo of the checkpoint trigger (NON_NULL).
type checkpointInfo struct {
	CheckpointID *int64               `json:"checkpointId,omitempty"`
	FailureCause *serializedThrowable `json:"failureCause,omitempty"`
}

// SavepointTriggerRequestBody.
type savepointTriggerRequest struct {
	TargetDirectory *string `json:"target-directory"`
	CancelJob       bool    `json:"cancel-job"`
	TriggerID       *string `json:"triggerId"`
	// FormatType is accepted for compatibility; Weir has one savepoint format.
	FormatType *string `json:"formatType"`
}

// SavepointDisposalRequest.
type savepointDisposalRequest struct {
	SavepointPath string `json:"savepoint-path"`
}

// AsynchronousOperationInfo: the result of an operation with no value.
type asynchronousOperationInfo struct {
	FailureCause *serializedThrowable `json:"failure-cause,omitempty"`
}

// StopWithSavepointRequestBody.
type stopWithSavepointRequest struct {
	TargetDirectory *string `json:"targetDirectory"`
	Drain           bool    `json:"drain"`
	TriggerID       *string `json:"triggerId"`
	FormatType      *string `json:"formatType"`
}

// CheckpointTriggerRequestBody.
type checkpointTriggerRequest struct {
	CheckpointType *string `json:"checkpointType"` // CONFIGURED, FULL or INCREMENTAL
	TriggerID      *string `json:"triggerId"`
}

// ClusterOverviewWithVersion.
type clusterOverview struct {
	TaskManagers   int    `json:"taskmanagers"`
	SlotsTotal     int    `json:"slots-total"`
	SlotsAvailable int    `json:"slots-available"`
	JobsRunning    int    `json:"jobs-running"`
	JobsFinished   int    `json:"jobs-finished"`
	JobsCancelled  int    `json:"jobs-cancelled"`
	JobsFailed     int    `json:"jobs-failed"`
	FlinkVersion   string `json:"flink-version"`
	FlinkCommit    string `json:"flink-commit"`
	// Weir addition: flink-version names the REST API Weir follows.
	WeirVersion string `json:"weir-version"`
}

// JobIdsWithStatusOverview.
type jobIDsWithStatusOverview struct {
	Jobs []jobIDWithStatus `json:"jobs"`
}

type jobIDWithStatus struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// MultipleJobsDetails.
type multipleJobsDetails struct {
	Jobs []jobDetails `json:"jobs"`
}

// JobDetails as written by its custom JSON serializer.
type jobDetails struct {
	JID              string         `json:"jid"`
	Name             string         `json:"name"`
	StartTime        int64          `json:"start-time"`
	EndTime          int64          `json:"end-time"`
	Duration         int64          `json:"duration"`
	LastModification int64          `json:"last-modification"`
	State            string         `json:"state"`
	Tasks            map[string]int `json:"tasks"`
}

// JobDetailsInfo.
type jobDetailsInfo struct {
	JID            string                `json:"jid"`
	Name           string                `json:"name"`
	IsStoppable    bool                  `json:"isStoppable"`
	State          string                `json:"state"`
	StartTime      int64                 `json:"start-time"`
	EndTime        int64                 `json:"end-time"`
	Duration       int64                 `json:"duration"`
	MaxParallelism int64                 `json:"maxParallelism"`
	Now            int64                 `json:"now"`
	Timestamps     map[string]int64      `json:"timestamps"`
	Vertices       []jobVertexDetailInfo `json:"vertices"`
	StatusCounts   map[string]int        `json:"status-counts"`
	Plan           jobPlan               `json:"plan"`
	// Weir addition: why the job failed. Flink only shows it under
	// /jobs/{id}/exceptions.
	FailureCause string `json:"failure_cause,omitempty"`
	// Weir addition: how often the job was restarted.
	Restarts int32 `json:"restarts"`
	// Weir addition: the SQL statement of a job `weir sql` submitted.
	SQL string `json:"sql,omitempty"`
}

// JobDetailsInfo.JobVertexDetailsInfo.
type jobVertexDetailInfo struct {
	ID             string         `json:"id"`
	Name           string         `json:"name"`
	MaxParallelism int            `json:"maxParallelism"`
	Parallelism    int            `json:"parallelism"`
	Status         string         `json:"status"`
	StartTime      int64          `json:"start-time"`
	EndTime        int64          `json:"end-time"`
	Duration       int64          `json:"duration"`
	Tasks          map[string]int `json:"tasks"`
	Metrics        ioMetricsInfo  `json:"metrics"`
}

// IOMetricsInfo: the records and times the vertex's subtasks reported with
// the TaskManagers' heartbeats (backpressure.go). Bytes are not measured:
// they stay 0 with read-bytes-complete and write-bytes-complete false,
// Flink's way of saying the numbers are incomplete.
type ioMetricsInfo struct {
	ReadBytes                    int64   `json:"read-bytes"`
	ReadBytesComplete            bool    `json:"read-bytes-complete"`
	WriteBytes                   int64   `json:"write-bytes"`
	WriteBytesComplete           bool    `json:"write-bytes-complete"`
	ReadRecords                  int64   `json:"read-records"`
	ReadRecordsComplete          bool    `json:"read-records-complete"`
	WriteRecords                 int64   `json:"write-records"`
	WriteRecordsComplete         bool    `json:"write-records-complete"`
	AccumulatedBackpressuredTime int64   `json:"accumulated-backpressured-time"`
	AccumulatedIdleTime          int64   `json:"accumulated-idle-time"`
	AccumulatedBusyTime          float64 `json:"accumulated-busy-time"`
	// Weir additions: the vertex's records per second over the last
	// heartbeat interval, summed over its subtasks (Flink has them only as
	// the numRecordsInPerSecond and numRecordsOutPerSecond metrics).
	ReadRecordsPerSecond  float64 `json:"read-records-per-second"`
	WriteRecordsPerSecond float64 `json:"write-records-per-second"`
}

// The JSON plan (JsonPlanGenerator).
type jobPlan struct {
	JID   string        `json:"jid"`
	Name  string        `json:"name"`
	Type  string        `json:"type"`
	Nodes []jobPlanNode `json:"nodes"`
}

type jobPlanNode struct {
	ID               string `json:"id"`
	Parallelism      int    `json:"parallelism"`
	Operator         string `json:"operator"`
	OperatorStrategy string `json:"operator_strategy"`
	Description      string `json:"description"`
	// ChangelogMode is a SQL vertex's: append-only or retract.
	ChangelogMode       string             `json:"changelog_mode,omitempty"`
	Inputs              []jobPlanNodeInput `json:"inputs,omitempty"`
	OptimizerProperties struct{}           `json:"optimizer_properties"`
}

type jobPlanNodeInput struct {
	Num          int    `json:"num"`
	ID           string `json:"id"`
	ShipStrategy string `json:"ship_strategy"`
	Exchange     string `json:"exchange"`
}

// TaskManagersInfo.
type taskManagersInfo struct {
	TaskManagers []taskManagerInfo `json:"taskmanagers"`
}

// TaskManagerInfo. Flink's resource, hardware and memory sections are left
// out: Weir's TaskManagers do not report them.
type taskManagerInfo struct {
	ID   string `json:"id"`
	Path string `json:"path"`
	// DataPort is the port of the TaskManager's gRPC server, which also
	// serves data exchange.
	DataPort int `json:"dataPort"`
	JmxPort  int `json:"jmxPort"`
	// TimeSinceLastHeartbeat is, as in Flink despite its name, the epoch
	// milliseconds of the last heartbeat.
	TimeSinceLastHeartbeat int64 `json:"timeSinceLastHeartbeat"`
	SlotsNumber            int32 `json:"slotsNumber"`
	FreeSlots              int32 `json:"freeSlots"`
	// Weir addition: the address serving the TaskManager's /metrics.
	HTTPAddress string `json:"httpAddress,omitempty"`
}

// CheckpointingStatistics.
type checkpointingStatistics struct {
	Counts  checkpointCounts     `json:"counts"`
	Summary checkpointingSummary `json:"summary"`
	Latest  latestCheckpoints    `json:"latest"`
	History []any                `json:"history"`
	// Weir addition: when the next checkpoint is due and what holds it back.
	NextCheckpoint *nextCheckpoint `json:"next_checkpoint,omitempty"`
}

// nextCheckpoint is a Weir addition to CheckpointingStatistics: the
// scheduler's answer to "why is the next checkpoint not happening yet".
type nextCheckpoint struct {
	State        string `json:"state"`  // SCHEDULED | DELAYED | NOT_SCHEDULED
	Reason       string `json:"reason"` // "" | MIN_PAUSE | MAX_CONCURRENT | TASKS_NOT_RUNNING | QUEUED | STOPPED | PERIODIC_OFF
	Message      string `json:"message"`
	DueTimestamp int64  `json:"due_timestamp"` // unix ms, 0 when it waits for an event
	Queued       int32  `json:"queued"`
}

// CheckpointingStatistics.Counts.
type checkpointCounts struct {
	Restored   int64 `json:"restored"`
	Total      int64 `json:"total"`
	InProgress int64 `json:"in_progress"`
	Completed  int64 `json:"completed"`
	Failed     int64 `json:"failed"`
}

// CheckpointingStatistics.Summary (Flink 1.15).
type checkpointingSummary struct {
	CheckpointedSize  statsSummary `json:"checkpointed_size"`
	StateSize         statsSummary `json:"state_size"`
	EndToEndDuration  statsSummary `json:"end_to_end_duration"`
	AlignmentBuffered statsSummary `json:"alignment_buffered"`
	ProcessedData     statsSummary `json:"processed_data"`
	PersistedData     statsSummary `json:"persisted_data"`
}

// StatsSummaryDto.
type statsSummary struct {
	Min  int64   `json:"min"`
	Max  int64   `json:"max"`
	Avg  int64   `json:"avg"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
}

// CheckpointingStatistics.LatestCheckpoints.
type latestCheckpoints struct {
	Completed *completedCheckpointStatistics `json:"completed"`
	Savepoint *completedCheckpointStatistics `json:"savepoint"`
	Failed    *failedCheckpointStatistics    `json:"failed"`
	Restored  *restoredCheckpointStatistics  `json:"restored"`
}

// CheckpointingStatistics.RestoredCheckpointStatistics.
type restoredCheckpointStatistics struct {
	ID               int64   `json:"id"`
	RestoreTimestamp int64   `json:"restore_timestamp"`
	IsSavepoint      bool    `json:"is_savepoint"`
	ExternalPath     *string `json:"external_path"`
}

// The "className" discriminator values of CheckpointStatistics and
// SubtaskCheckpointStatistics (Flink's @JsonSubTypes names).
const (
	classCompleted  = "completed"
	classFailed     = "failed"
	classInProgress = "in_progress"
	classPending    = "pending"
)

// CheckpointStatistics: the fields every subtype shares.
type checkpointStatistics struct {
	ClassName               string                              `json:"className"`
	ID                      int64                               `json:"id"`
	Status                  string                              `json:"status"`
	IsSavepoint             bool                                `json:"is_savepoint"`
	SavepointFormat         *string                             `json:"savepointFormat"`
	TriggerTimestamp        int64                               `json:"trigger_timestamp"`
	LatestAckTimestamp      int64                               `json:"latest_ack_timestamp"`
	CheckpointedSize        int64                               `json:"checkpointed_size"`
	StateSize               int64                               `json:"state_size"`
	EndToEndDuration        int64                               `json:"end_to_end_duration"`
	AlignmentBuffered       int64                               `json:"alignment_buffered"`
	ProcessedData           int64                               `json:"processed_data"`
	PersistedData           int64                               `json:"persisted_data"`
	NumSubtasks             int32                               `json:"num_subtasks"`
	NumAcknowledgedSubtasks int32                               `json:"num_acknowledged_subtasks"`
	CheckpointType          string                              `json:"checkpoint_type"`
	Tasks                   map[string]taskCheckpointStatistics `json:"tasks"`
}

// CheckpointStatistics.CompletedCheckpointStatistics.
type completedCheckpointStatistics struct {
	checkpointStatistics
	ExternalPath *string `json:"external_path"`
	Discarded    bool    `json:"discarded"`
}

// CheckpointStatistics.FailedCheckpointStatistics.
type failedCheckpointStatistics struct {
	checkpointStatistics
	FailureTimestamp int64   `json:"failure_timestamp"`
	FailureMessage   *string `json:"failure_message"`
	// Weir addition: the reason code (Flink's CheckpointFailureReason).
	FailureReason string `json:"failure_reason,omitempty"`
	// Weir addition: the subtasks that declined the checkpoint, present
	// when the core reports them.
	DeclinedSubtasks []subtaskRef `json:"declined_subtasks,omitempty"`
	// Weir addition: the subtasks that had not acknowledged when the
	// checkpoint failed, present when the core reports them.
	PendingSubtasks []subtaskRef `json:"pending_subtasks,omitempty"`
}

// CheckpointStatistics.PendingCheckpointStatistics.
type pendingCheckpointStatistics struct {
	checkpointStatistics
	// Weir addition: the subtasks that have not acknowledged yet, present
	// when the core reports them.
	PendingSubtasks []subtaskRef `json:"pending_subtasks,omitempty"`
}

// subtaskRef names one subtask (Weir addition).
type subtaskRef struct {
	VertexID string `json:"vertex_id"`
	Vertex   string `json:"vertex"`
	Subtask  int32  `json:"subtask"`
	// DeclineMessage is the subtask's reason, for a declined one.
	DeclineMessage string `json:"decline_message,omitempty"`
	checkpointPhase
}

// TaskCheckpointStatistics.
type taskCheckpointStatistics struct {
	ID                      int64  `json:"id"`
	Status                  string `json:"status"`
	LatestAckTimestamp      int64  `json:"latest_ack_timestamp"`
	CheckpointedSize        int64  `json:"checkpointed_size"`
	StateSize               int64  `json:"state_size"`
	EndToEndDuration        int64  `json:"end_to_end_duration"`
	AlignmentBuffered       int64  `json:"alignment_buffered"`
	ProcessedData           int64  `json:"processed_data"`
	PersistedData           int64  `json:"persisted_data"`
	NumSubtasks             int32  `json:"num_subtasks"`
	NumAcknowledgedSubtasks int32  `json:"num_acknowledged_subtasks"`
	// Weir addition: the vertex name, so the 32-hex key needs no lookup.
	Name string `json:"name"`
}

// TaskCheckpointStatisticsWithSubtaskDetails.
type taskCheckpointStatisticsWithSubtaskDetails struct {
	taskCheckpointStatistics
	Summary  taskCheckpointSummary `json:"summary"`
	Subtasks []any                 `json:"subtasks"`
}

// TaskCheckpointStatisticsWithSubtaskDetails.Summary.
type taskCheckpointSummary struct {
	CheckpointedSize   statsSummary              `json:"checkpointed_size"`
	StateSize          statsSummary              `json:"state_size"`
	EndToEndDuration   statsSummary              `json:"end_to_end_duration"`
	CheckpointDuration checkpointDurationSummary `json:"checkpoint_duration"`
	Alignment          checkpointAlignSummary    `json:"alignment"`
	StartDelay         statsSummary              `json:"start_delay"`
}

type checkpointDurationSummary struct {
	Sync  statsSummary `json:"sync"`
	Async statsSummary `json:"async"`
}

type checkpointAlignSummary struct {
	Buffered  statsSummary `json:"buffered"`
	Processed statsSummary `json:"processed"`
	Persisted statsSummary `json:"persisted"`
	Duration  statsSummary `json:"duration"`
}

// SubtaskCheckpointStatistics.CompletedSubtaskCheckpointStatistics.
type completedSubtaskCheckpointStatistics struct {
	ClassName           string              `json:"className"`
	Index               int32               `json:"index"`
	Status              string              `json:"status"`
	AckTimestamp        int64               `json:"ack_timestamp"`
	EndToEndDuration    int64               `json:"end_to_end_duration"`
	CheckpointedSize    int64               `json:"checkpointed_size"`
	StateSize           int64               `json:"state_size"`
	Checkpoint          checkpointDuration  `json:"checkpoint"`
	Alignment           checkpointAlignment `json:"alignment"`
	StartDelay          int64               `json:"start_delay"`
	UnalignedCheckpoint bool                `json:"unaligned_checkpoint"`
	Aborted             bool                `json:"aborted"`
}

type checkpointDuration struct {
	Sync  int64 `json:"sync"`
	Async int64 `json:"async"`
}

type checkpointAlignment struct {
	Buffered  int64 `json:"buffered"`
	Processed int64 `json:"processed"`
	Persisted int64 `json:"persisted"`
	Duration  int64 `json:"duration"`
}

// SubtaskCheckpointStatistics.PendingSubtaskCheckpointStatistics.
type pendingSubtaskCheckpointStatistics struct {
	ClassName string `json:"className"`
	Index     int32  `json:"index"`
	Status    string `json:"status"` // "pending_or_failed", as in Flink
	checkpointPhase
}

// checkpointPhase is how far a subtask that has not acknowledged got with
// a checkpoint, as its TaskManager last reported it (Weir addition):
// WAITING (no barrier reached it yet, or nothing reported), ALIGNING (with
// barriers_received of channels), SNAPSHOTTING, UPLOADING or DECLINED.
type checkpointPhase struct {
	Phase            string `json:"phase"`
	BarriersReceived *int32 `json:"barriers_received,omitempty"`
	Channels         *int32 `json:"channels,omitempty"`
	// PhaseTimestamp is when it was reported (unix ms), 0 if never.
	PhaseTimestamp int64 `json:"phase_timestamp"`
}

// CheckpointConfigInfo.
type checkpointConfigInfo struct {
	Mode                        string                     `json:"mode"`
	Interval                    int64                      `json:"interval"`
	Timeout                     int64                      `json:"timeout"`
	MinPause                    int64                      `json:"min_pause"`
	MaxConcurrent               int64                      `json:"max_concurrent"`
	Externalization             externalizedCheckpointInfo `json:"externalization"`
	StateBackend                string                     `json:"state_backend"`
	CheckpointStorage           string                     `json:"checkpoint_storage"`
	UnalignedCheckpoints        bool                       `json:"unaligned_checkpoints"`
	TolerableFailedCheckpoints  int32                      `json:"tolerable_failed_checkpoints"`
	AlignedCheckpointTimeout    int64                      `json:"aligned_checkpoint_timeout"`
	CheckpointsAfterTasksFinish bool                       `json:"checkpoints_after_tasks_finish"`
	// Weir addition: whether checkpoints are taken periodically. Flink
	// reports a disabled interval as Long.MAX_VALUE, which is easy to
	// misread; interval keeps that value for compatibility.
	PeriodicCheckpoints bool `json:"periodic_checkpoints"`
	// Weir addition: how many completed checkpoints are retained.
	RetainedCheckpoints int32 `json:"retained_checkpoints"`
	// Weir addition: whether the state backend checkpoints incrementally.
	Incremental bool `json:"incremental"`
}

// ExternalizedCheckpointInfo.
type externalizedCheckpointInfo struct {
	Enabled              bool `json:"enabled"`
	DeleteOnCancellation bool `json:"delete_on_cancellation"`
}

// JobExceptionsInfoWithHistory. root-exception, timestamp, all-exceptions
// and truncated are Flink's deprecated JobExceptionsInfo, which Flink still
// writes; exceptionHistory replaced them.
type jobExceptionsInfo struct {
	RootException    *string                  `json:"root-exception"`
	Timestamp        *int64                   `json:"timestamp"`
	AllExceptions    []executionExceptionInfo `json:"all-exceptions"`
	Truncated        bool                     `json:"truncated"`
	ExceptionHistory jobExceptionHistory      `json:"exceptionHistory"`
}

// JobExceptionsInfo.ExecutionExceptionInfo: a failure of a current
// execution attempt. location is Flink 1.15's name of what later versions
// call endpoint; both are written, so clients of either work.
type executionExceptionInfo struct {
	Exception     string `json:"exception"`
	Task          string `json:"task"`
	Location      string `json:"location"`
	Endpoint      string `json:"endpoint"`
	Timestamp     int64  `json:"timestamp"`
	TaskManagerID string `json:"taskManagerId"`
}

// JobExceptionsInfoWithHistory.JobExceptionHistory.
type jobExceptionHistory struct {
	Entries   []rootExceptionInfo `json:"entries"`
	Truncated bool                `json:"truncated"`
}

// JobExceptionsInfoWithHistory.ExceptionInfo. Weir reports a failure's
// cause as text, without an exception class or a stack trace.
type exceptionInfo struct {
	ExceptionName string `json:"exceptionName"`
	Stacktrace    string `json:"stacktrace"`
	Timestamp     int64  `json:"timestamp"`
	// TaskName, Location, Endpoint and TaskManagerID are empty for a
	// failure of the job as a whole, where Flink leaves them out.
	TaskName string `json:"taskName"`
	// Location is Flink 1.15's name of Endpoint; both are written.
	Location      string            `json:"location"`
	Endpoint      string            `json:"endpoint"`
	TaskManagerID string            `json:"taskManagerId"`
	FailureLabels map[string]string `json:"failureLabels"`
}

// JobExceptionsInfoWithHistory.RootExceptionInfo.
type rootExceptionInfo struct {
	exceptionInfo
	// ConcurrentExceptions stays empty: Weir records each failure on its
	// own.
	ConcurrentExceptions []exceptionInfo `json:"concurrentExceptions"`
	// Weir addition: the pipelined regions the failure restarted, empty
	// when it restarted none.
	Regions []int32 `json:"regions"`
	// Weir addition: the failure restarted the whole job.
	FullRestart bool `json:"full-restart"`
}

// JobVertexDetailsInfo.
type jobVertexDetailsInfo struct {
	ID             string                               `json:"id"`
	Name           string                               `json:"name"`
	Parallelism    int                                  `json:"parallelism"`
	MaxParallelism int                                  `json:"maxParallelism"`
	Now            int64                                `json:"now"`
	Subtasks       []subtaskExecutionAttemptDetailsInfo `json:"subtasks"`
}

// SubtaskExecutionAttemptDetailsInfo. status-duration is left out: Weir
// keeps no per-state times of an attempt.
type subtaskExecutionAttemptDetailsInfo struct {
	Subtask int32  `json:"subtask"`
	Status  string `json:"status"`
	Attempt int32  `json:"attempt"`
	// Host is Flink 1.15's field, the TaskManager's host; later versions
	// replaced it by Endpoint, host and port. Both are written.
	Host          string        `json:"host"`
	Endpoint      string        `json:"endpoint"`
	StartTime     int64         `json:"start-time"`
	EndTime       int64         `json:"end-time"`
	Duration      int64         `json:"duration"`
	Metrics       ioMetricsInfo `json:"metrics"`
	TaskManagerID string        `json:"taskmanager-id"`
	// Weir addition: the pipelined region the subtask belongs to, the set
	// of subtasks that fail over together.
	Region int32 `json:"region"`
}

// JobPlanInfo.
type jobPlanInfo struct {
	Plan jobPlan `json:"plan"`
}

// JobConfigInfo. execution-config is left out when the job's graph is not
// known, as Flink leaves it out for a job without an ExecutionConfig.
type jobConfigInfo struct {
	JID             string               `json:"jid"`
	Name            string               `json:"name"`
	ExecutionConfig *executionConfigInfo `json:"execution-config,omitempty"`
}

// JobConfigInfo.ExecutionConfigInfo.
type executionConfigInfo struct {
	// ExecutionMode is always PIPELINED: Weir streams, it has no batch
	// exchanges.
	ExecutionMode   string `json:"execution-mode"`
	RestartStrategy string `json:"restart-strategy"`
	// JobParallelism is the largest vertex parallelism: Weir has no
	// job-wide default parallelism, Flink's value here.
	JobParallelism int `json:"job-parallelism"`
	// ObjectReuseMode is false: Weir has no object reuse to switch on.
	ObjectReuseMode bool `json:"object-reuse-mode"`
	// UserConfig is empty: Weir's jobs have no global job parameters.
	UserConfig map[string]string `json:"user-config"`
}

// DashboardConfiguration.
type dashboardConfiguration struct {
	RefreshInterval int64             `json:"refresh-interval"`
	TimezoneName    string            `json:"timezone-name"`
	TimezoneOffset  int64             `json:"timezone-offset"`
	FlinkVersion    string            `json:"flink-version"`
	FlinkRevision   string            `json:"flink-revision"`
	Features        dashboardFeatures `json:"features"`
}

// DashboardConfiguration.Features: what the web UI offers.
type dashboardFeatures struct {
	WebSubmit  bool `json:"web-submit"`
	WebCancel  bool `json:"web-cancel"`
	WebRescale bool `json:"web-rescale"`
	WebHistory bool `json:"web-history"`
}

// ClusterConfigurationInfoEntry.
type configurationEntry struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// JobResourceRequirementsBody: the requirements by vertex REST ID.
type jobResourceRequirements map[string]jobVertexResourceRequirements

// JobVertexResourceRequirements.
type jobVertexResourceRequirements struct {
	Parallelism *parallelismBounds `json:"parallelism"`
}

// JobVertexResourceRequirements.Parallelism.
type parallelismBounds struct {
	LowerBound int32 `json:"lowerBound"`
	UpperBound int32 `json:"upperBound"`
}

// checkpointConfigPatch is the body of PATCH
// /jobs/{jobid}/checkpoints/config, a Weir addition: Flink cannot change a
// running job's checkpointing. Milliseconds, each optional; an interval of
// 0 turns periodic checkpoints off. The names are those of Flink's
// execution.checkpointing.* keys.
type checkpointConfigPatch struct {
	Interval              *int64 `json:"interval"`
	Timeout               *int64 `json:"timeout"`
	MinPause              *int64 `json:"min-pause"`
	IntervalDuringBacklog *int64 `json:"interval-during-backlog"`
}
