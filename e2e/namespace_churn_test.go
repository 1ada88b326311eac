package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-convergence/kube-convergence-exporter/internal/demo"
)

// TestNamespaceChurnEverySecondStaysBounded churns namespaces as CI
// systems and preview environments do: for 40 s, a namespace a second,
// each with a two-replica Deployment behind a Service, each deleted 5 s
// after its creation (half of them mid-rollout). Its own exporter
// (the series count must not move with the other tests' namespaces) must
// come out of it as it went in:
//
//   - no series of a churned namespace is left once the namespaces are
//     gone, and the total is within 20 % of the count before;
//   - the Go heap in use after a forced GC grew by less than 32 MiB (a
//     coarse bound: the exact check of per-namespace state is the series
//     one; this one catches the informer objects or timelines of the
//     deleted namespaces kept whole);
//   - no handler took more than 1 s for an event
//     (kube_convergence_handler_lag_seconds, every collector);
//   - nothing is lost: each Deployment has its episode in the timeline
//     store, closed as converged or deleted, as the injected readiness
//     delays dictate.
func TestNamespaceChurnEverySecondStaysBounded(t *testing.T) {
	const (
		namespaces = 40
		lifetime   = 5 * time.Second
		prefix     = "nschurn-"
	)
	ctx := context.Background()
	e := startExporter(t, "--kubeconfig="+sb.Kubeconfig(""), "--stall.threshold="+stallThreshold.String(), "--web.enable-pprof")
	e.waitReady(time.Minute)

	// A moment for the initial lists' events to be handled, then the
	// baseline.
	eventually(t, 30*time.Second, "the series count settles", settled(e))
	before := seriesOf(t, e)
	heapBefore := heapInUse(t, e)
	lagBefore := handlerLagOver(e.scrape(), 1)

	var wg sync.WaitGroup
	errs := make(chan error, 2*namespaces)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for i := range namespaces {
		ns := fmt.Sprintf("%s%02d", prefix, i)
		if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
		// Even namespaces' pods turn Ready 1 s after they start, odd ones'
		// only after 20 s: deleted mid-rollout.
		ready := time.Second
		if i%2 == 1 {
			ready = 20 * time.Second
		}
		if _, err := client.AppsV1().Deployments(ns).Create(ctx, demo.Deployment(ns, "web", 2, demo.Delays(time.Second, ready)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := client.CoreV1().Services(ns).Create(ctx, serviceFor(ns, "web", "web"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			time.Sleep(lifetime) // the namespace's lifetime is the injected truth, not a wait for a condition
			if err := client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}); err != nil {
				errs <- fmt.Errorf("delete %s: %w", ns, err)
			}
		})
		<-tick.C
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	eventually(t, 3*time.Minute, "the churned namespaces deleted", func() (bool, string) {
		list, err := client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var left []string
		for _, n := range list.Items {
			if strings.HasPrefix(n.Name, prefix) {
				left = append(left, n.Name)
			}
		}
		return len(left) == 0, fmt.Sprintf("%d left: %v", len(left), left)
	})
	// The API server has removed them; the exporter drops their series on
	// the namespace's delete event.
	churned := regexp.MustCompile(`namespace="` + prefix)
	eventually(t, time.Minute, "no series of a churned namespace", func() (bool, string) {
		var left []string
		for s := range seriesOf(t, e) {
			if churned.MatchString(s) {
				left = append(left, s)
			}
		}
		if len(left) > 5 {
			left = append(left[:5], "...")
		}
		return len(left) == 0, strings.Join(left, "\n")
	})

	after := seriesOf(t, e)
	if limit := len(before) * 12 / 10; len(after) > limit {
		var added []string
		for s := range after {
			if _, ok := before[s]; !ok {
				added = append(added, s)
			}
		}
		t.Errorf("%d series after the churn, %d before (limit %d); %d new, e.g. %v", len(after), len(before), limit, len(added), added[:min(len(added), 10)])
	}
	grown := heapInUse(t, e) - heapBefore
	if grown > 32<<20 {
		t.Errorf("heap in use after a forced GC grew by %d MiB over the churn", grown>>20)
	}
	mfs := e.scrape()
	if over := handlerLagOver(mfs, 1) - lagBefore; over > 0 {
		t.Errorf("%d events took a handler more than 1 s during the churn", over)
	}
	if v, ok := value(mfs, "kube_convergence_timeline_bytes", nil); !ok || v > 64<<20 {
		t.Errorf("kube_convergence_timeline_bytes %v (present %v), budget 64 MiB", v, ok)
	}

	// Nothing lost: every Deployment's episode is in the store, closed
	// with the outcome the injected delays dictate.
	api := apiSource{t: t, e: e}
	for i := range namespaces {
		ns := fmt.Sprintf("%s%02d", prefix, i)
		want := "converged"
		if i%2 == 1 {
			want = "deleted"
		}
		eventually(t, 30*time.Second, ns+"'s episode closed "+want, func() (bool, string) {
			eps := api.Object("Deployment", ns, "web", time.Time{})
			return len(eps) == 1 && eps[0].Outcome == want, fmt.Sprintf("%d episodes: %+v", len(eps), eps)
		})
	}
	t.Logf("%d series before, %d after; heap in use after a forced GC %+.1f MiB", len(before), len(after), float64(grown)/(1<<20))
}

// seriesOf returns the exporter's series, one sample line of /metrics each
// (the histogram's buckets, sum and count each count, as Prometheus stores
// them).
func seriesOf(t *testing.T, e *exporterProc) map[string]struct{} {
	t.Helper()
	code, body, err := e.get("/metrics")
	if err != nil || code != 200 {
		t.Fatalf("GET /metrics: %d %v", code, err)
	}
	out := map[string]struct{}{}
	for line := range strings.SplitSeq(body, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			out[line[:i]] = struct{}{}
		}
	}
	return out
}

// settled reports whether the series count is the same in two scrapes a
// second apart.
func settled(e *exporterProc) func() (bool, string) {
	return func() (bool, string) {
		count := func() int {
			_, body, _ := e.get("/metrics")
			return strings.Count(body, "\n") - strings.Count(body, "\n#")
		}
		a := count()
		time.Sleep(time.Second)
		b := count()
		return a == b, fmt.Sprintf("%d then %d lines", a, b)
	}
}

var heapInUseLine = regexp.MustCompile(`(?m)^# HeapInuse = (\d+)$`)

// heapInUse reads the exporter's Go heap in use after a forced GC, from
// its pprof heap profile (--web.enable-pprof; debug=1 ends with the
// runtime's MemStats).
func heapInUse(t *testing.T, e *exporterProc) int64 {
	t.Helper()
	code, body, err := e.get("/debug/pprof/heap?gc=1&debug=1")
	if err != nil || code != 200 {
		t.Fatalf("GET heap profile: %d %v", code, err)
	}
	m := heapInUseLine.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no HeapInuse in the heap profile:\n%s", tail(body, 2000))
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// handlerLagOver counts the events any collector's handler took longer
// than bound seconds for: the histogram's count less its bucket at bound.
func handlerLagOver(mfs map[string]*dto.MetricFamily, bound float64) uint64 {
	var over uint64
	mf := mfs["kube_convergence_handler_lag_seconds"]
	if mf == nil {
		return 0
	}
	for _, m := range mf.Metric {
		h := m.GetHistogram()
		for _, b := range h.GetBucket() {
			if b.GetUpperBound() == bound {
				over += h.GetSampleCount() - b.GetCumulativeCount()
			}
		}
	}
	return over
}
