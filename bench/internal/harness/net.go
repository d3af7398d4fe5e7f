package harness

import (
	"os"
	"strconv"
	"strings"
)

// NetCounters are host-wide loopback and TCP counters. Everything on
// loopback counts, so a window's delta is an upper bound of what the
// measured pipeline sent (the harness's own scrapes are in it too).
type NetCounters struct {
	LoBytes, LoPackets, TCPOutSegs int64
}

// ReadNet reads /proc/net/dev (lo) and /proc/net/snmp (Tcp OutSegs).
func ReadNet() NetCounters {
	var n NetCounters
	if b, err := os.ReadFile("/proc/net/dev"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "lo:"); ok {
				f := strings.Fields(rest)
				if len(f) >= 10 {
					n.LoBytes, _ = strconv.ParseInt(f[8], 10, 64)
					n.LoPackets, _ = strconv.ParseInt(f[9], 10, 64)
				}
			}
		}
	}
	if b, err := os.ReadFile("/proc/net/snmp"); err == nil {
		var head []string
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(line, "Tcp:") {
				continue
			}
			f := strings.Fields(line)
			if head == nil {
				head = f
				continue
			}
			for i, h := range head {
				if h == "OutSegs" && i < len(f) {
					n.TCPOutSegs, _ = strconv.ParseInt(f[i], 10, 64)
				}
			}
		}
	}
	return n
}

// Sub is n - o.
func (n NetCounters) Sub(o NetCounters) NetCounters {
	return NetCounters{n.LoBytes - o.LoBytes, n.LoPackets - o.LoPackets, n.TCPOutSegs - o.TCPOutSegs}
}
