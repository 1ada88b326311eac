package testctl_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/workqueue"

	"github.com/kube-convergence/kube-convergence-exporter/internal/sandbox"
	"github.com/kube-convergence/kube-convergence-exporter/internal/testctl"
)

func start(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, o testctl.Options) *testctl.Controller {
	t.Helper()
	o.Logf = t.Logf
	c, err := testctl.Start(ctx, sb.AdminConfig(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	return c
}

func createNamespace(ctx context.Context, t *testing.T, c kubernetes.Interface, ns string) {
	t.Helper()
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func createConfigMap(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, name, controller string) {
	t.Helper()
	if _, err := c.CoreV1().ConfigMaps(ns).Create(ctx, testctl.ConfigMap(ns, name, controller), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func scrape(t *testing.T, c *testctl.Controller) map[string]*dto.MetricFamily {
	t.Helper()
	text, err := c.Metrics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

func sample(mfs map[string]*dto.MetricFamily, name, queue string) float64 {
	mf := mfs[name]
	if mf == nil {
		return -1
	}
	for _, m := range mf.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "name" && l.GetValue() == queue {
				switch {
				case m.Counter != nil:
					return m.GetCounter().GetValue()
				case m.Gauge != nil:
					return m.GetGauge().GetValue()
				case m.Histogram != nil:
					return float64(m.GetHistogram().GetSampleCount())
				}
			}
		}
	}
	return -1
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		ok, s := cond()
		if ok {
			return
		}
		last = s
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: not within %v (last: %s)", what, timeout, last)
}

// The controller against a real API server, both recorders: a transient
// failure of 3 syncs is 3 AddRateLimited (workqueue_retries_total 3: the
// informer enqueues with Add), 3 occurrences on one stored Event (legacy:
// count 3; events.k8s.io: series.count 2, the third kept in the
// recorder's cache), then a sync that writes the synced annotation; a
// held sync shows in workqueue_longest_running_processor_seconds; the
// families and labels are kube-controller-manager's.
func TestControllerAgainstAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and kube-apiserver")
	}
	sb := sandbox.StartT(t, sandbox.Options{Only: []sandbox.Component{sandbox.Etcd, sandbox.APIServer}})
	ctx := context.Background()
	c := kubernetes.NewForConfigOrDie(sb.AdminConfig())
	ns := "testctl"
	createNamespace(ctx, t, c, ns)
	fast := workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, time.Second)
	for _, rec := range []testctl.Recorder{testctl.LegacyRecorder, testctl.EventsRecorder} {
		t.Run(string(rec), func(t *testing.T) {
			name := "kce-testctl-" + string(rec)
			ctl := start(ctx, t, sb, testctl.Options{Name: name, Namespace: ns, Recorder: rec, RateLimiter: fast})
			obj := "cm-" + string(rec)
			ctl.FailTimes(obj, 3)
			createConfigMap(ctx, t, c, ns, obj, name)
			eventually(t, 30*time.Second, "synced after 3 failures", func() (bool, string) {
				cm, err := c.CoreV1().ConfigMaps(ns).Get(ctx, obj, metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				return cm.Annotations[testctl.SyncedAnnotation] != "", fmt.Sprintf("%+v", ctl.Stats(obj))
			})
			if st := ctl.Stats(obj); st.Failures != 3 {
				t.Errorf("stats %+v, want 3 failures", st)
			}
			mfs := scrape(t, ctl)
			if got := sample(mfs, "workqueue_retries_total", name); got != 3 {
				t.Errorf("workqueue_retries_total = %v, want 3 (the failures)", got)
			}
			if got := sample(mfs, "workqueue_adds_total", name); got < 4 {
				t.Errorf("workqueue_adds_total = %v, want the informer's add and the 3 retries", got)
			}
			for _, f := range []string{"workqueue_depth", "workqueue_queue_duration_seconds", "workqueue_work_duration_seconds",
				"workqueue_unfinished_work_seconds", "workqueue_longest_running_processor_seconds"} {
				if sample(mfs, f, name) < 0 {
					t.Errorf("%s{name=%q} missing", f, name)
				}
			}
			want := int32(3)
			if rec == testctl.EventsRecorder {
				want = 2 // tools/events writes the series at its second occurrence
			}
			// Up to 12.5 s more with tools/events: occurrences 1 and 2
			// are written from separate goroutines, and when the
			// series' PATCH loses the race to the first CREATE (NotFound,
			// then AlreadyExists) the recorder retries after
			// wait.Jitter(10s, 0.25) (event_broadcaster.go recordEvent).
			eventually(t, 30*time.Second, "the Warning Event stored", func() (bool, string) {
				evs, err := c.EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "type=Warning,regarding.name=" + obj})
				if err != nil || len(evs.Items) != 1 {
					return false, fmt.Sprintf("%v %v", err, evs)
				}
				e := evs.Items[0]
				n := e.DeprecatedCount
				if e.Series != nil {
					n = e.Series.Count
				}
				if e.Reason != testctl.ReasonSyncFailed || (e.ReportingController != name && e.DeprecatedSource.Component != name) {
					return false, fmt.Sprintf("%+v", e)
				}
				return n == want, fmt.Sprintf("count %d", n)
			})

			ctl.Hold(obj, 3*time.Second)
			eventually(t, 10*time.Second, "a held worker", func() (bool, string) {
				v := sample(scrape(t, ctl), "workqueue_longest_running_processor_seconds", name)
				return v >= 1, fmt.Sprint(v)
			})
			eventually(t, 10*time.Second, "released", func() (bool, string) {
				v := sample(scrape(t, ctl), "workqueue_longest_running_processor_seconds", name)
				return v == 0, fmt.Sprint(v)
			})
			if st := ctl.Stats(obj); st.Held != 1 || st.Failures != 3 {
				t.Errorf("stats %+v, want one hold and 3 failures", st)
			}
		})
	}
}
