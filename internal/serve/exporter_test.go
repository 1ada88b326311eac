package serve

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kube-convergence/kube-convergence-exporter/collectors"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
)

// resourceCollector is the smallest collector: it reads one resource.
type resourceCollector struct {
	name string
	r    informers.Resource
}

func (c resourceCollector) Name() string                         { return c.name }
func (c resourceCollector) Resources() []informers.Resource      { return []informers.Resource{c.r} }
func (c resourceCollector) Register(prometheus.Registerer) error { return nil }
func (c resourceCollector) Start(_ context.Context, f *informers.Factory) error {
	_, err := f.Informer(c.r)
	return err
}

// reviewer answers SelfSubjectAccessReviews like the API server would: with
// an error while fail(resource) is true, else allowed unless denied.
type reviewer struct {
	fail   func(resource string) bool
	denied map[string]bool
	calls  atomic.Int64
}

func (rv *reviewer) react(a k8stesting.Action) (bool, runtime.Object, error) {
	rv.calls.Add(1)
	ssar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
	res := ssar.Spec.ResourceAttributes.Resource
	if rv.fail != nil && rv.fail(res) {
		return true, nil, apierrors.NewServiceUnavailable("etcd leader changed")
	}
	out := ssar.DeepCopy()
	out.Status.Allowed = !rv.denied[res]
	return true, out, nil
}

func startExporter(t *testing.T, rv *reviewer, cs ...collectors.Collector) *Exporter {
	t.Helper()
	return startExporterWith(t, fake.NewClientset(), rv, cs...)
}

