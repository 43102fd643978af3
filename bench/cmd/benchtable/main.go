// Command benchtable reads `go test -bench` output and prints, for each
// benchmark case, the median ns/op, CPU ns/op (cpu-ns/op, which the bench
// module reports), B/op and allocs/op of every implementation, its ratio
// to the best peer, and its difference from the case's reference (the
// bare baseline where there is one). Ratios and differences are of CPU
// time when every row of the case has it, else of wall time.
//
//	go test -run '^$' -bench . -benchmem -count 10 . | go run ./cmd/benchtable
//
// Implementations whose names start with "retry" (or "base:retry", ours at
// an earlier revision: run.sh's BASE) are this library's; "plain" and
// those starting with "gobreaker" are references; the others are peers. A
// case named ParallelX is compared row by row with X (Parallel with
// Success): the cost of a call from every core over its cost on one.
//
// In a case with rows named X-none (the Gate cases: an implementation with
// no gate), every row X-… is compared with its X-none, and the others with
// plain: the difference is what the row adds to its own implementation.
// X-none rows are bases, never the best peer.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// references name, per case, the row the others are compared with.
var references = map[string]string{
	"Success":      "plain",
	"HTTPGet":      "plain",
	"HTTPOverhead": "plain",
	"Guarded":      "sethvargo+gobreaker+rate",
	"GRPC":         "plain",
	"GRPCOverhead": "plain",
	"Shed":         "plain",
	"ShedParallel": "plain",
}

type row struct {
	impl                         string
	ns, cpu, bytes, allocs       []float64
	medNs, medCPU, medB, medAllo float64
}

type table struct {
	name string
	rows []*row
	// cpu says every row has its CPU time (cpu-ns/op, which the bench
	// module reports): the ratios and differences are then of CPU time,
	// which other processes on a shared machine move far less than wall
	// time.
	cpu bool
}

// cost is what the table compares: r's median CPU time per operation, or
// its median wall time in a table without CPU times.
func (t *table) cost(r *row) float64 {
	if t.cpu {
		return r.medCPU
	}
	return r.medNs
}

func main() {
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
}

func run(in io.Reader, out io.Writer) error {
	tables, meta, err := read(in)
	if err != nil {
		return err
	}
	if len(tables) == 0 {
		return fmt.Errorf("no benchmark results in the input")
	}
	w := bufio.NewWriter(out)
	defer w.Flush()
	for _, k := range []string{"goos", "goarch", "cpu"} {
		if v := meta[k]; v != "" {
			fmt.Fprintf(w, "%s: %s  \n", k, v)
		}
	}
	byName := map[string]*table{}
	for _, t := range tables {
		byName[t.name] = t
	}
	for _, t := range tables {
		write(w, t, serialOf(t, byName))
	}
	return nil
}

// read parses the output of go test -bench: "key: value" lines (goos,
// goarch, cpu, pkg) and result lines, "BenchmarkCase/impl-N  iterations
// value unit ...", where N is GOMAXPROCS.
func read(in io.Reader) ([]*table, map[string]string, error) {
	meta := map[string]string{}
	var tables []*table
	byName := map[string]*row{}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		line := sc.Text()
		if k, v, ok := strings.Cut(line, ": "); ok && k != "" && !strings.ContainsAny(k, " \t") && !strings.HasPrefix(k, "Benchmark") {
			meta[k] = strings.TrimSpace(v)
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || len(f)%2 != 0 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		caseName, impl, _ := strings.Cut(trimProcs(strings.TrimPrefix(f[0], "Benchmark")), "/")
		key := caseName + "\x00" + impl
		r := byName[key]
		if r == nil {
			r = &row{impl: impl}
			byName[key] = r
			i := slices.IndexFunc(tables, func(t *table) bool { return t.name == caseName })
			if i < 0 {
				tables = append(tables, &table{name: caseName})
				i = len(tables) - 1
			}
			tables[i].rows = append(tables[i].rows, r)
		}
		for i := 2; i < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: value %q is not a number", f[0], f[i])
			}
			switch f[i+1] {
			case "ns/op":
				r.ns = append(r.ns, v)
			case "cpu-ns/op":
				r.cpu = append(r.cpu, v)
			case "B/op":
				r.bytes = append(r.bytes, v)
			case "allocs/op":
				r.allocs = append(r.allocs, v)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	for _, t := range tables {
		t.cpu = true
		for _, r := range t.rows {
			r.medNs, r.medCPU, r.medB, r.medAllo = median(r.ns), median(r.cpu), median(r.bytes), median(r.allocs)
			t.cpu = t.cpu && len(r.cpu) > 0
		}
	}
	return tables, meta, nil
}

// trimProcs drops the "-N" (GOMAXPROCS) that go test appends to a name.
func trimProcs(name string) string {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return name
	}
	if _, err := strconv.Atoi(name[i+1:]); err != nil {
		return name
	}
	return name[:i]
}

// ours reports whether impl is this library's: a row named retry-…, or
// base:retry-…, the same row run against an earlier revision (run.sh's
// BASE).
func ours(impl string) bool { return strings.HasPrefix(strings.TrimPrefix(impl, "base:"), "retry") }

