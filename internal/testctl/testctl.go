// Package testctl is a real client-go controller for tests and the demo:
// a ConfigMap informer feeding a workqueue.TypedRateLimitingQueue with
// client-go's default controller rate limiter, workers that Get, sync,
// Forget or AddRateLimited and Done the way kube-controller-manager's
// controllers do (pkg/controller/replicaset processNextWorkItem), a
// Warning Event on every failed sync through client-go's real recorder
// (tools/record, as KCM, or tools/events, as kube-scheduler), and the
// workqueue metrics on its own /metrics. On command it fails one object
// for good, fails it a number of times and recovers, or holds it in a
// worker for a while; the counts it keeps are the truth tests compare
// the exporter and the rules with.
//
//	c, err := testctl.Start(ctx, cfg, testctl.Options{Namespace: "ns"})
//	defer c.Stop()
//	c.FailForGood("web")                 // every sync of ConfigMap ns/web fails
//	scrape c.MetricsAddr()               // workqueue_*{name="kce-testctl"}
package testctl

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
)

// Recorder names the client-go event recorder a controller writes with.
type Recorder string

const (
	// LegacyRecorder is client-go tools/record (core/v1 Events, its
	// correlator: aggregation, count, spam filter), as kube-controller-manager's
	// controllers and the kubelet record.
	LegacyRecorder Recorder = "legacy"
	// EventsRecorder is client-go tools/events (events.k8s.io/v1 series),
	// as kube-scheduler and controller-runtime's GetEventRecorder record.
	EventsRecorder Recorder = "events"
)

// What the controller records and writes.
const (
	// ReasonSyncFailed is the reason of the Warning Event of a failed sync.
	ReasonSyncFailed = "SyncFailed"
	// SyncedAnnotation holds a hash of the data of a ConfigMap the
	// controller synced: a successful sync writes it once per data change.
	SyncedAnnotation = "testctl.kube-convergence.io/synced"
	// ManagedLabel selects the ConfigMaps a controller reconciles: its
	// value is the controller's name.
	ManagedLabel = "testctl.kube-convergence.io/controller"
)

// ConfigMap returns a ConfigMap for the controller named controller to
// reconcile (labelled ManagedLabel=controller), with one data key.
func ConfigMap(namespace, name, controller string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{ManagedLabel: controller}},
		Data:       map[string]string{"v": "0"},
	}
}

// Options configures Start.
type Options struct {
	// Name is the queue name (workqueue_*{name}), the Events' reporting
	// controller (source component) and the field manager. Default
	// "kce-testctl".
	Name string
	// Namespace holds the ConfigMaps reconciled: those labelled
	// ManagedLabel=Name. Required.
	Namespace string
	// Recorder: LegacyRecorder (default) or EventsRecorder.
	Recorder Recorder
	// Workers is the number of workers; default 2, as most KCM controllers
	// run with --concurrent-*-syncs at their defaults or above.
	Workers int
	// RateLimiter; default workqueue.DefaultTypedControllerRateLimiter
	// (per item 5 ms doubling to 1000 s, overall 10 qps burst 100). Tests
	// that cannot wait for a 1000 s back-off pass a faster one.
	RateLimiter workqueue.TypedRateLimiter[string]
	// MetricsAddr is where /metrics listens; default 127.0.0.1:0.
	MetricsAddr string
	// Logf, if set, receives one line per sync failure and fault command.
	Logf func(format string, args ...any)
}

// Stats is what the controller did with one object: the truth tests
// compare with.
type Stats struct {
	Syncs, Failures int
	// FirstFailure and LastFailure time the failed syncs (zero before the
	// first); LastSuccess the last successful one.
	FirstFailure, LastFailure, LastSuccess time.Time
	// Held counts the syncs that held a worker.
	Held int
}

type fault struct {
	forever bool
	times   int           // failures left
	hold    time.Duration // the next sync holds its worker this long
}

// Controller is a running test controller.
type Controller struct {
	o      Options
	client kubernetes.Interface
	queue  workqueue.TypedRateLimitingInterface[string]
	lister cache.Indexer
	srv    *http.Server
	addr   string

	legacy      record.EventRecorder
	legacyStop  func()
	events      events.EventRecorder
	eventsStop  func()
	cancel      context.CancelFunc
	wg          sync.WaitGroup
	stopOnce    sync.Once
	stopErr     error
	mu          sync.Mutex // guards faults and stats
	faults      map[string]*fault
	stats       map[string]*Stats
	heldRelease chan struct{}
}

