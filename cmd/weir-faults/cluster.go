package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Services of the compose cluster. The CLI runs inside cliService, which
// no fault touches, so the tool can always ask the cluster what it sees.
var (
	etcds        = []string{"etcd-1", "etcd-2", "etcd-3"}
	jobManagers  = []string{"jobmanager-1", "jobmanager-2"}
	faultedTMs   = []string{"taskmanager-1", "taskmanager-2"}
	taskManagers = append(append([]string{}, faultedTMs...), cliService)
)

const cliService = "taskmanager-3"

// cluster drives one compose project: deploy/docker-compose.yml with the
// fault overlay deploy/faults/docker-compose.yml.
type cluster struct {
	log     *slog.Logger
	root    string   // the repository
	compose []string // the compose command with project and file options
	env     []string

	mu  sync.Mutex
	ids map[string]string // compose service → container ID
}

func newCluster(log *slog.Logger, root, project string) *cluster {
	var composeCmd []string
	if v := os.Getenv("COMPOSE_CMD"); v != "" {
		composeCmd = strings.Fields(v)
	} else if _, err := exec.LookPath("docker-compose"); err == nil {
		composeCmd = []string{"docker-compose"}
	} else {
		composeCmd = []string{"docker", "compose"}
	}
	return &cluster{
		log:  log,
		root: root,
		compose: append(composeCmd, "-p", project,
			"-f", filepath.Join(root, "deploy", "docker-compose.yml"),
			"-f", filepath.Join(root, "deploy", "faults", "docker-compose.yml")),
		// Random free host ports: the tool runs beside `make up`'s cluster.
		env: append(os.Environ(), "WEIR_BIND=127.0.0.1", "WEIR_PORT_JM1_RPC=", "WEIR_PORT_JM1_HTTP=",
			"WEIR_PORT_JM2_RPC=", "WEIR_PORT_JM2_HTTP=", "WEIR_PORT_PROMETHEUS=", "WEIR_PORT_KAFKA=", "WEIR_PORT_S3="),
		ids: map[string]string{},
	}
}

