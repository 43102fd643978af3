// Command shedload runs the load test of server-side shedding on loopback
// HTTP servers, or gRPC ones with --grpc (package shedload): a handler of
// fixed capacity under no shedding, under failsafe-go's, and under this
// library's,
// each driven open loop at 0.5× its capacity for a second, 3× for 10 s,
// then 0.5× for 10 s. It prints one row a server, or JSON with --json, and
// draws goodput over time with --plot.
//
//	go run ./bench/cmd/shedload                  # from the repository's root
//	go run ./bench/cmd/shedload --short          # the form that make test runs
//	go run ./bench/cmd/shedload --json --plot goodput.svg > run.json
//	go run ./bench/cmd/shedload --replay run.json --plot again.svg
//	go run ./bench/cmd/shedload --grpc
//
// --replay prints and draws the results of an earlier --json run instead
// of running (give --short too when that run had it): the picture and
// tables of docs/shedding.md are a recorded run, redrawn by the tests.
// Exit status: 0 after a run, 1 when a run failed, 2 on bad flags.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/steadyhq/retry/bench/shedload"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the command with its arguments and outputs; it returns the exit
// status.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("shedload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	short := fs.Bool("short", false, "the short profile (3× for 2 s, then 0.5× for 1.5 s, at 200 requests/s), as make test runs it")
	asJSON := fs.Bool("json", false, "print the results as JSON, per-tick series included")
	plotFile := fs.String("plot", "", "draw goodput over time for every server to `FILE` (.svg, .png or .pdf)")
	only := fs.String("servers", "", "comma-separated names of the servers to run (default: all)")
	overGRPC := fs.Bool("grpc", false, "over gRPC (grpc-go, the grpc module's interceptors) instead of HTTP")
	replay := fs.String("replay", "", "print and draw the results of an earlier --json run in `FILE` instead of running")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "shedload: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *plotFile != "" && !plotFormats[strings.ToLower(filepath.Ext(*plotFile))] {
		fmt.Fprintf(stderr, "shedload: flag --plot = %q: must end in .svg, .png or .pdf\n", *plotFile)
		return 2
	}
	targets, err := pick(*overGRPC, *only)
	if err != nil {
		fmt.Fprintln(stderr, "shedload:", err)
		return 2
	}
	p := shedload.Full()
	if *short {
		p = shedload.Short()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var results []*shedload.Result
	if *replay != "" {
		b, err := os.ReadFile(*replay)
		if err == nil {
			err = json.Unmarshal(b, &results)
		}
		if err != nil {
			fmt.Fprintf(stderr, "shedload: flag --replay = %q: %v\n", *replay, err)
			return 2
		}
		targets = nil
	}
	for _, t := range targets {
		fmt.Fprintf(stderr, "running %s (%s)\n", t.Name, p.Duration())
		r, err := shedload.Run(ctx, p, t)
		if err != nil {
			fmt.Fprintln(stderr, "shedload:", err)
			return 1
		}
		results = append(results, r)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(results); err != nil {
			fmt.Fprintln(stderr, "shedload:", err)
			return 1
		}
	} else {
		writeTable(stdout, p, results)
	}
	if *plotFile != "" {
		if err := savePlot(p, results, *plotFile); err != nil {
			fmt.Fprintln(stderr, "shedload:", err)
			return 1
		}
		fmt.Fprintf(stderr, "wrote %s\n", *plotFile)
	}
	return 0
}

// pick returns the targets over HTTP (or gRPC) named in the
// comma-separated list names, all of them when it is empty.
func pick(overGRPC bool, names string) ([]shedload.Target, error) {
	var all []shedload.Target
	if overGRPC {
		for _, s := range shedload.GRPCServers() {
			all = append(all, shedload.GRPC(s))
		}
	} else {
		for _, s := range shedload.HTTPServers() {
			all = append(all, shedload.HTTP(s))
		}
	}
	if names == "" {
		return all, nil
	}
	var out []shedload.Target
	for _, n := range strings.Split(names, ",") {
		found := false
		for _, t := range all {
			if t.Name == n {
				out, found = append(out, t), true
			}
		}
		if !found {
			return nil, fmt.Errorf("flag --servers: no server %q", n)
		}
	}
	return out, nil
}

// writeTable prints the profile and one row a server.
func writeTable(w io.Writer, p shedload.Profile, results []*shedload.Result) {
	fmt.Fprintf(w, "server: %d workers, %s a request (capacity %.0f/s); open loop, %.1f× for %s, %.1f× for %s, %.1f× for %s;\n",
		p.Workers, p.Service, p.Capacity(), p.LightFactor, p.Unloaded, p.OverloadFactor, p.Overload, p.LightFactor, p.After)
	fmt.Fprintf(w, "client: this library's (retry.Transport, or the grpc module's interceptor) with its defaults, %s a request\n\n", p.Deadline)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "server\tgoodput\tp50 admitted\tp99 admitted\tunloaded p99\tamplification\tretries\tearly retries\trecovery\t")
	for _, r := range results {
		rec := "never"
		if r.RecoveryS != nil {
			rec = fmt.Sprintf("%.1f s", *r.RecoveryS)
		}
		fmt.Fprintf(tw, "%s\t%.0f%%\t%.0f ms\t%.0f ms\t%.0f ms\t%.3f×\t%d\t%d\t%s\t\n", r.Server, 100*r.GoodputShare,
			r.P50MS, r.P99MS, r.UnloadedP99MS, r.Amplification, r.Retries, r.EarlyRetries, rec)
	}
	tw.Flush()
	fmt.Fprintln(w, "\ngoodput: successful requests per second during the overload, of capacity; p50, p99 admitted: server-side")
	fmt.Fprintln(w, "latency of the attempts the shedding let through during the overload (unloaded: during the first")
	fmt.Fprintln(w, "phase); amplification: attempts reaching the server per logical request; early retries: attempts")
	fmt.Fprintln(w, "arriving before the Retry-After sent to the attempt before them; recovery: from the overload's end")
	fmt.Fprintln(w, "to the first 100 ms tick from which, in every 300 ms, at least 90% of the requests due succeed within 1 s")
}
