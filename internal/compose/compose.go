// Package compose drives a docker-compose project of deploy/: the
// compose command, the containers of its services, the CLI run inside
// one of them and what it says of jobs. The compose test and the fault
// tool (cmd/weir-faults) both drive their clusters with it.
package compose

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// CLIService is the service the CLI runs in: no test or fault touches
// it, so the cluster can always be asked what it sees.
const CLIService = "taskmanager-3"

// Project is one compose project.
type Project struct {
	// Root is the repository.
	Root    string
	compose []string // the compose command with project and file options
	env     []string

	mu  sync.Mutex
	ids map[string]string // service → container ID
}

// New is project name over the compose files given (relative to root).
// Every published port is a random free one on loopback, so a project
// runs beside the cluster of `make up`. The compose command is
// $COMPOSE_CMD, else docker-compose, else docker compose.
func New(root, name string, files ...string) *Project {
	var cmd []string
	if v := os.Getenv("COMPOSE_CMD"); v != "" {
		cmd = strings.Fields(v)
	} else if _, err := exec.LookPath("docker-compose"); err == nil {
		cmd = []string{"docker-compose"}
	} else {
		cmd = []string{"docker", "compose"}
	}
	cmd = append(cmd, "-p", name)
	for _, f := range files {
		cmd = append(cmd, "-f", filepath.Join(root, f))
	}
	return &Project{
		Root: root, compose: cmd,
		env: append(os.Environ(), "WEIR_BIND=127.0.0.1", "WEIR_PORT_JM1_RPC=", "WEIR_PORT_JM1_HTTP=",
			"WEIR_PORT_JM2_RPC=", "WEIR_PORT_JM2_HTTP=", "WEIR_PORT_PROMETHEUS=", "WEIR_PORT_KAFKA=", "WEIR_PORT_S3="),
		ids: map[string]string{},
	}
}

// Run runs a command, bounded in time, and returns its stdout.
func (p *Project) Run(ctx context.Context, stdin io.Reader, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = p.env
	cmd.Stdin = stdin
	// Its own process group: a Ctrl-C meant for the caller does not kill
	// a docker command halfway (the caller heals and removes the cluster).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// Compose runs the compose command with args.
func (p *Project) Compose(ctx context.Context, stdin io.Reader, args ...string) (string, error) {
	return p.Run(ctx, stdin, p.compose[0], append(append([]string{}, p.compose[1:]...), args...)...)
}

// Down removes the project's containers, network and volumes.
func (p *Project) Down() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := p.Compose(ctx, nil, "down", "-v", "--remove-orphans", "--timeout", "5")
	p.mu.Lock()
	clear(p.ids)
	p.mu.Unlock()
	return err
}

// ContainerID is a service's container; `docker start` after `docker
// kill` keeps it.
func (p *Project) ContainerID(ctx context.Context, service string) (string, error) {
	p.mu.Lock()
	id, ok := p.ids[service]
	p.mu.Unlock()
	if ok {
		return id, nil
	}
	out, err := p.Compose(ctx, nil, "ps", "-q", service)
	if err != nil {
		return "", err
	}
	if id = strings.TrimSpace(out); id == "" {
		return "", fmt.Errorf("service %s has no container", service)
	}
	p.mu.Lock()
	p.ids[service] = id
	p.mu.Unlock()
	return id, nil
}

// Docker runs docker with args and the service's container last
// (docker kill, inspect --format …).
func (p *Project) Docker(ctx context.Context, service string, args ...string) (string, error) {
	id, err := p.ContainerID(ctx, service)
	if err != nil {
		return "", err
	}
	return p.Run(ctx, nil, "docker", append(args, id)...)
}

// Exec runs a command in a service's container (docker exec: much faster
// than docker-compose 1.29's exec, so polls stay tight).
func (p *Project) Exec(ctx context.Context, stdin io.Reader, service string, cmd ...string) (string, error) {
	id, err := p.ContainerID(ctx, service)
	if err != nil {
		return "", err
	}
	args := []string{"exec"}
	if stdin != nil {
		args = append(args, "-i")
	}
	return p.Run(ctx, stdin, "docker", append(append(args, id), cmd...)...)
}

