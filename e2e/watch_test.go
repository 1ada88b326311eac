package e2e

// Watch health under real faults (docs/watch.md): a cut network
// path plus an etcd compaction, and an API server restart, between the
// exporter and its API server. Every list/watch number the faults must move
// is asserted exactly, per resource, for the exporter binary and for the
// list/watch layer in-process, with WatchList on and off.

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
	"k8s.io/utils/ptr"

	"github.com/kube-convergence/kube-convergence-exporter/collectors/all"
	"github.com/kube-convergence/kube-convergence-exporter/internal/demo"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/listwatch"
	"github.com/kube-convergence/kube-convergence-exporter/internal/sandbox"
)

// uncached are the resources whose watch cache the watch sandbox turns off
// (--watch-cache-sizes=<resource>#0): their watches read etcd, so a
// compaction reaches them and a resumed watch gets 410. The other resources
// keep the cache, which holds at least the last 75 s of events
// (cacher.DefaultEventFreshDuration), so a gap of seconds resumes from it;
// an API server restart empties it, and then they get the 410. One control
// plane thus shows both faults with different, exact expectations per
// resource. A "tiny" cache is not possible on kube-apiserver 1.37: its
// --help says every non-zero --watch-cache-sizes value is equivalent, and the
// cache grows to keep 75 s of events.
//
// Events have no watch cache on any kube-apiserver unless configured:
// DefaultWatchCacheSizes sets events and events.k8s.io events to 0
// (kubernetes pkg/kubeapiserver/default_storage_factory_builder.go), so
// the Warning Events informer behaves like the uncached resources.
var uncached = map[informers.Resource]bool{informers.Deployments: true, informers.Services: true, informers.Pods: true, informers.WarningEvents: true}

// The fault stays well inside client-go's watch retry budget, so that it
// ends exactly one stream per resource: a watch request that fails with a
// reset connection is retried 10 times, 1 s apart (rest.Request.Watch,
// maxRetries 10), and then returns an empty stream that the wrapper counts as
// one more closed stream before the reflector tries again (seen on the
// sandbox: a 13 s cut ended two streams per resource).
const faultBudget = 8 * time.Second

// watchRuns numbers the fixtures, so that -count=N runs share the sandbox
// without sharing a namespace.
var watchRuns atomic.Int32

var watchSB struct {
	once sync.Once
	sb   *sandbox.Sandbox
	err  error
}

