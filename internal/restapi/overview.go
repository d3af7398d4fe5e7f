package restapi

import (
	"net/http"
	"runtime/debug"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// ---------------------------------------------------------------------------
// Cluster

func buildInfo() (version, commit string) {
	version, commit = "unknown", "unknown"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return version, commit
	}
	if bi.Main.Version != "" {
		version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			commit = s.Value
		}
	}
	return version, commit
}

func (h *Handler) getOverview(w http.ResponseWriter, r *http.Request) error {
	tms, err := h.api.ListTaskManagers(r.Context(), &weirv1.ListTaskManagersRequest{})
	if err != nil {
		return err
	}
	jobs, err := h.api.ListJobs(r.Context(), &weirv1.ListJobsRequest{})
	if err != nil {
		return err
	}
	version, commit := buildInfo()
	out := clusterOverview{FlinkVersion: flinkVersion, FlinkCommit: commit, WeirVersion: version}
	for _, tm := range tms.GetTaskmanagers() {
		out.TaskManagers++
		out.SlotsTotal += int(tm.GetSlots())
		out.SlotsAvailable += int(tm.GetFreeSlots())
	}
	for _, j := range jobs.GetJobs() {
		switch j.GetState() {
		case weirv1.JobState_JOB_STATE_FINISHED:
			out.JobsFinished++
		case weirv1.JobState_JOB_STATE_CANCELED:
			out.JobsCancelled++
		case weirv1.JobState_JOB_STATE_FAILED:
			out.JobsFailed++
		default: // Flink counts every job that is not globally terminal
			out.JobsRunning++
		}
	}
	h.writeJSON(w, http.StatusOK, out)
	return nil
}

func (h *Handler) getTaskManagers(w http.ResponseWriter, r *http.Request) error {
	resp, err := h.api.ListTaskManagers(r.Context(), &weirv1.ListTaskManagersRequest{})
	if err != nil {
		return err
	}
	out := taskManagersInfo{TaskManagers: []taskManagerInfo{}}
	for _, tm := range resp.GetTaskmanagers() {
		out.TaskManagers = append(out.TaskManagers, toTaskManagerInfo(tm))
	}
	h.writeJSON(w, http.StatusOK, out)
	return nil
}