// bases returns, for a case with rows named X-none, the row each row is
// compared with: the X-none of the longest X that its name starts with
// (X followed by "-"), else plain; nil for a case without X-none rows.
func bases(t *table) map[*row]*row {
	var nones, plain []*row
	for _, r := range t.rows {
		switch {
		case strings.HasSuffix(r.impl, "-none"):
			nones = append(nones, r)
		case r.impl == "plain":
			plain = append(plain, r)
		}
	}
	if len(nones) == 0 {
		return nil
	}
	m := map[*row]*row{}
	for _, r := range t.rows {
		var base *row
		for _, n := range nones {
			x := strings.TrimSuffix(n.impl, "none")
			if strings.HasPrefix(r.impl, x) && (base == nil || len(n.impl) > len(base.impl)) {
				base = n
			}
		}
		if base == nil && len(plain) > 0 {
			base = plain[0]
		}
		if base != nil {
			m[r] = base
		}
	}
	return m
}

// serialOf returns, for a case ParallelX run from every core at once, the
// case it is compared with: X run on one goroutine, Success for Parallel;
// nil for other cases.
func serialOf(t *table, byName map[string]*table) *table {
	x, ok := strings.CutPrefix(t.name, "Parallel")
	if !ok {
		return nil
	}
	if x == "" {
		x = "Success"
	}
	return byName[x]
}

func write(w io.Writer, t *table, serial *table) {
	ref := references[t.name]
	own := bases(t)
	var best *row
	for _, r := range t.rows {
		if !ours(r.impl) && r.impl != ref && r.impl != "plain" && !strings.HasPrefix(r.impl, "gobreaker") && !strings.HasSuffix(r.impl, "-none") && (best == nil || t.cost(r) < t.cost(best)) {
			best = r
		}
	}
	var refRow *row
	for _, r := range t.rows {
		if r.impl == ref {
			refRow = r
		}
	}
	fmt.Fprintf(w, "\n### %s\n\n", t.name)
	head := "| implementation | ns/op |"
	sep := "|---|---:|"
	if t.cpu {
		head += " CPU ns/op |"
		sep += "---:|"
	}
	head += " B/op | allocs/op | × best peer |"
	sep += "---:|---:|---:|"
	switch {
	case own != nil:
		head += " − base (ns) | extra allocs | base |"
		sep += "---:|---:|---|"
	case refRow != nil && (t.name == "HTTPOverhead" || strings.HasPrefix(t.name, "GRPC")):
		head += " − " + ref + " (ns) | extra allocs |"
		sep += "---:|---:|"
	case refRow != nil:
		head += " × " + ref + " | extra allocs |"
		sep += "---:|---:|"
	case serial != nil:
		head += " × serial (" + serial.name + ") |"
		sep += "---:|"
	}
	fmt.Fprintln(w, head)
	fmt.Fprintln(w, sep)
	for _, r := range t.rows {
		line := fmt.Sprintf("| %s | %s |", r.impl, num(r.medNs))
		if t.cpu {
			line += fmt.Sprintf(" %s |", num(r.medCPU))
		}
		line += fmt.Sprintf(" %.0f | %.0f | %s |", r.medB, r.medAllo, t.ratio(r, best))
		switch {
		case own != nil:
			if base := own[r]; base != nil {
				line += fmt.Sprintf(" %+.1f | %+.0f | %s |", t.cost(r)-t.cost(base), r.medAllo-base.medAllo, base.impl)
			} else {
				line += " | | |"
			}
		case refRow != nil && (t.name == "HTTPOverhead" || strings.HasPrefix(t.name, "GRPC")):
			line += fmt.Sprintf(" %+.0f | %+.0f |", t.cost(r)-t.cost(refRow), r.medAllo-refRow.medAllo)
		case refRow != nil:
			line += fmt.Sprintf(" %.3f | %+.0f |", t.cost(r)/t.cost(refRow), r.medAllo-refRow.medAllo)
		case serial != nil:
			line += " " + serialRatio(t, r, serial) + " |"
		}
		fmt.Fprintln(w, line)
	}
}

// serialRatio is the cost of r, run from every core, over the cost of the
// row of the same name in serial; empty when serial has none, or when
// the two tables do not measure the same time.
func serialRatio(t *table, r *row, serial *table) string {
	if t.cpu != serial.cpu {
		return ""
	}
	for _, s := range serial.rows {
		if s.impl == r.impl && serial.cost(s) > 0 {
			return fmt.Sprintf("%.2f", t.cost(r)/serial.cost(s))
		}
	}
	return ""
}

func (t *table) ratio(r, best *row) string {
	if best == nil || r == best || t.cost(best) == 0 {
		return ""
	}
	return fmt.Sprintf("%.3f", t.cost(r)/t.cost(best))
}

func num(ns float64) string {
	switch {
	case ns >= 1000:
		return fmt.Sprintf("%.0f", ns)
	case ns >= 100:
		return fmt.Sprintf("%.1f", ns)
	}
	return fmt.Sprintf("%.2f", ns)
}

// median returns the median of xs, 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