// Start starts the controller against the API server of cfg and returns
// once its informer has synced and /metrics listens.
func Start(ctx context.Context, cfg *rest.Config, o Options) (*Controller, error) {
	if o.Namespace == "" {
		return nil, errors.New("testctl: Namespace is required")
	}
	if o.Name == "" {
		o.Name = "kce-testctl"
	}
	if o.Recorder == "" {
		o.Recorder = LegacyRecorder
	}
	if o.Recorder != LegacyRecorder && o.Recorder != EventsRecorder {
		return nil, fmt.Errorf("testctl: unknown recorder %q", o.Recorder)
	}
	if o.Workers <= 0 {
		o.Workers = 2
	}
	if o.RateLimiter == nil {
		o.RateLimiter = workqueue.DefaultTypedControllerRateLimiter[string]()
	}
	if o.MetricsAddr == "" {
		o.MetricsAddr = "127.0.0.1:0"
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = o.Name
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("testctl: %w", err)
	}
	reg := prometheus.NewRegistry()
	c := &Controller{
		o:      o,
		client: client,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(o.RateLimiter, workqueue.TypedRateLimitingQueueConfig[string]{
			Name:            o.Name,
			MetricsProvider: newQueueMetrics(reg),
		}),
		faults:      map[string]*fault{},
		stats:       map[string]*Stats{},
		heldRelease: make(chan struct{}),
	}
	ctx, c.cancel = context.WithCancel(context.WithoutCancel(ctx))
	ok := false
	defer func() {
		if !ok {
			_ = c.Stop()
		}
	}()

	switch o.Recorder {
	case LegacyRecorder:
		// As KCM's controllers (pkg/controller/replicaset NewReplicaSetController):
		// a broadcaster recording to the core/v1 Events sink.
		b := record.NewBroadcaster(record.WithContext(ctx))
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
		c.legacy = b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: o.Name})
		c.legacyStop = b.Shutdown
	case EventsRecorder:
		b := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
		if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
			return nil, fmt.Errorf("testctl: events recorder: %w", err)
		}
		c.events = b.NewRecorder(scheme.Scheme, o.Name)
		c.eventsStop = b.Shutdown
	}

	factory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithNamespace(o.Namespace),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = ManagedLabel + "=" + o.Name }))
	inf := factory.Core().V1().ConfigMaps().Informer()
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(key)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, cur any) { enqueue(cur) },
		DeleteFunc: enqueue,
	}); err != nil {
		return nil, fmt.Errorf("testctl: %w", err)
	}
	c.lister = inf.GetIndexer()
	factory.Start(ctx.Done())
	c.wg.Go(func() {
		<-ctx.Done()
		factory.Shutdown()
	})
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, errors.New("testctl: informer did not sync")
	}

	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", o.MetricsAddr)
	if err != nil {
		return nil, fmt.Errorf("testctl: metrics listener: %w", err)
	}
	c.addr = l.Addr().String()
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	c.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	c.wg.Go(func() { _ = c.srv.Serve(l) })

	for range o.Workers {
		c.wg.Go(func() {
			for c.processNextWorkItem(ctx) {
			}
		})
	}
	ok = true
	return c, nil
}

// MetricsAddr is the host:port of /metrics.
func (c *Controller) MetricsAddr() string { return c.addr }

// Metrics returns the controller's /metrics exposition, as a scrape reads it.
func (c *Controller) Metrics(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.addr+"/metrics", nil)
	if err != nil {
		return "", fmt.Errorf("testctl: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("testctl: scrape: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("testctl: scrape: %w", err)
	}
	return string(b), nil
}

// Name is the queue name and reporting controller.
func (c *Controller) Name() string { return c.o.Name }

// Stop shuts the queue down, releases held workers, waits for them and
// stops the recorders and /metrics. It is idempotent.
func (c *Controller) Stop() error {
	c.stopOnce.Do(func() {
		c.cancel()
		c.queue.ShutDown()
		close(c.heldRelease)
		if c.srv != nil {
			c.stopErr = c.srv.Close()
		}
		c.wg.Wait()
		if c.legacyStop != nil {
			c.legacyStop()
		}
		if c.eventsStop != nil {
			c.eventsStop()
		}
	})
	return c.stopErr
}

// FailForGood makes every sync of ConfigMap name fail until Heal.
func (c *Controller) FailForGood(name string) { c.command(name, func(f *fault) { f.forever = true }) }

// FailTimes makes the next n syncs of name fail; the one after succeeds.
func (c *Controller) FailTimes(name string, n int) { c.command(name, func(f *fault) { f.times = n }) }

// Hold makes the next sync of name hold its worker for d before it
// succeeds (a health check, a helm --wait).
func (c *Controller) Hold(name string, d time.Duration) {
	c.command(name, func(f *fault) { f.hold = d })
}

