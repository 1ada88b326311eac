// Package serve runs the exporter: it connects to the API server, checks
// what each collector may read, starts collectors and informers, tracks
// readiness and serves the HTTP endpoints. cmd/ only parses flags and calls it.
package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-convergence/kube-convergence-exporter/collectors"
	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/metric"
)

// Exporter is the running exporter: collectors over shared informers.
type Exporter struct {
	client     kubernetes.Interface
	factory    *informers.Factory
	collectors []collectors.Collector
	logger     *slog.Logger
	apiServer  string

	up     *prometheus.GaugeVec
	synced *prometheus.GaugeVec

	// reviewBackoff paces the retries of a failed access review.
	reviewBackoff wait.Backoff

	mu        sync.Mutex
	state     map[string]collectorState
	reviewErr map[string]error // last failed access review of a pending collector
	reachErr  error            // last error reaching the API server, until it answered
	serverVer string
	ready     bool // latched: readiness does not drop during later relists
}

type collectorState int

const (
	statePending   collectorState = iota // permissions not known yet: not started
	stateForbidden                       // RBAC forbids a resource: disabled
	stateFailed                          // failed to start
	stateRunning                         // started, informers syncing or synced
	stateSynced                          // every informer synced once
)

// The exporter's own families; their detail is in docs/metrics.md.
var (
	collectorUp = metric.Family{
		Name: "kube_convergence_collector_up", Type: metric.Gauge,
		Help:   "1 if the collector is running; 0 while its access reviews are unanswered, or when RBAC or a failed start disabled it.",
		Labels: []string{"collector"},
	}
	informerSynced = metric.Family{
		Name: "kube_convergence_informer_synced", Type: metric.Gauge,
		Help:   "1 once the informer of the resource used by the collector has completed its initial list; 0 before.",
		Labels: []string{"collector", "resource"},
	}
)

// New builds an exporter. It registers the self-observability metrics and
// every collector's metrics on reg.
func New(client kubernetes.Interface, apiServer string, factory *informers.Factory, cs []collectors.Collector, reg prometheus.Registerer, logger *slog.Logger) (*Exporter, error) {
	e := &Exporter{
		client:     client,
		factory:    factory,
		collectors: cs,
		logger:     logger,
		apiServer:  apiServer,
		state:      map[string]collectorState{},
		reviewErr:  map[string]error{},
		// A failed review is asked again after 0.5 s, doubling to at most
		// 30 s between attempts, for as long as the process runs: an error
		// is never taken as an answer (see permissions).
		reviewBackoff: wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: math.MaxInt32, Cap: 30 * time.Second},
		up:            collectorUp.NewGaugeVec(),
		synced:        informerSynced.NewGaugeVec(),
	}
	if err := reg.Register(metric.Declare(e.up, collectorUp)); err != nil {
		return nil, fmt.Errorf("register collector_up: %w", err)
	}
	if err := reg.Register(metric.Declare(e.synced, informerSynced)); err != nil {
		return nil, fmt.Errorf("register informer_synced: %w", err)
	}
	if factory != nil {
		if err := factory.Register(reg); err != nil {
			return nil, fmt.Errorf("register informer factory metrics: %w", err)
		}
	}
	for _, c := range cs {
		if err := c.Register(reg); err != nil {
			return nil, fmt.Errorf("collector %s: register metrics: %w", c.Name(), err)
		}
		e.up.WithLabelValues(c.Name()).Set(0)
		for _, r := range c.Resources() {
			e.synced.WithLabelValues(c.Name(), r.String()).Set(0)
		}
	}
	return e, nil
}

// Run connects to the API server (retrying until ctx ends), starts every
// permitted collector and the informers, and keeps the sync gauges current
// until ctx is done. Each collector starts on its own as soon as its access
// reviews are answered, so a review that keeps failing for one collector
// does not hold back the others.
func (e *Exporter) Run(ctx context.Context) error {
	if err := e.waitForAPIServer(ctx); err != nil {
		return err
	}
	var started sync.WaitGroup
	for _, c := range e.collectors {
		started.Add(1)
		go func() {
			defer started.Done()
			e.startCollector(ctx, c)
			e.factory.Start(ctx)
		}()
	}
	go func() {
		started.Wait()
		if ctx.Err() == nil {
			e.logger.Info("collectors started", "collectors", e.summary())
		}
	}()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		e.refreshSync()
		select {
		case <-ctx.Done():
			started.Wait()
			return nil
		case <-tick.C:
		}
	}
}

