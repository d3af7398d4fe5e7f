// Command bench-jobmanager is cmd/jobmanager with a pprof endpoint (on
// BENCH_PPROF_ADDR), for the benchmark harness's profiling runs only:
// every measured number comes from bin/jobmanager. It runs the same
// command code (internal/jmcmd).
package main

import (
	"net"
	"net/http"
	"net/http/pprof"
	"os"

	"github.com/weirproject/weir/internal/daemon"
	"github.com/weirproject/weir/internal/jmcmd"
)

func main() {
	if addr := os.Getenv("BENCH_PPROF_ADDR"); addr != "" {
		if l, err := net.Listen("tcp", addr); err == nil {
			mux := http.NewServeMux()
			mux.HandleFunc("/debug/pprof/", pprof.Index)
			mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
			mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
			go func() { _ = http.Serve(l, mux) }()
		}
	}
	daemon.Exit("jobmanager", jmcmd.Run(os.Args[1:]))
}
