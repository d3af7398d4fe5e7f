package restapi

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// The cluster's configuration and single TaskManagers: Flink's GET
// /config, /jobmanager/config and /taskmanagers/{taskmanagerid}.

// refreshInterval is how often the web UI refreshes, in ms: Flink's
// web.refresh-interval default.
const refreshInterval = 3000

// configurer is implemented by a client API that can list its effective
// configuration (the JobManager does), for GET /jobmanager/config.
type configurer interface {
	Configuration() map[string]string
}

func (h *Handler) getDashboardConfig(w http.ResponseWriter, _ *http.Request) error {
	version, commit := buildInfo()
	// Flink names the zone in words ("Central European Time"); Go knows
	// its abbreviation only.
	zone, offset := h.now().Zone()
	h.writeJSON(w, http.StatusOK, dashboardConfiguration{
		RefreshInterval: refreshInterval, TimezoneName: zone, TimezoneOffset: int64(offset) * 1000,
		// The dashboard shows flink-version as the server's version; the
		// REST API version Weir follows is in /overview.
		FlinkVersion: version, FlinkRevision: commit,
		// Jobs are submitted with the weir CLI, not as jars; Weir keeps no
		// history server.
		Features: dashboardFeatures{WebSubmit: false, WebCancel: true, WebRescale: true, WebHistory: false},
	})
	return nil
}

func (h *Handler) getJobManagerConfig(w http.ResponseWriter, _ *http.Request) error {
	out := []configurationEntry{}
	if c, ok := h.api.(configurer); ok {
		for k, v := range c.Configuration() {
			out = append(out, configurationEntry{Key: k, Value: v})
		}
		sort.Slice(out, func(i, k int) bool { return out[i].Key < out[k].Key })
	}
	h.writeJSON(w, http.StatusOK, out)
	return nil
}

// getTaskManager answers Flink's TaskManagerDetailsInfo without its
// memory, hardware and allocated-slot sections, which Weir's TaskManagers
// do not report: the TaskManager's entry of GET /taskmanagers.
func (h *Handler) getTaskManager(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("taskmanagerid")
	resp, err := h.api.ListTaskManagers(r.Context(), &weirv1.ListTaskManagersRequest{})
	if err != nil {
		return fmt.Errorf("listing the TaskManagers: %w", err)
	}
	known := make([]string, 0, len(resp.GetTaskmanagers()))
	for _, tm := range resp.GetTaskmanagers() {
		if tm.GetId() == id {
			h.writeJSON(w, http.StatusOK, toTaskManagerInfo(tm))
			return nil
		}
		known = append(known, tm.GetId())
	}
	if len(known) == 0 {
		return errorf(http.StatusNotFound, "TaskManager %s not found: no TaskManager is registered", id)
	}
	sort.Strings(known)
	return errorf(http.StatusNotFound, "TaskManager %s not found (it never registered or its heartbeats timed out); registered TaskManagers: %s",
		id, strings.Join(known, ", "))
}

// taskManagerAddresses maps the registered TaskManagers' IDs to their
// addresses, Flink's endpoints.
func (h *Handler) taskManagerAddresses(ctx context.Context) (map[string]string, error) {
	resp, err := h.api.ListTaskManagers(ctx, &weirv1.ListTaskManagersRequest{})
	if err != nil {
		return nil, fmt.Errorf("listing the TaskManagers for their addresses: %w", err)
	}
	addrs := make(map[string]string, len(resp.GetTaskmanagers()))
	for _, tm := range resp.GetTaskmanagers() {
		addrs[tm.GetId()] = tm.GetAddress()
	}
	return addrs, nil
}