// waitForAPIServer asks for the server version until it answers, with
// capped exponential backoff. An unreachable API server is not fatal: the
// process stays up, not ready, and says why in /readyz and in the log.
func (e *Exporter) waitForAPIServer(ctx context.Context) error {
	backoff := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Steps: 1 << 30, Cap: 30 * time.Second}
	for {
		v, err := e.client.Discovery().ServerVersion()
		if err == nil {
			e.mu.Lock()
			e.reachErr, e.serverVer = nil, v.GitVersion
			e.mu.Unlock()
			e.logger.Info("connected to the Kubernetes API server", "server", e.apiServer, "version", v.GitVersion)
			return nil
		}
		err = fmt.Errorf("cannot reach the Kubernetes API server at %s: %w", e.apiServer, err)
		e.mu.Lock()
		e.reachErr = err
		e.mu.Unlock()
		d := backoff.Step()
		e.logger.Error("API server unreachable, retrying", "err", err, "retry_in", d)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(d):
		}
	}
}

func (e *Exporter) startCollector(ctx context.Context, c collectors.Collector) {
	denied, err := e.permissions(ctx, c, c.Resources())
	if err != nil {
		return // ctx ended while a review was unanswered
	}
	if len(denied) > 0 {
		e.setState(c.Name(), stateForbidden)
		e.logger.Error("collector disabled: RBAC forbids list/watch", "collector", c.Name(), "denied", strings.Join(denied, ", "))
		return
	}
	if p, ok := c.(collectors.Partial); ok {
		var without []informers.Resource
		for _, r := range p.OptionalResources() {
			d, err := e.permissions(ctx, c, []informers.Resource{r})
			if err != nil {
				return
			}
			if len(d) > 0 {
				without = append(without, r)
				e.logger.Warn("collector runs without a resource RBAC forbids", "collector", c.Name(), "denied", strings.Join(d, ", "))
			}
		}
		p.Without(without)
	}
	if err := c.Start(ctx, e.factory); err != nil {
		e.setState(c.Name(), stateFailed)
		e.logger.Error("collector disabled: failed to start", "collector", c.Name(), "err", err)
		return
	}
	e.setState(c.Name(), stateRunning)
	e.up.WithLabelValues(c.Name()).Set(1)
}

// permissions returns the "verb resource" pairs of c that RBAC denies, asked
// with SelfSubjectAccessReviews (every authenticated user may create them:
// the system:basic-user ClusterRole). Only an answer decides: a review that
// fails (API server restarting, timeout, 429, 5xx, a webhook authorizer
// down) is retried with capped backoff while the collector stays pending,
// which keeps /readyz at 503 and says why there. Before, one failed review
// disabled the collector for the life of the process and /readyz turned 200.
// The error is only returned when ctx ends.
func (e *Exporter) permissions(ctx context.Context, c collectors.Collector, resources []informers.Resource) ([]string, error) {
	var denied []string
	for _, r := range resources {
		for _, verb := range []string{"list", "watch"} {
			backoff := e.reviewBackoff
			for attempt := 1; ; attempt++ {
				status, err := e.review(ctx, verb, r)
				if err == nil {
					if !status.Allowed {
						d := verb + " " + r.String()
						if status.EvaluationError != "" {
							d += " (evaluation error: " + status.EvaluationError + ")"
						}
						denied = append(denied, d)
					}
					break
				}
				if ctx.Err() != nil {
					return nil, fmt.Errorf("access review for %s %s: %w", verb, r, ctx.Err())
				}
				next := backoff.Step()
				err = fmt.Errorf("access review for %s %s failed (attempt %d, next in %v): %w", verb, r, attempt, next.Round(time.Millisecond), err)
				e.setReviewErr(c.Name(), err)
				e.logger.Warn("cannot check the collector's permissions yet, retrying", "collector", c.Name(), "err", err)
				t := time.NewTimer(next)
				select {
				case <-ctx.Done():
					t.Stop()
					return nil, fmt.Errorf("access review for %s %s: %w", verb, r, ctx.Err())
				case <-t.C:
				}
			}
		}
	}
	e.setReviewErr(c.Name(), nil)
	return denied, nil
}

// review asks the API server whether the exporter may verb r.
func (e *Exporter) review(ctx context.Context, verb string, r informers.Resource) (authorizationv1.SubjectAccessReviewStatus, error) {
	review, err := e.client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: verb, Group: r.Group, Version: r.Version, Resource: r.Resource,
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		return authorizationv1.SubjectAccessReviewStatus{}, err
	}
	return review.Status, nil
}

