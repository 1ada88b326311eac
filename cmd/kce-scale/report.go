package main

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"time"
)

// quantile is the q-quantile of xs by the nearest-rank method (the smallest
// value with at least q of the values at or below it); NaN when empty.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := int(math.Ceil(q * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// perPod is (at N − at 0) / N in bytes, signed: a GC between the readings
// can make it negative on a small run.
func perPod(atN, at0 uint64, pods int) string {
	return fmt.Sprintf("%.0f B", (float64(atN)-float64(at0))/float64(pods))
}

func ms(seconds float64) string {
	if math.IsNaN(seconds) {
		return "n/a"
	}
	return fmt.Sprintf("%.0f ms", seconds*1000)
}

func latencies(xs []float64) string {
	return ms(quantile(xs, 0.5)) + " / " + ms(quantile(xs, 0.99))
}

// errorMillis renders p50 / p99 / max of errors in seconds, in ms with one
// decimal.
func errorMillis(xs []float64) string {
	if len(xs) == 0 {
		return "n/a"
	}
	f := func(v float64) string { return fmt.Sprintf("%.1f", v*1000) }
	return f(quantile(xs, 0.5)) + " / " + f(quantile(xs, 0.99)) + " / " + f(slices.Max(xs)) + " ms"
}

// table is a markdown table: a header row and rows of equal width.
type table struct {
	header []string
	rows   [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) String() string {
	var b strings.Builder
	line := func(cells []string) {
		b.WriteString("|")
		for _, c := range cells {
			b.WriteString(" " + strings.ReplaceAll(c, "|", `\|`) + " |")
		}
		b.WriteString("\n")
	}
	line(t.header)
	sep := make([]string, len(t.header))
	for i := range sep {
		sep[i] = "---"
	}
	line(sep)
	for _, r := range t.rows {
		line(r)
	}
	return b.String()
}

func duration(d time.Duration) string { return d.Round(time.Second).String() }

// result is everything the table shows.
type result struct {
	cfg                          config
	sh                           shape
	began                        time.Time
	loadBefore, loadAfter        string
	createTook, churnTook, total time.Duration
	exp, ksm                     *figures
	late, early, roundTrip       []float64
	polls, pollErrs              int
	matched, written, rewritten  int
	checks                       []string
	exporterVersion, ksmVersion  string
}

func (r result) command() string {
	c := fmt.Sprintf("make scale SCALE_PODS=%d", r.sh.pods)
	if r.cfg.ksmBin != "" {
		c += " KSM_BIN=" + r.cfg.ksmBin
	}
	return c
}

func (r result) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "### Scale run, %d pods (%s)\n\n", r.sh.pods, r.began.UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "`%s`: %d pods in %d Deployments of %d replicas behind %d Services in %d namespaces, on %d kwok nodes "+
		"(pod stages of %v; kube-controller-manager and kube-scheduler at %s); then a template change of every Deployment. "+
		"%d cores (nproc), load average %s before and %s after. Phase 1 (create, converge) %s, phase 2 (roll every Deployment, converge) %s, whole run %s.\n\n",
		r.command(), r.sh.pods, r.sh.deployments, replicas, r.sh.deployments, r.sh.namespaces, r.sh.nodes,
		podDelay, strings.Join(componentClientFlags, " "), runtime.NumCPU(), r.loadBefore, r.loadAfter,
		duration(r.createTook), duration(r.churnTook), duration(r.total))
	ksmHead := "kube-state-metrics"
	if !r.ksm.present {
		ksmHead += " (not run: KSM_BIN unset)"
	}
	t := &table{header: []string{"figure", "kube-convergence-exporter", ksmHead}}
	both := func(name string, f func(*figures) string) {
		k := "—"
		if r.ksm.present {
			k = f(r.ksm)
		}
		t.add(name, f(r.exp), k)
	}
	gc := func(f *figures) string {
		if f.heapForcedGC {
			return "after a forced GC"
		}
		return "no forced GC (no pprof)"
	}
	both("version", func(f *figures) string {
		if f == r.exp {
			return r.exporterVersion
		}
		return r.ksmVersion
	})
	both("memory readings", gc)
	both("CPU seconds, phase 1 (create)", func(f *figures) string { return fmt.Sprintf("%.1f", f.cpuCreate) })
	both("CPU seconds, phase 2 (churn)", func(f *figures) string { return fmt.Sprintf("%.1f", f.cpuChurn) })
	both("RSS at 0 pods", func(f *figures) string { return mib(f.p0.mem.rss) })
	both(fmt.Sprintf("RSS converged at %d pods", r.sh.pods), func(f *figures) string { return mib(f.p1.mem.rss) })
	both("RSS converged after the churn", func(f *figures) string { return mib(f.p2.mem.rss) })
	both("RSS peak (VmHWM)", func(f *figures) string { return mib(f.p2.mem.hwm) })
	both("RSS peak (1 s samples)", func(f *figures) string { return fmt.Sprintf("%s (%d samples)", mib(f.peakSampled), f.samples) })
	both("restarted with N pods present: RSS peak (VmHWM, the initial list) / RSS after a forced GC", func(f *figures) string {
		if f.restart.mem.rss == 0 {
			return "—"
		}
		return fmt.Sprintf("%s / %s (%.2f×), listed in %s", mib(f.restartPeak), mib(f.restart.mem.rss), float64(f.restartPeak)/float64(f.restart.mem.rss), duration(f.restartTook))
	})
	both("RSS per pod (at N − at 0) / N", func(f *figures) string { return perPod(f.p1.mem.rss, f.p0.mem.rss, r.sh.pods) })
	both("heap in use at 0 / at N / after the churn", func(f *figures) string {
		return mib(uint64(f.p0.heapInuse)) + " / " + mib(uint64(f.p1.heapInuse)) + " / " + mib(uint64(f.p2.heapInuse))
	})
	both("heap in use per pod (at N − at 0) / N", func(f *figures) string {
		return perPod(uint64(f.p1.heapInuse), uint64(f.p0.heapInuse), r.sh.pods)
	})
	both(fmt.Sprintf("/metrics p50 / p99 of %d, mid-churn", scrapes), func(f *figures) string {
		return fmt.Sprintf("%s (%.0f → %.0f of %d rollouts converged)", latencies(f.midLat), f.midFrom, f.midTo, r.sh.deployments)
	})
	both(fmt.Sprintf("/metrics p50 / p99 of %d, converged", scrapes), func(f *figures) string { return latencies(f.convLat) })
	both("/metrics size, converged", func(f *figures) string {
		return fmt.Sprintf("%d bytes, %d samples", f.size, f.lines)
	})
	t.add(fmt.Sprintf("Ready time error p50 / p99 / max, %d pods: receipt − request start (upper bound)", r.matched), errorMillis(r.late), "— (state only)")
	t.add("Ready time error p50 / p99 / max: receipt − response (lower bound)", errorMillis(r.early), "—")
	t.add("truth Ready write round trip p50 / p99 / max", errorMillis(r.roundTrip), "—")
	b.WriteString(t.String())
	fmt.Fprintf(&b, "\nAccuracy: %d truth pods (Deployments in namespaces of their own whose pods kwok starts but never makes Ready) "+
		"were made Ready by the run's own writer with a status update; the API server accepted each between the request's start and the response. "+
		"The exporter's time is the receipt of its `ready` timeline entry (/api/v1/timelines, read every 2 s: %d reads, %d failed). "+
		"%d of %d written pods matched; %d were made Ready again after another writer (kwok, lagging) set them not Ready, "+
		"and keep their first write as the truth.\n", r.written, r.polls, r.pollErrs, r.matched, r.written, r.rewritten)
	if len(r.checks) > 0 {
		b.WriteString("\nChecks failed:\n\n")
		for _, c := range r.checks {
			b.WriteString("- " + c + "\n")
		}
	}
	return b.String()
}
