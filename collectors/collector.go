// Package collectors defines the contract every collector of the exporter
// implements. A collector is a thin adapter: it asks the shared informer
// factory for the resources it reads, turns objects into compact records for
// a pure tracker, and turns the tracker's observations into metrics. One
// subpackage per concern (rollouts, pods, endpoints, watch, ...).
package collectors

import (
	"context"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
)

// Collector is one concern of the exporter.
//
// The exporter calls Register once, then checks that it may list and watch
// every resource in Resources (a forbidden resource disables the collector:
// kube_convergence_collector_up is 0 and it is left out of readiness), then
// calls Start, then starts the informers. Start must not block: it attaches
// event handlers and starts its own goroutines, which end when ctx is done.
type Collector interface {
	// Name is the collector's name in the config file, in logs and in the
	// `collector` label.
	Name() string
	// Resources lists the API resources the collector lists and watches.
	Resources() []informers.Resource
	// Register registers the collector's metrics on reg.
	Register(reg prometheus.Registerer) error
	// Start attaches the collector to its informers.
	Start(ctx context.Context, f *informers.Factory) error
}

// Partial is implemented by a collector that can run without some of its
// resources. RBAC denying one of OptionalResources does not disable the
// collector: the exporter calls Without with the denied ones before Start
// (the collector must not read them, and says what it cannot tell instead),
// and logs what is left out. Optional resources are not waited for by
// readiness; the ClusterRole grants them like the others.
type Partial interface {
	OptionalResources() []informers.Resource
	Without(denied []informers.Resource)
}

// AllResources returns c's resources and its optional ones.
func AllResources(c Collector) []informers.Resource {
	rs := c.Resources()
	if p, ok := c.(Partial); ok {
		rs = append(slices.Clip(rs), p.OptionalResources()...)
	}
	return rs
}

// OnNamespaceDeleted calls fn with the name of every Namespace deleted while
// the exporter watches, so that a collector deletes the namespace's series:
// cardinality must not grow with the namespaces a cluster ever had. The
// collector must list informers.Namespaces in its Resources.
func OnNamespaceDeleted(f *informers.Factory, collector string, fn func(namespace string)) error {
	_, err := informers.Watch(f, collector, informers.Namespaces, informers.Handlers[corev1.Namespace]{
		Gone: func(ns *corev1.Namespace, _ informers.Seen) { fn(ns.Name) },
	})
	return err
}

// ReadinessReporter is implemented by a collector whose readiness depends on
// more than the informers of its Resources: the resources collector starts
// an informer per custom resource as its CRD appears. Synced is false while
// one it counts has not synced; lines go to the /readyz body, naming what is
// left out of readiness and why.
type ReadinessReporter interface {
	Readiness() (synced bool, lines []string)
}

// Evidence is where the collectors of workloads and custom resources record
// what happened to the objects of an open episode (writes, conditions,
// related objects, what blocks it), for its timeline. *timeline.Store
// implements it; the collectors depend on nothing more of the store, and
// reach it through their Outbox, never with their own lock held.
type Evidence interface {
	// Open reports whether uid has an open episode (evidence of the
	// others is dropped: callers spare building it). Outbox.Open asks
	// it, without the collector's lock; under it a collector asks its
	// tracker, which the store's open episodes mirror.
	Open(uid string) bool
	// Add records an entry of episode uid; false when none is open.
	Add(uid string, e timeline.Entry) bool
	// Relate makes entries about objectUID (a pod, a ReplicaSet) reach
	// the episode of episodeUID.
	Relate(objectUID, episodeUID string)
	// AddRelated records an entry about objectUID in the episode it is
	// related to; false when none.
	AddRelated(objectUID string, e timeline.Entry) bool
	// Gone says objectUID was deleted: its relation is kept a while, for
	// what follows a deletion.
	Gone(objectUID string)
	// Block records what holds episode uid now.
	Block(uid, stage, reason string, now time.Time)
}

var _ Evidence = (*timeline.Store)(nil)