// run runs a command, bounded in time, and returns its stdout.
func (c *cluster) run(ctx context.Context, stdin io.Reader, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = c.env
	cmd.Stdin = stdin
	// Its own process group: a Ctrl-C meant for the tool does not kill a
	// docker command halfway (the tool heals and removes the cluster).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

func (c *cluster) composeOut(ctx context.Context, args ...string) (string, error) {
	return c.run(ctx, nil, c.compose[0], append(append([]string{}, c.compose[1:]...), args...)...)
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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.composeOut(ctx, "down", "-v", "--remove-orphans", "--timeout", "5"); err != nil {
		c.log.Warn("compose down", "err", err)
	}
	c.mu.Lock()
	clear(c.ids)
	c.mu.Unlock()
}

// containerID is a service's container; `docker start` after `docker kill`
// keeps it.
func (c *cluster) containerID(ctx context.Context, service string) (string, error) {
	c.mu.Lock()
	id, ok := c.ids[service]
	c.mu.Unlock()
	if ok {
		return id, nil
	}
	out, err := c.composeOut(ctx, "ps", "-q", service)
	if err != nil {
		return "", err
	}
	if id = strings.TrimSpace(out); id == "" {
		return "", fmt.Errorf("service %s has no container", service)
	}
	c.mu.Lock()
	c.ids[service] = id
	c.mu.Unlock()
	return id, nil
}

func (c *cluster) docker(ctx context.Context, service string, args ...string) (string, error) {
	id, err := c.containerID(ctx, service)
	if err != nil {
		return "", err
	}
	return c.run(ctx, nil, "docker", append(args, id)...)
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

// exec runs a command in a service's container (docker exec: much faster
// than docker-compose 1.29's exec).
func (c *cluster) exec(ctx context.Context, stdin io.Reader, service string, cmd ...string) (string, error) {
	id, err := c.containerID(ctx, service)
	if err != nil {
		return "", err
	}
	args := []string{"exec"}
	if stdin != nil {
		args = append(args, "-i")
	}
	return c.run(ctx, stdin, "docker", append(append(args, id), cmd...)...)
}

// weirJSON runs the CLI in cliService, where it finds the leader through
// etcd, and decodes its -o json output.
func (c *cluster) weirJSON(ctx context.Context, v any, args ...string) error {
	args = append([]string{"weir", "--timeout=5s"}, args...)
	out, err := c.exec(ctx, nil, cliService, append(args, "-o", "json")...)
	if err != nil {
		return err
	}
	return json.Unmarshal([]byte(out), v)
}

func (c *cluster) submit(ctx context.Context, spec string) (string, error) {
	out, err := c.exec(ctx, strings.NewReader(spec), cliService, "weir", "--timeout=10s", "job", "submit", "-f", "-")
	if err != nil {
		return "", fmt.Errorf("submit: %w", err)
	}
	return strings.TrimSpace(out), nil
}

func (c *cluster) cancelJob(ctx context.Context, id string) {
	if _, err := c.exec(ctx, nil, cliService, "weir", "--timeout=10s", "job", "cancel", id); err != nil {
		c.log.Warn("cancel job", "job", id, "err", err)
	}
}

// leader is the compose service of the leading JobManager, from etcd (the
// lowest create revision under the election prefix leads), through the
// first etcd member that answers; "" when none does.
func (c *cluster) leader(ctx context.Context) string {
	for _, m := range etcds {
		out, err := c.exec(ctx, nil, m, "etcdctl", "--command-timeout=2s", "get", "--prefix",
			"--sort-by=CREATE", "--order=ASCEND", "--limit=1", "--print-value-only", "/weir/default/leader/")
		if err != nil {
			continue
		}
		var info struct {
			RPCAddr string `json:"rpc_addr"`
		}
		if json.Unmarshal([]byte(strings.TrimSpace(out)), &info) != nil {
			return ""
		}
		host, _, _ := strings.Cut(info.RPCAddr, ":")
		return host
	}
	return ""
}

// jobView is what `weir job get -o json` says of a job.
type jobView struct {
	State        string `json:"state"`
	Restarts     int    `json:"restarts"`
	FailureCause string `json:"failure_cause"`
	Vertices     []struct {
		Subtasks []struct {
			State         string `json:"state"`
			TaskManagerID string `json:"taskmanager_id"`
		} `json:"subtasks"`
	} `json:"vertices"`
}

func (c *cluster) job(ctx context.Context, id string) (jobView, error) {
	var j jobView
	err := c.weirJSON(ctx, &j, "job", "get", id)
	return j, err
}

// checkpointsView is what `weir checkpoint list -o json` says.
type checkpointsView struct {
	Counts struct {
		Completed int64 `json:"completed"`
		Failed    int64 `json:"failed"`
	} `json:"counts"`
	History []struct {
		ID               int64   `json:"id"`
		Status           string  `json:"status"`
		TriggerTimestamp int64   `json:"trigger_timestamp"`
		FailureMessage   *string `json:"failure_message"`
	} `json:"history"`
}

func (c *cluster) checkpoints(ctx context.Context, id string) (checkpointsView, error) {
	var v checkpointsView
	err := c.weirJSON(ctx, &v, "checkpoint", "list", id)
	return v, err
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
	out, err := c.composeOut(ctx, "logs", "--no-color", "--tail="+strconv.Itoa(lines), service)
	if err != nil {
		return err.Error()
	}
	return out
}

var errTimeout = errors.New("timed out")

// waitFor calls cond every second until it reports done; an error names
// what it waited for and the last state seen.
func waitFor(ctx context.Context, limit time.Duration, what string, cond func() (bool, string)) error {
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		done, last := cond()
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w after %v waiting for %s; last: %s", errTimeout, limit, what, last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-tick.C:
		}
	}
}

// loggedSince reports whether a service logged a line containing text
// since a moment (the daemons log to stderr).
func (c *cluster) loggedSince(ctx context.Context, service string, since time.Time, text string) bool {
	id, err := c.containerID(ctx, service)
	if err != nil {
		return false
	}
	out, err := exec.CommandContext(ctx, "docker", "logs", "--since", since.Format(time.RFC3339Nano), id).CombinedOutput()
	return err == nil && strings.Contains(string(out), text)
}