func startExporterWith(t *testing.T, client *fake.Clientset, rv *reviewer, cs ...collectors.Collector) *Exporter {
	t.Helper()
	client.PrependReactor("create", "selfsubjectaccessreviews", rv.react)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := prometheus.NewRegistry()
	e, err := New(client, "https://fake", informers.New(client, nil, logger), cs, reg, logger)
	if err != nil {
		t.Fatal(err)
	}
	e.reviewBackoff = wait.Backoff{Duration: time.Millisecond, Factor: 2, Steps: 1 << 30, Cap: 4 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return e
}

func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; last state:\n%s", what, state)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A failing access review is retried; the collector stays pending and
// /readyz 503 until the review is answered, then the collector starts.
func TestAccessReviewRetriedUntilAnswered(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	rv := &reviewer{fail: func(string) bool { return failing.Load() }}
	e := startExporter(t, rv, resourceCollector{"pods", informers.Pods})

	waitFor(t, "five failed reviews", func() (bool, string) {
		_, body := e.Readiness()
		return rv.calls.Load() >= 5, body
	})
	ready, body := e.Readiness()
	want := "collector pods: pending: checking permissions (access review for list pods failed (attempt "
	if ready || !strings.Contains(body, want) || !strings.Contains(body, "etcd leader changed") {
		t.Fatalf("while the review fails: ready=%v, body:\n%s\nwant it to contain %q", ready, body, want)
	}
	if v := testutil.ToFloat64(e.up.WithLabelValues("pods")); v != 0 {
		t.Errorf("collector_up = %v while the review fails, want 0", v)
	}

	failing.Store(false)
	waitFor(t, "ready", func() (bool, string) { r, b := e.Readiness(); return r, b })
	if _, body := e.Readiness(); !strings.Contains(body, "collector pods: synced\n") {
		t.Errorf("after the review answered:\n%s", body)
	}
	if v := testutil.ToFloat64(e.up.WithLabelValues("pods")); v != 1 {
		t.Errorf("collector_up = %v after the review answered, want 1", v)
	}
}

// Only an answer disables a collector; the other collectors do not wait for
// a collector whose review keeps failing.
func TestAccessReviewDenialDisablesOnlyThatCollector(t *testing.T) {
	rv := &reviewer{
		fail:   func(r string) bool { return r == "services" },
		denied: map[string]bool{"endpointslices": true},
	}
	e := startExporter(t, rv,
		resourceCollector{"pods", informers.Pods},
		resourceCollector{"slices", informers.EndpointSlices},
		resourceCollector{"services", informers.Services})
	waitFor(t, "pods synced and slices disabled", func() (bool, string) {
		_, b := e.Readiness()
		return strings.Contains(b, "collector pods: synced\n") &&
			strings.Contains(b, "collector slices: disabled (forbidden by RBAC, excluded from readiness)\n"), b
	})
	ready, body := e.Readiness()
	if ready || !strings.Contains(body, "collector services: pending: checking permissions (access review for list services failed") {
		t.Errorf("services review still failing: ready=%v\n%s", ready, body)
	}
	if v := testutil.ToFloat64(e.up.WithLabelValues("slices")); v != 0 {
		t.Errorf("collector_up{slices} = %v, want 0", v)
	}
}

// blockingCollector's pod handler, attached through the factory's handler
// wrapper as every collector's is, blocks until released.
type blockingCollector struct {
	entered, release chan struct{}
}

func (blockingCollector) Name() string { return "blocking" }
func (blockingCollector) Resources() []informers.Resource {
	return []informers.Resource{informers.Pods}
}
func (blockingCollector) Register(prometheus.Registerer) error { return nil }
func (c blockingCollector) Start(_ context.Context, f *informers.Factory) error {
	_, err := informers.Watch(f, "blocking", informers.Pods, informers.Handlers[informers.Pod]{
		Changed: func(_, _ *informers.Pod, _ informers.Seen) {
			c.entered <- struct{}{}
			<-c.release
		},
	})
	return err
}

// /healthz fails only while a handler call outlives the timeout, and names
// the collector; a quiet informer (no events at all) stays alive. Time is
// advanced through the now argument, not slept.
func TestLivenessFailsWhileAHandlerIsStuck(t *testing.T) {
	client := fake.NewClientset()
	c := blockingCollector{entered: make(chan struct{}), release: make(chan struct{})}
	e := startExporterWith(t, client, &reviewer{}, c)
	waitFor(t, "ready", func() (bool, string) { r, b := e.Readiness(); return r, b })
	const timeout = 5 * time.Minute
	if ok, body := e.Liveness(time.Now().Add(time.Hour), timeout); !ok {
		t.Fatalf("quiet cluster, an hour later: %q", body)
	}

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p"}}
	if _, err := client.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler never saw the pod")
	}
	entered := time.Now()
	if ok, body := e.Liveness(entered.Add(timeout-time.Second), timeout); !ok {
		t.Errorf("stuck just under the timeout: %q", body)
	}
	ok, body := e.Liveness(entered.Add(timeout+2*time.Second), timeout)
	if ok || !strings.HasPrefix(body, "wedged: collector blocking has left an informer event unhandled for 5m") {
		t.Errorf("stuck over the timeout: ok=%v %q", ok, body)
	}
	close(c.release)
	waitFor(t, "alive again after the handler returned", func() (bool, string) {
		return e.Liveness(time.Now().Add(timeout+2*time.Second), timeout)
	})
}

type stuckCollector struct {
	collector string
	stuck     time.Duration
}

func (s stuckCollector) Wedged(_ time.Time, timeout time.Duration) (string, time.Duration, bool) {
	return s.collector, s.stuck, s.stuck > timeout
}

func TestLivenessNamesTheWedgedCollector(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	if ok, body := liveness(stuckCollector{}, now, 5*time.Minute); !ok || body != "ok\n" {
		t.Errorf("idle: %v %q", ok, body)
	}
	if ok, body := liveness(stuckCollector{"pods", 299 * time.Second}, now, 5*time.Minute); !ok {
		t.Errorf("below the timeout: %v %q", ok, body)
	}
	ok, body := liveness(stuckCollector{"pods", 301400 * time.Millisecond}, now, 5*time.Minute)
	want := "wedged: collector pods has left an informer event unhandled for 5m1s (over --web.liveness-timeout=5m0s)\n"
	if ok || body != want {
		t.Errorf("wedged: %v %q, want false %q", ok, body, want)
	}
}
