// Package freeport picks loopback addresses for test daemons to listen
// on. They come from below the kernel's ephemeral range
// (ip_local_port_range, 32768–60999 by default): a port the kernel handed
// out for ":0" and freed again may be taken by any outgoing connection
// before the daemon binds it, one below the range is not. Each pick is
// checked free; a counter, started at a random place so that test
// binaries running at once rarely overlap, keeps one binary's picks apart.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"testing"
)

const (
	base = 20000
	span = 12000
)

var next atomic.Int64

func init() { next.Store(rand.Int64N(span)) }

// Addr is 127.0.0.1:<port> of a port free now.
func Addr(t testing.TB) string {
	t.Helper()
	addr, err := Pick()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// Pick is Addr for programs that are not tests (the benchmark harness).
func Pick() (string, error) {
	for range 1000 {
		port := base + int(next.Add(1))%span
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // taken: try the next
		}
		addr := l.Addr().String()
		l.Close()
		return addr, nil
	}
	return "", fmt.Errorf("freeport: no free port below the ephemeral range")
}