// watchSandbox returns the second control plane of the watch tests,
// starting it on first use; TestMain stops it (stopWatchSandbox). It runs
// the full control plane: rollouts through a gap need the deployment
// controller, the scheduler and kwok.
func watchSandbox(t *testing.T) *sandbox.Sandbox {
	t.Helper()
	watchSB.once.Do(func() {
		var sizes []string
		for _, r := range all.Resources() {
			if uncached[r] {
				sizes = append(sizes, r.String()+"#0")
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		begin := time.Now()
		watchSB.sb, watchSB.err = sandbox.Start(ctx, sandbox.Options{
			Stages:         sandbox.StagesGeneral,
			APIServerFlags: []string{"--watch-cache-sizes=" + strings.Join(sizes, ",")},
			Logf:           func(f string, a ...any) { fmt.Printf("watch sandbox: "+f+"\n", a...) },
		})
		if watchSB.err == nil {
			watchSB.err = watchSB.sb.CreateNode(ctx, "kwok-node-0")
		}
		fmt.Printf("watch sandbox: started in %s\n", time.Since(begin).Round(time.Millisecond))
	})
	if watchSB.err != nil {
		t.Fatalf("watch sandbox: %v", watchSB.err)
	}
	return watchSB.sb
}

func stopWatchSandbox() {
	if watchSB.sb != nil {
		_ = watchSB.sb.Stop()
	}
}

// observer is one client of the watched API server whose list/watch
// metrics the faults must move: the exporter binary or the list/watch layer
// in-process.
type observer struct {
	name      string
	watchList bool
	exp       *exporterProc // nil in-process
	in        *inProcess    // nil for the binary
}

func (o *observer) gather(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	if o.exp != nil {
		e := *o.exp // bound to t for failures, without forTest's log cleanup per call
		e.t = t
		return e.scrape()
	}
	mfs, err := o.in.reg.Gather()
	if err != nil {
		t.Fatalf("%s: gather: %v", o.name, err)
	}
	out := make(map[string]*dto.MetricFamily, len(mfs))
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// watchFixture puts every observer behind one proxy, so that one fault
// reaches all of them at once.
type watchFixture struct {
	sb        *sandbox.Sandbox
	direct    kubernetes.Interface // not through the proxy: the test's own view
	md        metadata.Interface   // the same, for generic lists
	proxy     *sandbox.Proxy
	resources []informers.Resource
	observers []*observer
	ns        string
}

func newWatchFixture(t *testing.T) *watchFixture {
	t.Helper()
	s := watchSandbox(t)
	proxy, err := s.NewProxy()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Restore) // a failed test must not leave the next one cut off
	f := &watchFixture{
		sb: s, direct: kubernetes.NewForConfigOrDie(s.AdminConfig()), md: metadata.NewForConfigOrDie(s.AdminConfig()),
		proxy: proxy, resources: all.Resources(), ns: fmt.Sprintf("watch-gap-%d", watchRuns.Add(1)),
	}
	if _, err := f.direct.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The two rollouts of the gap test exist, converged, before any
	// observer starts: the initial lists see them settled.
	for _, name := range []string{"settles", "rolls"} {
		if _, err := f.direct.AppsV1().Deployments(f.ns).Create(context.Background(), demo.Deployment(f.ns, name, 1, demo.Delays(100*time.Millisecond, 200*time.Millisecond)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"settles", "rolls"} {
		f.watchDeployment(t, name).until(60*time.Second, name+" available", deploymentAvailable(1))
	}

	// client-go's WatchListClient gate (on by default since 0.35) is read
	// from the environment by the binary and set per factory in-process.
	kubeconfig := "--kubeconfig=" + proxy.Kubeconfig("")
	f.observers = []*observer{
		{name: "exporter (WatchList)", watchList: true, exp: startExporter(t, kubeconfig)},
		{name: "exporter (LIST)", exp: startExporterEnv(t, []string{"KUBE_FEATURE_WatchListClient=false"}, kubeconfig)},
	}
	for _, o := range f.observers {
		o.exp.waitReady(60 * time.Second)
	}
	for _, watchList := range []bool{true, false} {
		o := &observer{name: map[bool]string{true: "in-process (WatchList)", false: "in-process (LIST)"}[watchList], watchList: watchList}
		o.in = startInProcess(t, o.name, proxy.Config(s.AdminConfig()), watchList, f.resources)
		f.observers = append(f.observers, o)
	}
	return f
}

// watchDeployment watches one Deployment directly: the test's own timeline.
func (f *watchFixture) watchDeployment(t *testing.T, name string) *watcher {
	t.Helper()
	w, err := f.direct.AppsV1().Deployments(f.ns).Watch(context.Background(), metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return &watcher{t: t, w: w, ch: w.ResultChan()}
}

// inProcess is an informers.Factory as the exporter builds it, over the
// proxied config, with the list/watch metrics on its own registry and a tap
// under them that records what the server really sent.
type inProcess struct {
	reg     *prometheus.Registry
	factory *informers.Factory
	tap     *tap
}

func startInProcess(t *testing.T, name string, cfg *rest.Config, watchList bool, resources []informers.Resource) *inProcess {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = "application/vnd.kubernetes.protobuf" // as the exporter (cmd/.../main.go)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	in := &inProcess{reg: prometheus.NewRegistry(), tap: newTap()}
	in.factory = informers.New(kubernetes.NewForConfigOrDie(cfg), in.tap.under(listwatch.NewMetrics(in.reg)), slog.New(slog.DiscardHandler))
	// A reflector reads the WatchListClient gate once, when the informer
	// creates it at Run (reflector.go: useWatchList). Set the gate only
	// until this factory's informers have synced, in a subtest that scopes
	// it.
	t.Run("start "+name, func(t *testing.T) {
		clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, watchList)
		var synced []cache.InformerSynced
		for _, r := range resources {
			inf, err := in.factory.Informer(r)
			if err != nil {
				t.Fatal(err)
			}
			synced = append(synced, inf.HasSynced)
		}
		in.factory.Start(ctx)
		wait, stop := context.WithTimeout(ctx, 30*time.Second)
		defer stop()
		if !cache.WaitForCacheSync(wait.Done(), synced...) {
			t.Fatal("in-process informers did not sync within 30 s")
		}
	})
	return in
}

// tap counts, per resource, what the API server answered below listwatch's
// wrapper: full LISTs, WatchList requests and every event by type. It is the
// test's own truth for the wrapper's numbers.
type tap struct {
	mu         sync.Mutex
	counts     map[string]int       // "resource what" -> count
	lastStream map[string]time.Time // resource -> when its newest stream opened
}

func newTap() *tap { return &tap{counts: map[string]int{}, lastStream: map[string]time.Time{}} }

func (tp *tap) add(resource, what string) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.counts[resource+" "+what]++
	if what == "stream" {
		tp.lastStream[resource] = time.Now()
	}
}

func (tp *tap) get(resource, what string) int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.counts[resource+" "+what]
}

// newestStream is when the most recent watch stream of any resource opened.
func (tp *tap) newestStream() time.Time {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	var newest time.Time
	for _, at := range tp.lastStream {
		if at.After(newest) {
			newest = at
		}
	}
	return newest
}

// under returns a Wrapper that puts the tap under m's wrapper.
func (tp *tap) under(m *listwatch.Metrics) informers.Wrapper {
	return func(resource string, lw cache.ListerWatcher) cache.ListerWatcher {
		return m.Wrap(resource, &tappedLW{tap: tp, resource: resource, inner: lw, ctxLW: cache.ToListerWatcherWithContext(lw)})
	}
}

type tappedLW struct {
	tap      *tap
	resource string
	inner    cache.ListerWatcher
	ctxLW    cache.ListerWatcherWithContext
}

// IsWatchListSemanticsUnSupported passes the inner answer on, as listwatch's
// wrapper does: without it the reflector would not try WatchList.
func (l *tappedLW) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(l.inner)
}

func (l *tappedLW) List(opts metav1.ListOptions) (runtime.Object, error) {
	return l.ListWithContext(context.Background(), opts)
}

func (l *tappedLW) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return l.WatchWithContext(context.Background(), opts)
}

