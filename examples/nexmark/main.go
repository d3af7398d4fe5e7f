// Command nexmark runs the Nexmark benchmark's queries (q0, q1, q2, q3,
// q4, q5, q7, q8; see package queries) on Weir with the Go API: one
// program, its flags pick the query and its settings, then a verb as for
// every Go API program.
//
//	go build -o bin/nexmark ./examples/nexmark
//	bin/nexmark taskmanager --jobmanager localhost:6123 &   # next to bin/jobmanager
//	bin/nexmark -query q5 -events 10000000 submit --jobmanager localhost:6123
//
// A TaskManager of this program runs every query, with either sink; the
// flags matter to submit and plan, and travel in the job. Every flag has
// an environment variable, NEXMARK_<FLAG>: NEXMARK_QUERY, NEXMARK_EVENTS,
// NEXMARK_RATE, NEXMARK_FIRST_EVENT_RATE, NEXMARK_PARALLELISM,
// NEXMARK_OUT, NEXMARK_CHECKPOINT_INTERVAL, NEXMARK_STATE.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/weirproject/weir/nexmark/queries"
	"github.com/weirproject/weir/program"
	"github.com/weirproject/weir/worker"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("nexmark", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: nexmark [flags] submit|taskmanager|plan [verb flags]\n\n")
		fs.PrintDefaults()
	}
	var o queries.Options
	query := fs.String("query", "q0", fmt.Sprintf("the query: one of %v", queries.Names))
	fs.Int64Var(&o.Events, "events", 10_000_000, "events to generate, 0 for an endless stream")
	fs.Float64Var(&o.Rate, "rate", 0, "events per second of the whole stream, 0 for as fast as it goes")
	fs.Float64Var(&o.FirstEventRate, "first-event-rate", 10_000, "events per second of event time")
	fs.IntVar(&o.Parallelism, "parallelism", 2, "parallelism of every vertex")
	fs.StringVar(&o.Out, "out", "", "write the results with the file sink into this directory (local or s3://); empty: discard them")
	fs.DurationVar(&o.Checkpoint, "checkpoint-interval", 10*time.Second, "checkpoint interval")
	state := fs.String("state", "heap", "keyed state backend: heap, pebble or pebble-incremental")
	// Each flag's environment variable, NEXMARK_<FLAG>, sets it before the
	// command line does.
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		key := "NEXMARK_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		f.Usage += " (env " + key + ")"
		if v, ok := os.LookupEnv(key); ok && v != "" && envErr == nil {
			if err := fs.Set(f.Name, v); err != nil {
				envErr = fmt.Errorf("nexmark: env %s: %w", key, err)
			}
		}
	})
	if envErr != nil {
		fmt.Fprintln(os.Stderr, envErr)
		return 2
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := o.SetState(*state); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if rest := fs.Args(); len(rest) > 0 && rest[0] == "taskmanager" {
		reg, err := queries.Registry()
		if err == nil {
			err = worker.Run(reg, rest[1:])
		}
		switch {
		case err == nil, errors.Is(err, flag.ErrHelp):
			return 0
		}
		fmt.Fprintln(os.Stderr, "nexmark taskmanager:", err)
		return 1
	}
	job, err := queries.Build(*query, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return program.Run(job, fs.Args(), os.Stdout, os.Stderr)
}
