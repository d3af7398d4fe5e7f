package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/weirproject/weir/internal/compose"
)

// Services of the compose cluster. The CLI runs inside cliService, which
// no fault touches, so the tool can always ask the cluster what it sees.
var (
	etcds        = []string{"etcd-1", "etcd-2", "etcd-3"}
	jobManagers  = []string{"jobmanager-1", "jobmanager-2"}
	faultedTMs   = []string{"taskmanager-1", "taskmanager-2"}
	taskManagers = append(append([]string{}, faultedTMs...), cliService)
)

const cliService = compose.CLIService

// cluster drives one compose project: deploy/docker-compose.yml with the
// fault overlay deploy/faults/docker-compose.yml.
type cluster struct {
	*compose.Project
	log *slog.Logger
}

func newCluster(log *slog.Logger, root, project string) *cluster {
	return &cluster{log: log, Project: compose.New(root, project,
		filepath.Join("deploy", "docker-compose.yml"), filepath.Join("deploy", "faults", "docker-compose.yml"))}
}

func (c *cluster) run(ctx context.Context, stdin io.Reader, name string, args ...string) (string, error) {
	return c.Run(ctx, stdin, name, args...)
}

func (c *cluster) composeOut(ctx context.Context, args ...string) (string, error) {
	return c.Compose(ctx, nil, args...)
}

// up starts a fresh cluster and waits for a leader with every TaskManager.
func (c *cluster) up(ctx context.Context) error {
	c.down()
	if _, err := c.composeOut(ctx, "up", "-d"); err != nil {
		return fmt.Errorf("compose up: %w", err)
	}
	return c.waitReady(ctx, 3*time.Minute)
}

// waitReady waits for a leader that has every TaskManager registered.
func (c *cluster) waitReady(ctx context.Context, limit time.Duration) error {
	return waitFor(ctx, limit, "a leader with 3 TaskManagers", func() (bool, string) {
		var tms []struct {
			ID string `json:"id"`
		}
		if err := c.weirJSON(ctx, &tms, "taskmanager", "list"); err != nil {
			return false, err.Error()
		}
		return len(tms) == len(taskManagers), fmt.Sprintf("%d TaskManagers", len(tms))
	})
}

func (c *cluster) down() {
	if err := c.Down(); err != nil {
		c.log.Warn("compose down", "err", err)
	}
}

func (c *cluster) containerID(ctx context.Context, service string) (string, error) {
	return c.ContainerID(ctx, service)
}

func (c *cluster) docker(ctx context.Context, service string, args ...string) (string, error) {
	return c.Docker(ctx, service, args...)
}

// pid is the host PID of the service's process (the image has only the
// daemon, PID 1 in its container).
func (c *cluster) pid(ctx context.Context, service string) (int, error) {
	out, err := c.docker(ctx, service, "inspect", "--format", "{{.State.Pid}}")
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("%s is not running (pid %q)", service, strings.TrimSpace(out))
	}
	return pid, nil
}

// ip is the service's address on the compose network.
func (c *cluster) ip(ctx context.Context, service string) (string, error) {
	out, err := c.docker(ctx, service, "inspect", "--format", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}")
	if err != nil {
		return "", err
	}
	f := strings.Fields(out)
	if len(f) != 1 {
		return "", fmt.Errorf("%s has addresses %q, want one", service, out)
	}
	return f[0], nil
}

func (c *cluster) exec(ctx context.Context, stdin io.Reader, service string, cmd ...string) (string, error) {
	return c.Exec(ctx, stdin, service, cmd...)
}

func (c *cluster) weirJSON(ctx context.Context, v any, args ...string) error {
	return c.WeirJSON(ctx, v, args...)
}

func (c *cluster) submit(ctx context.Context, spec string) (string, error) {
	return c.Submit(ctx, spec)
}

func (c *cluster) cancelJob(ctx context.Context, id string) {
	if _, err := c.exec(ctx, nil, cliService, "weir", "--timeout=10s", "job", "cancel", id); err != nil {
		c.log.Warn("cancel job", "job", id, "err", err)
	}
}

// leader is the service of the leading JobManager, through the first
// etcd member that answers; "" when none does.
func (c *cluster) leader(ctx context.Context) string { return c.Leader(ctx, etcds...) }

type jobView = compose.Job

func (c *cluster) job(ctx context.Context, id string) (jobView, error) { return c.Job(ctx, id) }

type checkpointsView = compose.Checkpoints

func (c *cluster) checkpoints(ctx context.Context, id string) (checkpointsView, error) {
	return c.Checkpoints(ctx, id)
}

// copyOut copies a directory out of the output volume, through cliService.
func (c *cluster) copyOut(ctx context.Context, from, to string) error {
	id, err := c.containerID(ctx, cliService)
	if err != nil {
		return err
	}
	_, err = c.run(ctx, nil, "docker", "cp", id+":"+from, to)
	return err
}

// logs is the tail of a service's log, for a failed row's report.
func (c *cluster) logs(ctx context.Context, service string, lines int) string {
	return c.Logs(ctx, service, lines)
}

var errTimeout = compose.ErrTimeout

func waitFor(ctx context.Context, limit time.Duration, what string, cond func() (bool, string)) error {
	return compose.WaitFor(ctx, limit, what, cond)
}

func (c *cluster) loggedSince(ctx context.Context, service string, since time.Time, text string) bool {
	return c.LoggedSince(ctx, service, since, text)
}
