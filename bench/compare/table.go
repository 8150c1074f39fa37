package main

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
)

// The markers between which -table rewrites a Markdown file.
const (
	tableBegin = "<!-- make compare: begin -->"
	tableEnd   = "<!-- make compare: end -->"

	apacheBegin = "<!-- make compare apache: begin -->"
	apacheEnd   = "<!-- make compare apache: end -->"
)

// writeTable replaces the text between tableBegin and tableEnd in file with
// the figures of this run as Markdown tables, with the date, the machine,
// the load and the command.
func writeTable(file string, f *figures, h conditions, args []string) error {
	var b strings.Builder
	b.WriteString(h.measured(args, len(f.vals("leasehold_jobs_per_s")), false))
	b.WriteString("| system | jobs/s | worker CPU per job | Redis CPU per job | leasehold's rate ÷ this one |\n|---|---|---|---|---|\n")
	for _, s := range []struct{ key, name string }{
		{"leasehold", "leasehold (worker, Kafka, claim + fenced complete)"},
		{"asynq", "asynq v0.26.0 (Unique + TaskID)"},
		{"dbos", "DBOS Transact Go (one-step workflow, PostgreSQL)"},
		{"setnx", "SET NX pattern (no owner check, no fence)"},
	} {
		rate, ok := f.median(s.key + "_jobs_per_s")
		if !ok {
			continue
		}
		ratio := "1"
		if r, ok := f.median("leasehold_vs_" + s.key); ok {
			ratio = fmt.Sprintf("%.1fx", r)
		}
		fmt.Fprintf(&b, "| %s | %.0f | %s | %s | %s |\n", s.name, rate,
			cell(f, s.key+"_worker_cpu_us_per_job", "%.1f µs"), cell(f, s.key+"_redis_cpu_us_per_job", "%.1f µs"), ratio)
	}
	if r, ok := f.median("leasehold_vs_asynq_cpu_per_job"); ok {
		fmt.Fprintf(&b, "\nasynq's worker + Redis CPU per job is %.1fx leasehold's; one Redis core allows %s leasehold jobs/s.\n",
			r, cell(f, "leasehold_redis_bound_jobs_per_s", "%.0f"))
	}
	if all, ok := f.median("leasehold_all_cpu_us_per_job"); ok {
		fmt.Fprintf(&b, "Worker, Redis and the embedded broker together take %.1f µs of CPU a leasehold job (the broker %s): the "+
			"machine's %d cores allow %s jobs/s; asynq's worker and Redis allow %s.\n", all,
			cell(f, "leasehold_broker_cpu_us_per_job", "%.1f µs"), runtime.NumCPU(),
			cell(f, "leasehold_cpu_bound_jobs_per_s", "%.0f"), cell(f, "asynq_cpu_bound_jobs_per_s", "%.0f"))
	}
	if n, ok := f.median("longjobs_jobs"); ok {
		fmt.Fprintf(&b, "\n%.0f long jobs held in one process (lease TTL 30 s), measured over a window after all started:\n\n", n)
		b.WriteString("| long jobs | worker CPU (% of one core) | Redis CPU (% of one core) |\n|---|---|---|\n")
		for _, s := range []struct{ key, name string }{
			{"longjobs", "leasehold, Heartbeat every 5 s from spread start times"},
			{"longjobs_wake", "leasehold, handlers waking every 5 s but calling nothing"},
			{"longjobs_hold", "leasehold, leases alone (no Heartbeat calls)"},
			{"longjobs_asynq", "asynq holding as many tasks (no heartbeat details)"},
		} {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", s.name, cell(f, s.key+"_worker_cpu_pct", "%.2f"), cell(f, s.key+"_redis_cpu_pct", "%.2f"))
		}
	}
	return replaceSection(file, tableBegin, tableEnd, b.String())
}

// replaceSection replaces the text between the lines begin and end of file
// with body.
func replaceSection(file, begin, end, body string) error {
	doc, err := os.ReadFile(file) //nolint:gosec // a path the user gave
	if err != nil {
		return err
	}
	i, j := bytes.Index(doc, []byte(begin)), bytes.Index(doc, []byte(end))
	if i < 0 || j < i {
		return fmt.Errorf("%s: no %q ... %q section to rewrite", file, begin, end)
	}
	out := slices.Concat(doc[:i], []byte(begin+"\n"+body+end), doc[j+len(end):])
	return os.WriteFile(file, out, 0o600) //nolint:gosec // the file the user named with -table
}

// writeApacheTable replaces the text between apacheBegin and apacheEnd in
// file with the figures of a -kafka apache run.
func writeApacheTable(file string, f *figures, h conditions, args []string) error {
	var b strings.Builder
	b.WriteString(h.measured(args, len(f.vals("leasehold_apache_jobs_per_s")), true))
	b.WriteString("| system, on one Apache Kafka broker | jobs/s | worker CPU per job | Redis CPU per job | leasehold's rate ÷ this one |\n|---|---|---|---|---|\n")
	for _, s := range []struct{ key, name string }{
		{"leasehold", "leasehold (worker, claim + fenced complete)"},
		{"bare_consumer", "bare franz-go group consumer, committing (no Redis)"},
		{"setnx", "SET NX pattern on a franz-go group consumer"},
	} {
		key := s.key + "_apache"
		if _, ok := f.median(key + "_jobs_per_s"); !ok {
			continue
		}
		ratio := "1"
		if _, ok := f.median("leasehold_vs_" + key); ok {
			ratio = spread(f, "leasehold_vs_"+key, "%.4fx")
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", s.name, spread(f, key+"_jobs_per_s", "%.0f"),
			cell(f, key+"_worker_cpu_us_per_job", "%.1f µs"), cell(f, key+"_redis_cpu_us_per_job", "%.1f µs"), ratio)
	}
	if r, ok := f.median("bare_consumer_vs_leasehold_apache"); ok {
		fmt.Fprintf(&b, "\nThe bare consumer reads %.1fx as many records a second as leasehold runs jobs (median of the rounds' ratios).\n", r)
	}
	return replaceSection(file, apacheBegin, apacheEnd, b.String())
}

// spread formats a figure's median with its lowest and highest round.
func spread(f *figures, name, format string) string {
	v, ok := f.median(name)
	if !ok {
		return "–"
	}
	vals := f.vals(name)
	if len(vals) < 2 {
		return fmt.Sprintf(format, v)
	}
	return fmt.Sprintf(format+" ("+format+" to "+format+")", v, slices.Min(vals), slices.Max(vals))
}

func cell(f *figures, name, format string) string {
	v, ok := f.median(name)
	if !ok {
		return "–"
	}
	return fmt.Sprintf(format, v)
}

func argText(args []string) string {
	var kept []string
	for _, a := range args {
		if !strings.HasPrefix(a, "-table") {
			kept = append(kept, a)
		}
	}
	if len(kept) == 0 {
		return ""
	}
	return " ARGS='" + strings.Join(kept, " ") + "'"
}
