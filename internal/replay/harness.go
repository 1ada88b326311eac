package replay

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kube-convergence/kube-convergence-exporter/collectors"
	"github.com/kube-convergence/kube-convergence-exporter/collectors/all"
	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
	timelineweb "github.com/kube-convergence/kube-convergence-exporter/internal/timeline/web"
)

// Options configure a Harness.
type Options struct {
	// Config is the exporter's configuration; nil: config.Default(). The
	// two parts that send requests of their own are always off: admission
	// probes (dry-run writes) and the webhooks collector's reader of the
	// API server's /metrics.
	Config *config.Config
	// StallThreshold is --stall.threshold; 0: the default.
	StallThreshold time.Duration
	// Logger receives the collectors' logs; nil: discarded.
	Logger *slog.Logger
}

// Harness runs every collector of the exporter over replay informers,
// with a fake clock, and answers what the exporter would: the /metrics
// exposition and the timeline API.
type Harness struct {
	o         Options
	cfg       *config.Config
	resources Resources
	logger    *slog.Logger

	clock     *testingclock.FakeClock
	factory   *informers.Factory
	reg       *prometheus.Registry
	timelines *timeline.Store
	mux       *http.ServeMux
	cancel    context.CancelFunc
	started   bool

	mu        sync.Mutex // guards the fields below: newInformer runs inside handlers
	informers map[informers.Resource][]*Informer
	fresh     []*Informer // made after their resource was listed: owed an initial list
	current   Line        // being delivered
	anomalies map[string]int
	logged    map[string]bool

	// Per resource (unversioned): the API server's state as the recording
	// shows it (the last list plus the events since), which a replay
	// informer made after the resource was listed lists; and the items of
	// its open list cycle.
	server  map[informers.Resource]map[string]received
	listed  map[informers.Resource]bool
	pending map[informers.Resource][]received
}

// New returns a harness; Play starts the collectors at the recording's
// first receive time.
func New(o Options) *Harness {
	cfg := o.Config
	if cfg == nil {
		cfg = config.Default()
	}
	cfg = offline(cfg)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	var custom []informers.Resource
	for _, r := range cfg.Resources {
		custom = append(custom, informers.Resource{Group: r.Group, Version: r.Version, Resource: r.Resource})
	}
	return &Harness{
		o: o, cfg: cfg, logger: o.Logger,
		resources: NewResources(custom...),
		informers: map[informers.Resource][]*Informer{},
		server:    map[informers.Resource]map[string]received{},
		listed:    map[informers.Resource]bool{},
		pending:   map[informers.Resource][]received{},
		anomalies: map[string]int{},
		logged:    map[string]bool{},
	}
}

// offline returns cfg without what sends requests: the harness has no API
// server.
func offline(cfg *config.Config) *config.Config {
	c := *cfg
	c.Collectors = maps.Clone(cfg.Collectors)
	if c.Collectors == nil {
		c.Collectors = map[string]config.CollectorConfig{}
	}
	off := false
	c.Collectors[config.AdmissionProbes] = config.CollectorConfig{Enabled: &off}
	c.AdmissionProbes = nil
	c.Webhooks.APIServerMetrics.Enabled = false
	return &c
}

// Resources are the resource names a recording played by h may use.
func (h *Harness) Resources() Resources { return h.resources }

// Now is the harness's clock.
func (h *Harness) Now() time.Time { return h.clock.Now() }

// Registry is the registry of the collectors and the informer factory.
func (h *Harness) Registry() *prometheus.Registry { return h.reg }