// HostPort is the loopback address compose published a service's port on.
func (p *Project) HostPort(ctx context.Context, service string, port int) (string, error) {
	out, err := p.Compose(ctx, nil, "port", service, strconv.Itoa(port))
	if err != nil {
		return "", fmt.Errorf("port %d of %s: %w", port, service, err)
	}
	addr := strings.TrimSpace(out)
	if _, port, ok := strings.Cut(addr, ":"); ok && !strings.HasPrefix(addr, "127.") {
		addr = "127.0.0.1:" + port
	}
	return addr, nil
}

// Logs is the tail of a service's log.
func (p *Project) Logs(ctx context.Context, service string, lines int) string {
	out, err := p.Compose(ctx, nil, "logs", "--no-color", "--tail="+strconv.Itoa(lines), service)
	if err != nil {
		return err.Error()
	}
	return out
}

// LoggedSince reports whether a service logged a line containing text
// since a moment (the daemons log to stderr).
func (p *Project) LoggedSince(ctx context.Context, service string, since time.Time, text string) bool {
	id, err := p.ContainerID(ctx, service)
	if err != nil {
		return false
	}
	out, err := exec.CommandContext(ctx, "docker", "logs", "--since", since.Format(time.RFC3339Nano), id).CombinedOutput()
	return err == nil && strings.Contains(string(out), text)
}

// Weir runs the CLI in CLIService, where it finds the leader through
// etcd, with stdin (nil: none); it returns the CLI's output.
func (p *Project) Weir(ctx context.Context, stdin io.Reader, args ...string) (string, error) {
	return p.Exec(ctx, stdin, CLIService, append([]string{"weir", "--timeout=10s"}, args...)...)
}

// WeirJSON runs the CLI with -o json and decodes its output into v.
func (p *Project) WeirJSON(ctx context.Context, v any, args ...string) error {
	args = append([]string{"weir", "--timeout=5s"}, args...)
	out, err := p.Exec(ctx, nil, CLIService, append(args, "-o", "json")...)
	if err != nil {
		return err
	}
	return json.Unmarshal([]byte(out), v)
}

// Submit submits a YAML job spec and returns the job's ID.
func (p *Project) Submit(ctx context.Context, spec string) (string, error) {
	out, err := p.Weir(ctx, strings.NewReader(spec), "job", "submit", "-f", "-")
	if err != nil {
		return "", fmt.Errorf("submit: %w", err)
	}
	return strings.TrimSpace(out), nil
}

// Leader is the service of the leading JobManager, from etcd (the lowest
// create revision under the election prefix leads), through the first of
// the etcd services that answers; "" when none does.
func (p *Project) Leader(ctx context.Context, etcds ...string) string {
	for _, m := range etcds {
		out, err := p.Exec(ctx, nil, m, "etcdctl", "--command-timeout=2s", "get", "--prefix",
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

// Job is what `weir job get -o json` says of a job.
type Job struct {
	State        string `json:"state"`
	Restarts     int    `json:"restarts"`
	FailureCause string `json:"failure_cause"`
	Vertices     []struct {
		Name     string `json:"name"`
		Subtasks []struct {
			Attempt       int    `json:"attempt"`
			State         string `json:"state"`
			TaskManagerID string `json:"taskmanager_id"`
		} `json:"subtasks"`
	} `json:"vertices"`
}

// Job asks the cluster about job id.
func (p *Project) Job(ctx context.Context, id string) (Job, error) {
	var j Job
	err := p.WeirJSON(ctx, &j, "job", "get", id)
	return j, err
}

// Checkpoints is what `weir checkpoint list -o json` says of a job.
type Checkpoints struct {
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

// Checkpoints asks the cluster about job id's checkpoints.
func (p *Project) Checkpoints(ctx context.Context, id string) (Checkpoints, error) {
	var v Checkpoints
	err := p.WeirJSON(ctx, &v, "checkpoint", "list", id)
	return v, err
}

// ErrTimeout is what WaitFor returns when the time is up.
var ErrTimeout = errors.New("timed out")

// WaitFor calls cond every second until it reports done; an error names
// what it waited for and the last state cond saw.
func WaitFor(ctx context.Context, limit time.Duration, what string, cond func() (bool, string)) error {
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		done, last := cond()
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w after %v waiting for %s; last: %s", ErrTimeout, limit, what, last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-tick.C:
		}
	}
}
