// Command benchtable reads `go test -bench` output and prints, for each
// benchmark case, the median ns/op, B/op and allocs/op of every
// implementation, its ratio to the best peer, and its difference from the
// case's reference (the bare baseline where there is one).
//
//	go test -run '^$' -bench . -benchmem -count 10 . | go run ./cmd/benchtable
//
// Implementations whose names start with "retry" are this library's; "plain"
// and those starting with "gobreaker" are references; the others are peers.
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
	"Guarded":      "gobreaker-twostep+rate-allown",
	"Parallel":     "",
	"GRPC":         "plain",
	"GRPCOverhead": "plain",
	"Shed":         "plain",
	"ShedParallel": "plain",
}

type row struct {
	impl                 string
	ns, bytes, allocs    []float64
	medNs, medB, medAllo float64
}

type table struct {
	name string
	rows []*row
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
	serial := map[string]float64{}
	for _, t := range tables {
		if t.name == "Success" {
			for _, r := range t.rows {
				serial[r.impl] = r.medNs
			}
		}
	}
	for _, t := range tables {
		write(w, t, serial)
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
		for _, r := range t.rows {
			r.medNs, r.medB, r.medAllo = median(r.ns), median(r.bytes), median(r.allocs)
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

func ours(impl string) bool { return strings.HasPrefix(impl, "retry") }

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

func write(w io.Writer, t *table, serial map[string]float64) {
	ref := references[t.name]
	own := bases(t)
	var best *row
	for _, r := range t.rows {
		if !ours(r.impl) && r.impl != ref && r.impl != "plain" && !strings.HasPrefix(r.impl, "gobreaker") && !strings.HasSuffix(r.impl, "-none") && (best == nil || r.medNs < best.medNs) {
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
	head := "| implementation | ns/op | B/op | allocs/op | × best peer |"
	sep := "|---|---:|---:|---:|---:|"
	switch {
	case own != nil:
		head += " − base (ns) | extra allocs | base |"
		sep += "---:|---:|---|"
	case refRow != nil && t.name == "Guarded":
		head += " − " + ref + " (ns) |"
		sep += "---:|"
	case refRow != nil && (t.name == "HTTPOverhead" || strings.HasPrefix(t.name, "GRPC")):
		head += " − " + ref + " (ns) | extra allocs |"
		sep += "---:|---:|"
	case refRow != nil:
		head += " × " + ref + " | extra allocs |"
		sep += "---:|---:|"
	case t.name == "Parallel":
		head += " × serial (Success) |"
		sep += "---:|"
	}
	fmt.Fprintln(w, head)
	fmt.Fprintln(w, sep)
	for _, r := range t.rows {
		line := fmt.Sprintf("| %s | %s | %.0f | %.0f | %s |", r.impl, num(r.medNs), r.medB, r.medAllo, ratio(r, best))
		switch {
		case own != nil:
			if base := own[r]; base != nil {
				line += fmt.Sprintf(" %+.1f | %+.0f | %s |", r.medNs-base.medNs, r.medAllo-base.medAllo, base.impl)
			} else {
				line += " | | |"
			}
		case refRow != nil && t.name == "Guarded":
			line += fmt.Sprintf(" %+.1f |", r.medNs-refRow.medNs)
		case refRow != nil && (t.name == "HTTPOverhead" || strings.HasPrefix(t.name, "GRPC")):
			line += fmt.Sprintf(" %+.0f | %+.0f |", r.medNs-refRow.medNs, r.medAllo-refRow.medAllo)
		case refRow != nil:
			line += fmt.Sprintf(" %.3f | %+.0f |", r.medNs/refRow.medNs, r.medAllo-refRow.medAllo)
		case t.name == "Parallel":
			if s, ok := serial[r.impl]; ok && s > 0 {
				line += fmt.Sprintf(" %.2f |", r.medNs/s)
			} else {
				line += " |"
			}
		}
		fmt.Fprintln(w, line)
	}
}

func ratio(r, best *row) string {
	if best == nil || r == best || best.medNs == 0 {
		return ""
	}
	return fmt.Sprintf("%.3f", r.medNs/best.medNs)
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