// start builds and starts the collectors at t.
func (h *Harness) start(t time.Time) error {
	h.clock = testingclock.NewFakeClock(t)
	h.factory = informers.New(nil, nil, h.logger)
	// Never called: the manual factory builds no list/watch. It only has
	// to exist for the factory to make custom-resource informers.
	h.factory.SetDynamic(dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()))
	h.factory.Manual(h.newInformer)
	h.timelines = timeline.NewStore(timeline.Config{})
	h.reg = prometheus.NewRegistry()
	if err := h.factory.Register(h.reg); err != nil {
		return err
	}
	var enabled []collectors.Collector
	for _, c := range all.Collectors(all.Options{
		Config: h.cfg, StallThreshold: h.o.StallThreshold, Logger: h.logger, Now: h.clock.Now, Timelines: h.timelines,
	}) {
		if h.cfg.Enabled(c.Name()) {
			enabled = append(enabled, c)
		}
	}
	for _, c := range enabled {
		if err := c.Register(h.reg); err != nil {
			return fmt.Errorf("collector %s: register: %w", c.Name(), err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	for _, c := range enabled {
		if err := c.Start(ctx, h.factory); err != nil {
			return fmt.Errorf("collector %s: start: %w", c.Name(), err)
		}
	}
	h.factory.Start(ctx)
	h.mux = http.NewServeMux()
	web := timelineweb.Options{Source: h.timelines, Now: h.clock.Now}
	for _, r := range h.cfg.Resources {
		web.CustomResources = append(web.CustomResources, r.String())
	}
	timelineweb.Register(h.mux, web)
	h.started = true
	return nil
}

// Close stops the collectors' goroutines.
func (h *Harness) Close() {
	if h.cancel != nil {
		h.cancel()
	}
}

// newInformer is the manual factory's informer constructor.
func (h *Harness) newInformer(r informers.Resource, example any, indexers cache.Indexers) cache.SharedIndexInformer {
	inf := NewInformer(r, example, indexers)
	inf.anomaly = func(kind, key string) { h.anomaly(r, kind, key) }
	u := unversioned(r)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.informers[u] = append(h.informers[u], inf)
	if h.listed[u] {
		h.fresh = append(h.fresh, inf)
	}
	return inf
}

// anomaly counts what the recording handed an informer that a client-go
// informer could not, and logs it once per kind and resource.
func (h *Harness) anomaly(r informers.Resource, kind, key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.anomalies[kind]++
	once := kind + "\x00" + r.String()
	if h.logged[once] {
		return
	}
	h.logged[once] = true
	h.logger.Warn("the recording hands an informer what client-go could not; delivered anyway, further ones counted only",
		"anomaly", kind, "resource", r.String(), "key", key, "line", h.current.N)
}

// Anomalies counts, by kind (AnomalyDelete, AnomalyTombstone,
// AnomalyUpdate), what the recordings played handed the informers that a
// client-go informer could not: synthetic bad input.
func (h *Harness) Anomalies() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.anomalies)
}

func unversioned(r informers.Resource) informers.Resource {
	return informers.Resource{Group: r.Group, Resource: r.Resource}
}

// Play feeds rec into the collectors, line by line, with the clock at each
// line's receive time; the collectors' periodic work (Factory.Tick) runs at
// every whole second in between and once at the end. The collectors start
// at the first line's time, on the first Play.
func (h *Harness) Play(rec *Recording) error {
	if len(rec.Lines) == 0 {
		return nil
	}
	if !h.started {
		if err := h.start(rec.Start()); err != nil {
			return err
		}
	}
	for _, l := range rec.Lines {
		h.advance(l.At)
		if err := h.line(l); err != nil {
			return &LineError{File: rec.Name, Line: l.N, Err: err}
		}
	}
	h.advance(rec.End())
	h.factory.Tick()
	return h.unlisted(rec)
}

// unlisted fails a recording that never lists a resource a collector
// watches: the collector's handlers would never attach, and the replay
// would quietly measure nothing of it (a recording older than the
// resource's collector: record it again, or add an empty list-end line).
func (h *Harness) unlisted(rec *Recording) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	var missing []string
	for r, infs := range h.informers {
		for _, inf := range infs {
			if !inf.HasSynced() && !inf.IsStopped() {
				missing = append(missing, r.String())
				break
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	slices.Sort(missing)
	return fmt.Errorf("%s: never lists %s, which the collectors watch", rec.Name, strings.Join(missing, ", "))
}

// advance moves the clock to t, ticking at every whole second on the way.
// The clock never goes back: lines of different resources may come a
// little out of receive order (a LIST's items are stamped when the response
// arrived, delivered when the reflector replaced its store).
func (h *Harness) advance(t time.Time) {
	now := h.clock.Now()
	for s := now.Truncate(time.Second).Add(time.Second); !s.After(t); s = s.Add(time.Second) {
		h.clock.SetTime(s)
		h.factory.Tick()
	}
	if t.After(h.clock.Now()) {
		h.clock.SetTime(t)
	}
}

// line delivers one line to every informer of its resource, then the
// initial lists owed to informers made meanwhile, then attaches the
// watches whose informers synced. A collector's panic is returned as an
// error with its stack.
func (h *Harness) line(l Line) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic while delivering a %s line of %s: %v\n%s", l.Type, l.Resource, p, debug.Stack())
		}
	}()
	h.mu.Lock()
	h.current = l
	h.mu.Unlock()
	if err := h.deliver(l); err != nil {
		return err
	}
	if err := h.listFresh(l.At); err != nil {
		return err
	}
	return h.factory.AttachSynced()
}