func (e *Exporter) setReviewErr(name string, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err == nil {
		delete(e.reviewErr, name)
		return
	}
	e.reviewErr[name] = err
}

func (e *Exporter) setState(name string, s collectorState) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.state[name] = s
}

// refreshSync updates the informer_synced gauges and the readiness latch.
func (e *Exporter) refreshSync() {
	e.mu.Lock()
	defer e.mu.Unlock()
	allSynced := true
	for _, c := range e.collectors {
		st := e.state[c.Name()]
		if st != stateRunning && st != stateSynced {
			if st == statePending {
				allSynced = false
			}
			continue
		}
		ok := true
		for _, r := range c.Resources() {
			s := e.factory.Synced(r)
			ok = ok && s
			e.synced.WithLabelValues(c.Name(), r.String()).Set(boolToFloat(s))
		}
		if rr, isRR := c.(collectors.ReadinessReporter); isRR {
			s, _ := rr.Readiness()
			ok = ok && s
		}
		if ok {
			e.state[c.Name()] = stateSynced
		} else if st != stateSynced {
			allSynced = false
		}
	}
	if allSynced && !e.ready {
		e.ready = true
		e.logger.Info("ready: every permitted collector has synced")
	}
}

// Readiness reports whether the exporter is ready and a human-readable body.
func (e *Exporter) Readiness() (bool, string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var b strings.Builder
	if e.reachErr != nil {
		fmt.Fprintf(&b, "not ready: %v\n", e.reachErr)
		return false, b.String()
	}
	if e.ready {
		b.WriteString("ready\n")
	} else {
		b.WriteString("not ready: waiting for informers to sync\n")
	}
	byName := make(map[string]collectors.Collector, len(e.collectors))
	names := make([]string, 0, len(e.collectors))
	for _, c := range e.collectors {
		names = append(names, c.Name())
		byName[c.Name()] = c
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "collector %s: %s", n, stateText(e.state[n]))
		if err := e.reviewErr[n]; err != nil && e.state[n] == statePending {
			fmt.Fprintf(&b, " (%v)", err)
		}
		b.WriteString("\n")
		if rr, ok := byName[n].(collectors.ReadinessReporter); ok && (e.state[n] == stateRunning || e.state[n] == stateSynced) {
			_, lines := rr.Readiness()
			for _, l := range lines {
				fmt.Fprintf(&b, "  %s\n", l)
			}
		}
	}
	return e.ready, b.String()
}

func (e *Exporter) summary() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	parts := make([]string, 0, len(e.collectors))
	for _, c := range e.collectors {
		parts = append(parts, c.Name()+"="+stateText(e.state[c.Name()]))
	}
	return strings.Join(parts, " ")
}

func stateText(s collectorState) string {
	switch s {
	case stateForbidden:
		return "disabled (forbidden by RBAC, excluded from readiness)"
	case stateFailed:
		return "disabled (failed to start, excluded from readiness)"
	case stateRunning:
		return "syncing"
	case stateSynced:
		return "synced"
	default:
		return "pending: checking permissions"
	}
}

func boolToFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// ErrNoCollectors is returned when the configuration disables every collector.
var ErrNoCollectors = errors.New("every collector is disabled")

// wedgeDetector reports an informer event handler that has not finished, or
// an event that has not been handled, for longer than timeout
// (informers.Factory).
type wedgeDetector interface {
	Wedged(now time.Time, timeout time.Duration) (collector string, stuck time.Duration, wedged bool)
}

// liveness is the /healthz answer: false only when the process is wedged,
// never because the cluster is quiet (no events: nothing is queued) or the
// API server is unreachable (the reflectors retry; /readyz says so). A
// restart cannot fix either of those, and restarting an exporter whose
// API server is down only loses its in-flight episodes.
func liveness(d wedgeDetector, now time.Time, timeout time.Duration) (bool, string) {
	collector, stuck, wedged := d.Wedged(now, timeout)
	if !wedged {
		return true, "ok\n"
	}
	return false, fmt.Sprintf("wedged: collector %s has left an informer event unhandled for %v (over --web.liveness-timeout=%v)\n",
		collector, stuck.Round(time.Second), timeout)
}

// Liveness answers /healthz at now (see liveness).
func (e *Exporter) Liveness(now time.Time, timeout time.Duration) (bool, string) {
	return liveness(e.factory, now, timeout)
}
