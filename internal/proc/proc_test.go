package proc

import (
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/poll"
)

// The test binary is the child: with PROC_TEST_CHILD set it logs a line
// and waits for a signal, exiting cleanly on SIGTERM unless told to hang.
func TestMain(m *testing.M) {
	switch os.Getenv("PROC_TEST_CHILD") {
	case "":
		os.Exit(m.Run())
	case "hang":
		signal.Ignore(syscall.SIGTERM)
		println("child ready=1")
		time.Sleep(time.Hour)
	default:
		println("child ready=1")
		// The Go runtime exits with status 2 on an unhandled SIGTERM;
		// this child exits 0, as the daemons do.
		waitTERM()
		os.Exit(0)
	}
}

func start(t *testing.T, mode string) *Proc {
	t.Helper()
	p, err := Start("child", os.Args[0], filepath.Join(t.TempDir(), "child.log"), []string{"PROC_TEST_CHILD=" + mode}, "-test.run=^$")
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, 5*time.Millisecond, "the child to start", func() (bool, string) {
		return p.LogField("ready") == "1", p.Tail(1000)
	})
	return p
}

func TestStopIsClean(t *testing.T) {
	p := start(t, "clean")
	if err := p.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if len(Live()) != 0 {
		t.Fatalf("%d children still tracked", len(Live()))
	}
}

func TestStopReportsAHang(t *testing.T) {
	p := start(t, "hang")
	err := p.Stop(200 * time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "still running") {
		t.Fatalf("a child that ignores SIGTERM: %v", err)
	}
}

func TestStopReportsAnEarlyDeath(t *testing.T) {
	p := start(t, "hang")
	_ = p.Cmd.Process.Kill()
	<-p.Done()
	if err := p.Stop(time.Second); err == nil || !strings.Contains(err.Error(), "exited before shutdown") {
		t.Fatalf("a child that died unasked: %v", err)
	}
	q := start(t, "hang")
	q.Kill()
	if err := q.Stop(time.Second); err != nil {
		t.Fatalf("a child the test killed: %v", err)
	}
}

func TestKillAllKeeps(t *testing.T) {
	keep, gone := start(t, "hang"), start(t, "hang")
	KillAll(keep)
	if !gone.Exited() || keep.Exited() {
		t.Fatalf("after KillAll(keep): killed one exited %t, kept one exited %t", gone.Exited(), keep.Exited())
	}
	keep.Kill()
}