func (h *Harness) deliver(l Line) error {
	u := unversioned(l.Resource)
	h.mu.Lock()
	infs := slices.Clone(h.informers[u])
	server := h.server[u]
	if server == nil {
		server = map[string]received{}
		h.server[u] = server
	}
	h.mu.Unlock()
	switch l.Type {
	case typeNote, typeEnd:
		return nil
	case typeList:
		h.mu.Lock()
		h.pending[u] = append(h.pending[u], received{l.Object, l.At})
		h.mu.Unlock()
		return nil
	case typeListEnd:
		h.mu.Lock()
		items := h.pending[u]
		delete(h.pending, u)
		clear(server)
		for _, it := range items {
			server[keyOf(it.obj)] = it
		}
		h.listed[u] = true
		h.mu.Unlock()
		for _, inf := range infs {
			if err := inf.list(copies(items)); err != nil {
				return err
			}
		}
		return nil
	case typeTombstone:
		h.mu.Lock()
		delete(server, l.Key)
		h.mu.Unlock()
		for _, inf := range infs {
			if err := inf.tombstone(l.Key, deepCopy(l.Object), l.At); err != nil {
				return err
			}
		}
		return nil
	}
	h.mu.Lock()
	if l.Type == typeDeleted {
		delete(server, keyOf(l.Object))
	} else {
		server[keyOf(l.Object)] = received{l.Object, l.At}
	}
	h.mu.Unlock()
	for _, inf := range infs {
		var err error
		if l.Old != nil {
			err = inf.update(deepCopy(l.Old), deepCopy(l.Object), l.At, l.Live)
		} else {
			err = inf.event(l.Type, deepCopy(l.Object), l.At, l.Live)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// listFresh lists, at t, what the API server holds for every informer made
// after its resource was listed (a custom resource's, made when its CRD
// came): the informer starts, lists and syncs.
func (h *Harness) listFresh(t time.Time) error {
	for {
		h.mu.Lock()
		fresh := h.fresh
		h.fresh = nil
		h.mu.Unlock()
		if len(fresh) == 0 {
			return nil
		}
		for _, inf := range fresh {
			h.mu.Lock()
			server := h.server[unversioned(inf.Resource())]
			items := make([]received, 0, len(server))
			for _, k := range slices.Sorted(maps.Keys(server)) {
				items = append(items, received{server[k].obj, t})
			}
			h.mu.Unlock()
			if err := inf.list(copies(items)); err != nil {
				return err
			}
		}
	}
}

func keyOf(obj runtime.Object) string {
	k, _ := cache.MetaNamespaceKeyFunc(obj)
	return k
}

func deepCopy(obj runtime.Object) runtime.Object {
	if obj == nil {
		return nil
	}
	return obj.DeepCopyObject()
}

func copies(items []received) []received {
	out := make([]received, len(items))
	for i, it := range items {
		out[i] = received{deepCopy(it.obj), it.at}
	}
	return out
}

// Volatile are the metric families an exposition leaves out: they measure
// the replay's own speed, not the recording (handler lag is the wall time
// a handler took, against receive times of the fake clock).
var Volatile = []string{"kube_convergence_handler_lag_seconds"}

// Exposition is the /metrics text exposition of every collector and of
// the informer factory, without the Volatile families.
func (h *Harness) Exposition() (string, error) {
	mfs, err := h.reg.Gather()
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if slices.Contains(Volatile, mf.GetName()) {
			continue
		}
		if err := enc.Encode(mf); err != nil {
			return "", err
		}
	}
	return b.String(), nil
}

// Gather returns the metric families by name (Volatile ones included).
func (h *Harness) Gather() (map[string]*dto.MetricFamily, error) {
	mfs, err := h.reg.Gather()
	if err != nil {
		return nil, err
	}
	out := make(map[string]*dto.MetricFamily, len(mfs))
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out, nil
}

// Get answers a GET of path (and query) as the exporter's timeline API
// does, at the harness's clock.
func (h *Harness) Get(path string) (int, string) {
	rr := httptest.NewRecorder()
	h.mux.ServeHTTP(rr, httptest.NewRequestWithContext(context.Background(), http.MethodGet, path, nil))
	return rr.Code, strings.TrimSpace(rr.Body.String())
}