func (l *tappedLW) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	obj, err := l.ctxLW.ListWithContext(ctx, opts)
	if err == nil && opts.Continue == "" {
		l.tap.add(l.resource, "list")
	}
	return obj, err
}

func (l *tappedLW) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := l.ctxLW.WatchWithContext(ctx, opts)
	if err != nil {
		return w, err
	}
	l.tap.add(l.resource, "stream")
	if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
		l.tap.add(l.resource, "watchlist")
	}
	return watch.Filter(w, func(ev watch.Event) (watch.Event, bool) {
		l.tap.add(l.resource, string(ev.Type))
		return ev, true
	}), nil
}

// watchCounts reads every list/watch counter of mfs, keyed like
// "relists{pods,expired}", plus the delivery-lag histogram's count and sum.
func watchCounts(mfs map[string]*dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for name, short := range map[string]string{
		"kube_convergence_watch_relists_total":        "relists",
		"kube_convergence_watch_restarts_total":       "restarts",
		"kube_convergence_watch_bookmarks_total":      "bookmarks",
		"kube_convergence_watch_events_total":         "events",
		"kube_convergence_watch_delivery_lag_seconds": "lag",
	} {
		mf := mfs[name]
		if mf == nil {
			continue
		}
		for _, m := range mf.Metric {
			var labels []string
			for _, l := range m.Label { // resource first, then reason or type
				if l.GetName() == "resource" {
					labels = append([]string{l.GetValue()}, labels...)
				} else {
					labels = append(labels, l.GetValue())
				}
			}
			key := short + "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.Counter != nil:
				out[key] = m.Counter.GetValue()
			case m.Histogram != nil:
				out[key] = float64(m.Histogram.GetSampleCount())
				out["lag_sum{"+strings.Join(labels, ",")+"}"] = m.Histogram.GetSampleSum()
			}
		}
	}
	return out
}

func counterKey(metric string, r informers.Resource, label string) string {
	if label == "" {
		return metric + "{" + r.String() + "}"
	}
	return metric + "{" + r.String() + "," + label + "}"
}

