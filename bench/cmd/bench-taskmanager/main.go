// Command bench-taskmanager is the TaskManager the benchmarks run: the stock
// worker (the same code as bin/taskmanager, with the built-in operators)
// plus the operators of bench/internal/ops and S3's (state.go), built the
// way a user builds a taskmanager with their own operators. With
// BENCH_PPROF_ADDR set it also serves net/http/pprof there, so the harness
// can profile a run.
package main

import (
	"net"
	"net/http"
	"net/http/pprof"
	"os"

	"github.com/weirproject/weir/bench/internal/ops"
	"github.com/weirproject/weir/sdk"
	"github.com/weirproject/weir/worker"
)

func main() {
	if addr := os.Getenv("BENCH_PPROF_ADDR"); addr != "" {
		l, err := net.Listen("tcp", addr)
		if err == nil {
			mux := http.NewServeMux()
			mux.HandleFunc("/debug/pprof/", pprof.Index)
			mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
			mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
			go func() { _ = http.Serve(l, mux) }()
		}
	}
	reg := sdk.NewRegistry()
	ops.Register(reg)
	registerStateOps(reg)
	worker.Main(reg)
}
