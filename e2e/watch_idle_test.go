package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/listwatch"
)

// TestWatchIdleEventsRelistIsIdle: the exporter's Warning-Event watch on a
// quiet cluster. Events have no watch cache by default, so the watch reads
// etcd and receives no bookmarks; with no Warning written its last version
// stays the list's. Once etcd has compacted past it (kube-apiserver asks
// for a compaction every 5 min), the resume after the stream's normal
// timeout gets 410 and the reflector relists: relists{idle}, not
// {expired}, because the stream was live until the timeout and nothing was
// missed. The watch-health SLI counts only expired. A real reflector, its
// watch timeout shortened from 5-10 min to 2 s.
func TestWatchIdleEventsRelistIsIdle(t *testing.T) {
	s := watchSandbox(t)
	c := kubernetes.NewForConfigOrDie(s.AdminConfig())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := fmt.Sprintf("watch-idle-%d", time.Now().UnixNano()%100000)
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m := listwatch.NewMetrics(reg)
	r := informers.WarningEvents
	// One namespace of its own: the other tests' Warnings stay out, so this
	// watch is idle for sure.
	events := c.EventsV1().Events(ns)
	wrapped := m.Wrap(r.String(), &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = informers.WarningSelector
			return events.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = informers.WarningSelector
			return events.Watch(ctx, o)
		},
	}).(cache.ListerWatcherWithContext)
	// The reflector asks for 5-10 min (its WatchList stream too, whatever
	// MinWatchTimeout says); 2 s here, above the wrapper, so the wrapper
	// sees the timeout the server applies.
	lw := &cache.ListWatch{
		ListWithContextFunc: wrapped.ListWithContext,
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.TimeoutSeconds = ptr.To[int64](2)
			return wrapped.WatchWithContext(ctx, o)
		},
	}
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	refl := cache.NewReflectorWithOptions(lw, &eventsv1.Event{}, store, cache.ReflectorOptions{})
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); refl.RunWithContext(rctx) }()
	defer func() { stop(); <-done }()

	counts := func() map[string]float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		byName := map[string]*dto.MetricFamily{}
		for _, mf := range mfs {
			byName[mf.GetName()] = mf
		}
		return watchCounts(byName)
	}
	key := func(metric, reason string) string { return counterKey(metric, r, reason) }
	waitCounts(t, 30*time.Second, "synced and resumed once after a timeout", counts, func(n map[string]float64) bool {
		return refl.LastSyncResourceVersion() != "" && n[key("restarts", "timeout")] >= 1
	})
	// Move etcd two revisions past the version the watch resumes from (it
	// asks for the revisions after it), and compact there.
	for i := range 2 {
		if _, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bump-%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rev, err := s.CompactEtcd(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("etcd compacted at revision %d; the watch still resumes from %s", rev, refl.LastSyncResourceVersion())
	n := waitCounts(t, 30*time.Second, "a relist after the compaction", counts, func(n map[string]float64) bool {
		return n[key("relists", "idle")]+n[key("relists", "expired")]+n[key("relists", "error")] >= 1
	})
	for reason, want := range map[string]float64{"initial": 1, "idle": 1, "expired": 0, "error": 0} {
		if got := n[key("relists", reason)]; got != want {
			t.Errorf("relists{%s} = %v, want %v", reason, got, want)
		}
	}
	if got := n[key("restarts", "expired")]; got != 1 {
		t.Errorf("restarts{expired} = %v, want 1 (the resumed stream's 410)", got)
	}
}

// waitCounts polls counts until ok or the deadline, and returns the last.
func waitCounts(t *testing.T, timeout time.Duration, what string, counts func() map[string]float64, ok func(map[string]float64) bool) map[string]float64 {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		n := counts()
		if ok(n) {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, timeout, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