// checkDeltas compares after-before with want and reports every mismatch
// at once, as a table.
func checkDeltas(t *testing.T, who string, before, after, want map[string]float64) {
	t.Helper()
	var bad []string
	for k, w := range want {
		if got := after[k] - before[k]; got != w {
			bad = append(bad, fmt.Sprintf("  %-48s +%v, want +%v", k, got, w))
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Errorf("%s: %d list/watch counters moved wrongly:\n%s", who, len(bad), strings.Join(bad, "\n"))
	}
}

// readiness polls every exporter's /readyz every 100 ms until stopped and
// keeps every answer that was not 200.
type readiness struct {
	stop  chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	polls int
	bad   []string
}

func pollReadiness(exps []*exporterProc) *readiness {
	r := &readiness{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			for _, e := range exps {
				code, body, err := e.get("/readyz")
				r.mu.Lock()
				r.polls++
				if err != nil || code != http.StatusOK {
					r.bad = append(r.bad, fmt.Sprintf("%s %s: code %d err %v %s", time.Now().Format("15:04:05.000"), e.url, code, err, body))
				}
				r.mu.Unlock()
			}
			select {
			case <-r.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return r
}

// check stops polling and fails t if an exporter was ever not ready.
func (r *readiness) check(t *testing.T) {
	t.Helper()
	close(r.stop)
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bad) > 0 {
		t.Errorf("/readyz was not 200 in %d of %d polls during the fault:\n%s", len(r.bad), r.polls, strings.Join(r.bad, "\n"))
	}
	t.Logf("/readyz: 200 in all %d polls during the fault", r.polls)
}

func (f *watchFixture) exporters() []*exporterProc {
	var out []*exporterProc
	for _, o := range f.observers {
		if o.exp != nil {
			out = append(out, o.exp)
		}
	}
	return out
}

func (f *watchFixture) snapshot(t *testing.T) map[*observer]map[string]float64 {
	t.Helper()
	out := map[*observer]map[string]float64{}
	for _, o := range f.observers {
		out[o] = watchCounts(o.gather(t))
	}
	return out
}

// waitWatchesSettled waits until every watch stream of the in-process
// observers has been open for over 1.5 s. client-go's reflector treats a
// stream that ends within 1 s with no event as a failure
// (VeryShortWatchError) and relists with reason error, which would change
// what a fault right after a relist counts. The binaries' streams opened
// within the same second: they went through the same fault and proxy.
func (f *watchFixture) waitWatchesSettled(t *testing.T) {
	t.Helper()
	eventually(t, 10*time.Second, "every watch stream open for 1.5 s", func() (bool, string) {
		var newest time.Time
		for _, o := range f.observers {
			if o.in != nil {
				if at := o.in.tap.newestStream(); at.After(newest) {
					newest = at
				}
			}
		}
		return time.Since(newest) > 1500*time.Millisecond, "newest stream opened at " + newest.Format("15:04:05.000")
	})
}

// waitRelists waits until every observer counts want more relists with
// reason for each resource in rs than before.
func (f *watchFixture) waitRelists(t *testing.T, before map[*observer]map[string]float64, rs []informers.Resource, reason string, want float64) {
	t.Helper()
	for _, o := range f.observers {
		eventually(t, 30*time.Second, o.name+": "+reason+" relists", func() (bool, string) {
			now := watchCounts(o.gather(t))
			var missing []string
			for _, r := range rs {
				k := counterKey("relists", r, reason)
				if now[k]-before[o][k] < want {
					missing = append(missing, fmt.Sprintf("%s +%v", r, now[k]-before[o][k]))
				}
			}
			return len(missing) == 0, strings.Join(missing, ", ")
		})
	}
}

// sameView reports whether the informer's store holds exactly what the API
// server lists now, object by object: UID and resourceVersion.
func (f *watchFixture) sameView(ctx context.Context, in *inProcess, r informers.Resource) (bool, string) {
	inf, err := in.factory.Informer(r)
	if err != nil {
		return false, err.Error()
	}
	var opts metav1.ListOptions
	if r == informers.WarningEvents {
		opts.FieldSelector = informers.WarningSelector // the informer's own selector
	}
	list, err := f.md.Resource(schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource}).List(ctx, opts)
	if err != nil {
		return false, err.Error()
	}
	want := make(map[types.UID]string, len(list.Items))
	names := map[types.UID]string{}
	for i := range list.Items {
		o := &list.Items[i]
		want[o.UID], names[o.UID] = o.ResourceVersion, o.Namespace+"/"+o.Name
	}
	got := map[types.UID]string{}
	for _, obj := range inf.GetStore().List() {
		if m, err := meta.Accessor(obj); err == nil {
			got[m.GetUID()] = m.GetResourceVersion()
			names[m.GetUID()] = m.GetNamespace() + "/" + m.GetName()
		}
	}
	var diff []string
	for uid, rv := range want {
		if g, ok := got[uid]; !ok {
			diff = append(diff, "missing "+names[uid])
		} else if g != rv {
			diff = append(diff, fmt.Sprintf("%s at rv %s, server %s", names[uid], g, rv))
		}
	}
	for uid := range got {
		if _, ok := want[uid]; !ok {
			diff = append(diff, "extra "+names[uid])
		}
	}
	sort.Strings(diff)
	return len(diff) == 0, fmt.Sprintf("%s: %d objects listed, %d cached; %s", r, len(want), len(got), strings.Join(diff, "; "))
}

// checkViews waits until every in-process store equals the server's list,
// for every resource: after a relist, the informer's view is the server's.
func (f *watchFixture) checkViews(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for _, o := range f.observers {
		if o.in == nil {
			continue
		}
		for _, r := range f.resources {
			// Objects keep changing (kwok's node heartbeats, pod status):
			// equal at some moment, within the deadline, is the claim.
			eventually(t, 15*time.Second, o.name+": cache equals the server's list for "+r.String(), func() (bool, string) {
				return f.sameView(ctx, o.in, r)
			})
		}
	}
}

// checkTap compares each in-process observer's bookmark and event counters
// with what its tap saw the server send, over the whole test so far.
func (f *watchFixture) checkTap(t *testing.T) {
	t.Helper()
	for _, o := range f.observers {
		if o.in == nil {
			continue
		}
		now := watchCounts(o.gather(t))
		var sent []string
		for _, r := range f.resources {
			sent = append(sent, fmt.Sprintf("%s %d", r, o.in.tap.get(r.String(), string(watch.Bookmark))))
		}
		t.Logf("%s: bookmarks the server sent: %s", o.name, strings.Join(sent, ", "))
		for _, r := range f.resources {
			if got, sent := now[counterKey("bookmarks", r, "")], o.in.tap.get(r.String(), string(watch.Bookmark)); got != float64(sent) {
				t.Errorf("%s: bookmarks{%s} = %v, the server sent %d", o.name, r, got, sent)
			}
			for _, typ := range []watch.EventType{watch.Added, watch.Modified, watch.Deleted} {
				k := counterKey("events", r, strings.ToLower(string(typ)))
				if got, sent := now[k], o.in.tap.get(r.String(), string(typ)); got != float64(sent) {
					t.Errorf("%s: %s = %v, the server sent %d", o.name, k, got, sent)
				}
			}
		}
	}
}

// TestWatchFaults runs the faults in order on one set of observers; each
// subtest asserts deltas from its own start.
func TestWatchFaults(t *testing.T) {
	begin := time.Now()
	f := newWatchFixture(t)
	t.Logf("fixture ready in %s: %d observers", time.Since(begin).Round(time.Millisecond), len(f.observers))
	t.Run("compaction gap", f.testCompactionGap)
	t.Run("apiserver restart", f.testAPIServerRestart)
	f.checkTap(t)
	t.Logf("total %s", time.Since(begin).Round(time.Millisecond))
}

// testCompactionGap cuts every observer off, changes objects, compacts
// etcd and restores: each uncached resource relists once with reason
// expired, the others resume from the watch cache; the views equal the
// server's; rollouts that changed in the gap are neither invented nor
// double-counted.
func (f *watchFixture) testCompactionGap(t *testing.T) {
	ctx := context.Background()
	settles, rolls := f.watchDeployment(t, "settles"), f.watchDeployment(t, "rolls")
	f.waitWatchesSettled(t)
	before := f.snapshot(t)
	ready := pollReadiness(f.exporters())

	f.proxy.Cut()
	cutAt := time.Now()
	// settles: a new template with fast pods, converged before the restore.
	setTemplate(t, f.direct, f.ns, "settles", "registry.example/app:v2", demo.Delays(100*time.Millisecond, 200*time.Millisecond))
	// rolls: a new template whose pod is Ready 11 s after creation, so it is
	// still rolling when the observers relist (restore + 1-3 s).
	rollsV2 := setTemplate(t, f.direct, f.ns, "rolls", "registry.example/app:v2", demo.Delays(time.Second, 10*time.Second))
	if _, err := f.direct.CoreV1().Services(f.ns).Create(ctx, watchService("during-gap"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	settles.until(faultBudget, "settles generation 2 available during the cut", deploymentAvailable(2))
	rev, err := f.sb.CompactEtcd(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cut := time.Since(cutAt)
	if cut > faultBudget {
		t.Fatalf("the cut lasted %s, over the %s budget: the resumed watches would not see the 410", cut, faultBudget)
	}
	f.proxy.Restore()
	restoredAt := time.Now()
	t.Logf("cut for %s; etcd compacted at revision %d", cut.Round(time.Millisecond), rev)

	var uncachedRs []informers.Resource
	for _, r := range f.resources {
		if uncached[r] {
			uncachedRs = append(uncachedRs, r)
		}
	}
	f.waitRelists(t, before, uncachedRs, "expired", 1)
	t.Logf("every observer relisted %d uncached resources %s after the restore", len(uncachedRs), time.Since(restoredAt).Round(time.Millisecond))
	if d, err := f.direct.AppsV1().Deployments(f.ns).Get(ctx, "rolls", metav1.GetOptions{}); err != nil || deploymentAvailable(2)(d) {
		t.Fatalf("rolls converged before every observer relisted (err %v): this machine is too slow for the test's 11 s pod", err)
	}
	f.checkViews(t)
	after := f.snapshot(t)
	ready.check(t)

	deployments, err := f.direct.AppsV1().Deployments("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range f.observers {
		want := map[string]float64{}
		for _, r := range f.resources {
			n := map[bool]float64{true: 1, false: 0}[uncached[r]]
			want[counterKey("relists", r, "initial")] = 0
			want[counterKey("relists", r, "expired")] = n // exactly one cycle per resource the compaction reached
			want[counterKey("relists", r, "error")] = 0
			want[counterKey("restarts", r, "closed")] = 1 // the cut
			want[counterKey("restarts", r, "expired")] = n
			want[counterKey("restarts", r, "error")] = 0
			want[counterKey("restarts", r, "timeout")] = 0
		}
		// The stream path, at metric level: a WatchList relist ends with
		// the initial-events-end bookmark and delivers every object as an
		// ADDED event; a LIST relist moves neither. etcd-direct watches get
		// no other bookmark, and no Deployment was created live.
		for _, r := range uncachedRs {
			want[counterKey("bookmarks", r, "")] = map[bool]float64{true: 1, false: 0}[o.watchList]
		}
		want[counterKey("events", informers.Deployments, "added")] = map[bool]float64{true: float64(len(deployments.Items)), false: 0}[o.watchList]
		// The Service created in the gap came by the relist: no delivery
		// lag observed for it.
		want[counterKey("lag", informers.Services, "")] = 0
		checkDeltas(t, o.name, before[o], after[o], want)
		t.Logf("%s: relist took %.3fs (initial_sync_duration_seconds{deployments.apps})", o.name, gaugeValue(o.gather(t), "kube_convergence_watch_initial_sync_duration_seconds", informers.Deployments))
	}
	for _, o := range f.observers {
		if o.in == nil {
			continue
		}
		// The tap's view of the same relist: streams only, or LISTs only.
		for _, r := range uncachedRs {
			lists, streams := o.in.tap.get(r.String(), "list"), o.in.tap.get(r.String(), "watchlist")
			if o.watchList && (lists != 0 || streams != 2) || !o.watchList && (lists != 2 || streams != 0) {
				t.Errorf("%s: %s: %d LIST and %d WatchList requests since start, want %s", o.name, r, lists, streams,
					map[bool]string{true: "0 and 2", false: "2 and 0"}[o.watchList])
			}
		}
	}

	// A live write after the gap: one delivery-lag observation each, within
	// one-second precision.
	if _, err := f.direct.CoreV1().Services(f.ns).Create(ctx, watchService("after-gap"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, o := range f.observers {
		eventually(t, 10*time.Second, o.name+": delivery lag of the live Service", func() (bool, string) {
			now := watchCounts(o.gather(t))
			n := now[counterKey("lag", informers.Services, "")] - after[o][counterKey("lag", informers.Services, "")]
			sum := now["lag_sum{services}"] - after[o]["lag_sum{services}"]
			if n == 1 {
				t.Logf("%s: delivery lag of a live write estimated at %.3fs", o.name, sum)
				if sum < 0 || sum > 1.5 {
					t.Errorf("%s: delivery lag %.3fs for a live write, want 0-1.5 s (1 s precision)", o.name, sum)
				}
			}
			return n == 1, fmt.Sprintf("+%v observations", n)
		})
	}

	f.checkGapRollouts(t, rolls, rollsV2)
}

// checkGapRollouts: settles (written and converged in the gap) is
// invisible; rolls (written in the gap, converging after it) is one
// recovered episode whose remaining stage is timed from its API-side write.
func (f *watchFixture) checkGapRollouts(t *testing.T, rolls *watcher, rollsV2 *appsv1.Deployment) {
	t.Helper()
	written, err := specWriteTime(rollsV2)
	if err != nil {
		t.Fatal(err)
	}
	availableAt := rolls.until(60*time.Second, "rolls generation 2 available", deploymentAvailable(2))
	truth := availableAt.Sub(written).Seconds()
	labels := map[string]string{"kind": "Deployment", "namespace": f.ns, "change": "template"}
	for _, o := range f.observers {
		if o.exp == nil {
			continue // the rollouts collector runs in the binary
		}
		e := o.exp.forTest(t)
		got := recoveredStageSeconds(t, e, 1, with(labels, "stage", "available"))
		t.Logf("%s: rolls available %.3fs after its API-side write (test's watch: %.3fs)", o.name, got, truth)
		if !within(got, truth, measureTolerance) {
			t.Errorf("%s: recovered rolls available = %.3fs, want %.3fs from the API-side write", o.name, got, truth)
		}
		mfs := e.scrape()
		if _, n := histogram(mfs, "kube_convergence_rollout_recovered_duration_seconds", labels); n != 1 {
			t.Errorf("%s: %d recovered template-change stage observations in %s, want 1 (rolls' available; nothing for stages passed in the gap, nothing for settles)", o.name, n, f.ns)
		}
		if _, n := histogram(mfs, "kube_convergence_rollout_duration_seconds", labels); n != 0 {
			t.Errorf("%s: %d live template-change stage observations in %s, want 0 (rolls is recovered)", o.name, n, f.ns)
		}
		if v, _ := value(mfs, "kube_convergence_rollouts_recovered_total", map[string]string{"kind": "Deployment"}); v != 1 {
			t.Errorf("%s: rollouts_recovered_total{Deployment} = %v, want 1 (rolls only)", o.name, v)
		}
		if v, _ := value(mfs, "kube_convergence_rollouts_total", with(labels, "outcome", "converged")); v != 1 {
			t.Errorf("%s: converged template rollouts = %v, want 1 (rolls; settles is invisible)", o.name, v)
		}
	}
}

// testAPIServerRestart restarts kube-apiserver under the observers: every
// stream ends (closed); the resumed watches of cached resources land on the
// new, empty watch cache, which starts at the current revision, and get 410
// (one expired relist each); uncached ones resume from etcd.
func (f *watchFixture) testAPIServerRestart(t *testing.T) {
	f.waitWatchesSettled(t)
	before := f.snapshot(t)
	ready := pollReadiness(f.exporters())
	begin := time.Now()
	if err := f.sb.RestartAPIServer(context.Background()); err != nil {
		t.Fatal(err)
	}
	took := time.Since(begin)
	if took > faultBudget {
		t.Fatalf("the restart took %s, over the %s budget", took, faultBudget)
	}
	t.Logf("kube-apiserver restarted in %s", took.Round(time.Millisecond))
	var cachedRs []informers.Resource
	for _, r := range f.resources {
		if !uncached[r] {
			cachedRs = append(cachedRs, r)
		}
	}
	f.waitRelists(t, before, cachedRs, "expired", 1)
	t.Logf("every observer relisted %d cached resources %s after the restart", len(cachedRs), time.Since(begin).Round(time.Millisecond))
	f.checkViews(t)
	after := f.snapshot(t)
	ready.check(t)
	for _, o := range f.observers {
		want := map[string]float64{}
		for _, r := range f.resources {
			n := map[bool]float64{true: 0, false: 1}[uncached[r]]
			want[counterKey("relists", r, "initial")] = 0
			want[counterKey("relists", r, "expired")] = n
			want[counterKey("relists", r, "error")] = 0
			want[counterKey("restarts", r, "closed")] = 1 // the old server's streams
			want[counterKey("restarts", r, "expired")] = n
			want[counterKey("restarts", r, "error")] = 0
		}
		checkDeltas(t, o.name, before[o], after[o], want)
		if o.watchList {
			// Each stream relist ends with the new cache's
			// initial-events-end bookmark (periodic ones may add to it).
			for _, r := range cachedRs {
				if d := after[o][counterKey("bookmarks", r, "")] - before[o][counterKey("bookmarks", r, "")]; d < 1 {
					t.Errorf("%s: bookmarks{%s} +%v after a stream relist, want at least +1", o.name, r, d)
				}
			}
		}
	}
}

// TestWatchTimeoutCounted: a watch that the server closes at its requested
// timeoutSeconds counts as restarts{reason="timeout"}, on the watch cache
// and on etcd alike. (The reflector asks for 5-10 min; 2 s keeps it short.)
func TestWatchTimeoutCounted(t *testing.T) {
	s := watchSandbox(t)
	c := kubernetes.NewForConfigOrDie(s.AdminConfig())
	reg := prometheus.NewRegistry()
	m := listwatch.NewMetrics(reg)
	for _, r := range []informers.Resource{informers.Nodes, informers.Services} {
		watchFn := map[informers.Resource]func(context.Context, metav1.ListOptions) (watch.Interface, error){
			informers.Nodes:    c.CoreV1().Nodes().Watch,
			informers.Services: c.CoreV1().Services("").Watch,
		}[r]
		lw := m.Wrap(r.String(), &cache.ListWatch{WatchFuncWithContext: watchFn}).(cache.ListerWatcherWithContext)
		start := time.Now()
		w, err := lw.WatchWithContext(context.Background(), metav1.ListOptions{AllowWatchBookmarks: true, TimeoutSeconds: ptr.To[int64](2)})
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.After(10 * time.Second)
	drain:
		for {
			select {
			case _, ok := <-w.ResultChan():
				if !ok {
					break drain
				}
			case <-deadline:
				t.Fatalf("%s: watch with timeoutSeconds=2 still open after 10 s", r)
			}
		}
		w.Stop()
		t.Logf("%s (%s): closed by the server after %s", r, map[bool]string{true: "etcd", false: "watch cache"}[uncached[r]], time.Since(start).Round(time.Millisecond))
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		byName := map[string]*dto.MetricFamily{}
		for _, mf := range mfs {
			byName[mf.GetName()] = mf
		}
		counts := watchCounts(byName)
		for reason, want := range map[string]float64{"timeout": 1, "closed": 0, "error": 0, "expired": 0} {
			if got := counts[counterKey("restarts", r, reason)]; got != want {
				t.Errorf("%s: restarts{%s} = %v, want %v", r, reason, got, want)
			}
		}
	}
}

// specWriteTime is the API-side time of the last spec write, as the
// exporter reads it (informers.Compact): one-second precision.
func specWriteTime(d *appsv1.Deployment) (time.Time, error) {
	c, err := informers.Compact(d.DeepCopy())
	if err != nil {
		return time.Time{}, err
	}
	return time.Parse(time.RFC3339, c.(*appsv1.Deployment).Annotations[informers.AnnotationSpecWriteTime])
}

// watchService selects no pod: a Service object to change, not a backend.
func watchService(name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "nothing"}, Ports: []corev1.ServicePort{{Port: 80}}},
	}
}

func gaugeValue(mfs map[string]*dto.MetricFamily, name string, r informers.Resource) float64 {
	v, _ := value(mfs, name, map[string]string{"resource": r.String()})
	return v
}
