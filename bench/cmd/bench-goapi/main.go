// Command bench-goapi is benchmark G1's Go-API program
// (bench/internal/goapijob): `bench-goapi taskmanager <flags>` runs a
// TaskManager whose operators are the job's vertices, `bench-goapi
// submit` submits the job, `bench-goapi plan` prints it — weir.Main's
// commands. With BENCH_PPROF_ADDR set it also serves net/http/pprof there,
// as bench-taskmanager does, so the harness can profile a run.
package main

import (
	"net"
	"net/http"
	"net/http/pprof"
	"os"

	"github.com/weirproject/weir/bench/internal/goapijob"
	"github.com/weirproject/weir/program"
)

func main() {
	if addr := os.Getenv("BENCH_PPROF_ADDR"); addr != "" {
		if l, err := net.Listen("tcp", addr); err == nil {
			mux := http.NewServeMux()
			mux.HandleFunc("/debug/pprof/", pprof.Index)
			mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
			go func() { _ = http.Serve(l, mux) }()
		}
	}
	program.Main(goapijob.Job())
}