// Heal clears every fault of name; its next sync succeeds.
func (c *Controller) Heal(name string) { c.command(name, func(f *fault) { *f = fault{} }) }

func (c *Controller) command(name string, fn func(*fault)) {
	c.mu.Lock()
	f := c.faults[name]
	if f == nil {
		f = &fault{}
		c.faults[name] = f
	}
	fn(f)
	c.mu.Unlock()
	c.logf("%s: fault on %s/%s now %+v", c.o.Name, c.o.Namespace, name, *f)
	// Sync now, as the informer would on a write: the fault applies to
	// the next sync, not to one an event triggers later.
	c.queue.Add(c.o.Namespace + "/" + name)
}

// Stats returns what the controller did with ConfigMap name.
func (c *Controller) Stats(name string) Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.stats[name]; s != nil {
		return *s
	}
	return Stats{}
}

// Names returns the ConfigMaps the controller has synced, sorted.
func (c *Controller) Names() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.stats))
	for n := range c.stats {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (c *Controller) logf(format string, args ...any) {
	if c.o.Logf != nil {
		c.o.Logf(format, args...)
	}
}

// processNextWorkItem is KCM's worker loop: Get, sync, Forget on success,
// AddRateLimited on failure, Done.
func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	err := c.sync(ctx, key)
	if err == nil {
		c.queue.Forget(key)
		return true
	}
	c.logf("%s: sync %s failed (requeue %d): %v", c.o.Name, key, c.queue.NumRequeues(key), err)
	c.queue.AddRateLimited(key)
	return true
}

var errInjected = errors.New("injected failure")

// sync reconciles one ConfigMap: a fault first, else the synced
// annotation.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil //nolint:nilerr // a malformed key is dropped, never retried (as KCM does)
	}
	obj, exists, err := c.lister.GetByKey(key)
	if err != nil {
		return err
	}
	if !exists {
		return nil
	}
	cm := obj.(*corev1.ConfigMap)

	c.mu.Lock()
	st := c.stats[name]
	if st == nil {
		st = &Stats{}
		c.stats[name] = st
	}
	st.Syncs++
	f := c.faults[name]
	var hold time.Duration
	fail := false
	if f != nil {
		hold, f.hold = f.hold, 0
		if f.forever || f.times > 0 {
			fail = true
			if f.times > 0 {
				f.times--
			}
		}
	}
	if hold > 0 {
		st.Held++
	}
	c.mu.Unlock()

	if hold > 0 {
		t := time.NewTimer(hold)
		select {
		case <-t.C:
		case <-c.heldRelease:
			t.Stop()
		}
	}
	if fail {
		c.mu.Lock()
		now := time.Now()
		if st.FirstFailure.IsZero() {
			st.FirstFailure = now
		}
		st.LastFailure = now
		st.Failures++
		c.mu.Unlock()
		c.warn(cm, errInjected)
		return fmt.Errorf("sync %s/%s: %w", ns, name, errInjected)
	}
	if err := c.markSynced(ctx, cm); err != nil {
		return err
	}
	c.mu.Lock()
	st.LastSuccess = time.Now()
	c.mu.Unlock()
	return nil
}

// warn records the Warning Event of a failed sync, with one message, so
// that the legacy recorder counts occurrences on one Event (its key holds
// the message, tools/record events_cache.go getEventKey).
func (c *Controller) warn(cm *corev1.ConfigMap, err error) {
	switch {
	case c.legacy != nil:
		c.legacy.Eventf(cm, corev1.EventTypeWarning, ReasonSyncFailed, "Sync failed: %v", err)
	case c.events != nil:
		c.events.Eventf(cm, nil, corev1.EventTypeWarning, ReasonSyncFailed, "Sync", "Sync failed: %v", err)
	}
}

// markSynced writes the hash of the ConfigMap's data into its annotation
// when it differs: one write per data change, none when already synced
// (a controller that converges).
func (c *Controller) markSynced(ctx context.Context, cm *corev1.ConfigMap) error {
	h := sha256.New()
	keys := make([]string, 0, len(cm.Data))
	for k := range cm.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(h, "%s=%s\n", k, cm.Data[k])
	}
	sum := hex.EncodeToString(h.Sum(nil))[:16]
	if cm.Annotations[SyncedAnnotation] == sum {
		return nil
	}
	cp := cm.DeepCopy()
	if cp.Annotations == nil {
		cp.Annotations = map[string]string{}
	}
	cp.Annotations[SyncedAnnotation] = sum
	_, err := c.client.CoreV1().ConfigMaps(cm.Namespace).Update(ctx, cp, metav1.UpdateOptions{FieldManager: c.o.Name})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
