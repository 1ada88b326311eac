// Package tracker is the pure core of the exporter: state machines that turn
// compact records of Kubernetes objects, and the time they were received,
// into observations (a stage reached after a duration, a latency threshold
// crossed while stuck, an episode closed with an outcome). It has no
// Kubernetes client, no Prometheus, no global state and no clock of its own:
// every call takes `now`. Collectors adapt informers to it and its
// observations to metrics.
package tracker

import "time"

// Kind is a workload kind.
type Kind string

// The workload kinds whose rollouts are tracked.
const (
	Deployment  Kind = "Deployment"
	StatefulSet Kind = "StatefulSet"
	DaemonSet   Kind = "DaemonSet"
)

// Stage is a step of a rollout, from the spec write. Each is reached at most
// once per episode, in the order Stages gives.
type Stage string

// Rollout stages.
const (
	// StageObserved: status.observedGeneration >= metadata.generation. Its
	// duration is the observedGeneration lag.
	StageObserved Stage = "observed"
	// StageUpdated: every desired replica runs the new revision (Deployment,
	// DaemonSet).
	StageUpdated Stage = "updated"
	// StageAvailable: every replica is new and available, none of the old
	// revision left (Deployment, DaemonSet).
	StageAvailable Stage = "available"
	// StageReady: a StatefulSet's update completed and every replica is ready.
	StageReady Stage = "ready"
	// StageEndpointsReady: every Ready pod of the new revision is a ready
	// endpoint of every Service selecting it, and no old pod still is.
	StageEndpointsReady Stage = "endpoints_ready"
)

var stagesOf = map[Kind][]Stage{
	Deployment:  {StageObserved, StageUpdated, StageAvailable, StageEndpointsReady},
	StatefulSet: {StageObserved, StageReady, StageEndpointsReady},
	DaemonSet:   {StageObserved, StageUpdated, StageAvailable, StageEndpointsReady},
}

// customStages are the stages of every custom resource kind (a generic
// kind, named <Kind>.<group>): its controller observed the write, and its
// readiness conditions or expressions say it converged.
var customStages = []Stage{StageObserved, StageReady}

// Stages returns the stages of kind in the order they are reached. A kind
// other than the built-in workloads is a custom resource kind.
func Stages(k Kind) []Stage {
	if s, ok := stagesOf[k]; ok {
		return s
	}
	return customStages
}

// Change is what the spec write that opened an episode changed.
type Change string

// Changes.
const (
	ChangeCreate   Change = "create"   // the object was created
	ChangeTemplate Change = "template" // the pod template changed (a new revision)
	ChangeScale    Change = "scale"    // only spec.replicas changed
	ChangeOther    Change = "other"    // anything else: strategy, minReadySeconds, pause/unpause...
)

// Outcome is how an episode ended.
type Outcome string

// Outcomes.
const (
	OutcomeConverged  Outcome = "converged"  // the last stage was reached
	OutcomeSuperseded Outcome = "superseded" // a newer generation arrived first
	OutcomeDeleted    Outcome = "deleted"    // the object was deleted mid-rollout
	OutcomePaused     Outcome = "paused"     // a paused Deployment: observed, not slow
	OutcomeManual     Outcome = "manual"     // OnDelete: only an operator completes it
)

// Endpoints is what the EndpointSlices say about a workload's pods.
type Endpoints int

// Endpoint states.
const (
	// EndpointsNoService: no Service selects the pods; the endpoints_ready
	// stage is skipped, not failed.
	EndpointsNoService Endpoints = iota
	// EndpointsPending: a new Ready pod is not yet a ready endpoint of some
	// selecting Service, or an old or terminating pod still is.
	EndpointsPending
	// EndpointsReady: the slices match the new revision's Ready pods.
	EndpointsReady
)

// Stall reasons, most specific first; the first that applies wins.
const (
	ReasonNotObserved              = "not_observed"
	ReasonReplicaFailure           = "replica_failure"
	ReasonProgressDeadlineExceeded = "progress_deadline_exceeded"
	ReasonOther                    = "other"

	// Custom resources (kstatus-compatible convention), after not_observed.
	ReasonStalled          = "stalled"           // condition Stalled=True: the controller gave up; reported at once
	ReasonReconciling      = "reconciling"       // condition Reconciling=True
	ReasonConditionFalse   = "condition_false"   // a readiness condition is False
	ReasonConditionUnknown = "condition_unknown" // a readiness condition is Unknown (or True for an older generation)
	ReasonConditionMissing = "condition_missing" // a readiness condition is absent
)

// Custom holds the facts of a custom resource's record, computed by package
// records from the configured convention (conditions or readiness
// expressions). Nil for the built-in workload kinds.
type Custom struct {
	// Ready: every readiness condition True (each with its own
	// observedGeneration, when present, >= generation), neither
	// Reconciling nor Stalled True; or every readiness expression true.
	// Terminating: the object has a deletionTimestamp (kstatus
	// Terminating); its controller finalizes it and will not converge it.
	// (The bools sit together: apart, each took 8 bytes.)
	Ready, Terminating bool
	// ObservedUnknown: the object has a status but no observed generation
	// anywhere (neither a status field nor a condition's own). The
	// observed stage is then skipped, and a spec write is judged by the
	// readiness transition it causes, timed on receipt (RolloutTracker.Observe).
	ObservedUnknown bool
	// ReadySince is the newest lastTransitionTime of the readiness
	// conditions: the API-side time of the ready stage.
	ReadySince time.Time
	// Reason is why it is not ready, once observed: ReasonStalled,
	// ReasonReconciling, ReasonConditionFalse, ReasonConditionUnknown,
	// ReasonConditionMissing, or "" (other).
	Reason string
}

// Workload is the compact record of a Deployment, StatefulSet or DaemonSet
// that the rollout tracker reads. Collectors fill it from the API object.
type Workload struct {
	Kind                 Kind
	UID, Namespace, Name string

	Generation, ObservedGeneration int64
	// Created is metadata.creationTimestamp (API side, 1 s precision).
	Created time.Time
	// SpecWritten is the newest managedFields time of an entry touching
	// f:spec (API side, 1 s precision); zero when unknown.
	SpecWritten time.Time
	// StatusWritten is the newest managedFields time of a status entry
	// (API side, 1 s precision): when the controller wrote the status
	// that shows a stage reached; zero when unknown.
	StatusWritten time.Time

	// TemplateHash and OtherHash classify a change: the pod template, and
	// the spec without template and replicas.
	TemplateHash, OtherHash string
	// SpecReplicas is spec.replicas (0 for a DaemonSet).
	SpecReplicas int32
	// Paused is a Deployment's spec.paused.
	Paused bool
	// OnDelete: the update strategy is OnDelete (StatefulSet, DaemonSet).
	OnDelete bool

	Status Status
	// Endpoints is the state of the workload's pods in EndpointSlices:
	// the current revision's Ready pods published, no other pod (with a
	// StatefulSet partition, old-revision pods below it may stay).
	Endpoints Endpoints
	// EndpointsAnyRevision is the same check with every pod counted as
	// current: what a scale of an OnDelete workload with a pending manual
	// update converges on. Only read for OnDelete workloads.
	EndpointsAnyRevision Endpoints

	// Stall facts.
	ReplicaFailure           bool   // Deployment condition ReplicaFailure=True (FailedCreate: quota, admission)
	ProgressDeadlineExceeded bool   // Deployment condition Progressing=False, ProgressDeadlineExceeded
	PodReason                string // the most frequent not-ready reason of the new revision's pods, "" if none

	// Custom is set for a custom resource: the generic kind, whose stages
	// are observed and ready.
	Custom *Custom
}

// Status holds the status fields the stage predicates read; which are set
// depends on the kind.
type Status struct {
	// Deployment (Replicas, Updated, Available) and StatefulSet (Ready, Updated).
	Replicas, UpdatedReplicas, AvailableReplicas, ReadyReplicas int32
	// HasProgressing: the Deployment has a Progressing condition (absent
	// when progressDeadlineSeconds disables it); ProgressingReason is its reason.
	HasProgressing    bool
	ProgressingReason string

	// StatefulSet.
	CurrentRevision, UpdateRevision string
	Partition                       int32

	// DaemonSet.
	DesiredNumberScheduled, UpdatedNumberScheduled, NumberAvailable, NumberUnavailable int32
}

func (w *Workload) observed() bool {
	if w.Custom != nil && w.Custom.ObservedUnknown {
		return true
	}
	return w.ObservedGeneration >= w.Generation
}

// observedSeen reports whether the record shows the generation observed by
// evidence of the controller's own: a first sight of an observed generation
// means the watch missed the write. A custom resource without
// observedGeneration never shows it.
func (w *Workload) observedSeen() bool {
	return w.observed() && (w.Custom == nil || !w.Custom.ObservedUnknown)
}

// skips reports whether stage s is skipped for w: a custom resource without
// observedGeneration has no observed stage.
func (w *Workload) skips(s Stage) bool {
	return s == StageObserved && w.Custom != nil && w.Custom.ObservedUnknown
}

// customReady reports whether a custom resource is converged on its spec.
// Without an observed generation, readiness alone is what there is: the
// tracker decides which readiness belongs to which write (Observe).
func (w *Workload) customReady() bool {
	return w.observed() && w.Custom.Ready
}

// unjudged reports whether a live spec write of w cannot be judged yet: no
// observed generation says whether its controller saw it, and it is ready
// on its previous status. Only a transition can tell: not ready, then
// ready again.
func (w *Workload) unjudged() bool {
	return w.Custom != nil && w.Custom.ObservedUnknown && w.Custom.Ready
}

// reached reports whether the facts show stage reached. Ready facts describe
// the current spec only once the generation is observed. anyRevision: the
// replicas need not run the update revision (a scale of an OnDelete
// workload whose manual update is pending).
func (w *Workload) reached(s Stage, anyRevision bool) bool {
	if !w.observed() {
		return false
	}
	if w.Custom != nil {
		return s == StageObserved || (s == StageReady && w.customReady())
	}
	st := &w.Status
	switch s {
	case StageObserved:
		return true
	case StageUpdated:
		if anyRevision {
			return true
		}
		if w.Kind == DaemonSet {
			return st.UpdatedNumberScheduled == st.DesiredNumberScheduled
		}
		return st.UpdatedReplicas == w.SpecReplicas
	case StageAvailable:
		if w.Kind == DaemonSet {
			return (anyRevision || st.UpdatedNumberScheduled == st.DesiredNumberScheduled) &&
				st.NumberAvailable == st.DesiredNumberScheduled && st.NumberUnavailable == 0
		}
		// status.replicas counts non-terminating pods only, so terminating
		// pods may linger without blocking availability.
		return st.UpdatedReplicas == w.SpecReplicas && st.AvailableReplicas == w.SpecReplicas &&
			st.Replicas == w.SpecReplicas &&
			(!st.HasProgressing || st.ProgressingReason == "NewReplicaSetAvailable")
	case StageReady:
		if anyRevision {
			return st.ReadyReplicas == w.SpecReplicas && st.Replicas == w.SpecReplicas
		}
		if st.Partition > 0 { // judged as `kubectl rollout status` does
			return st.UpdatedReplicas >= w.SpecReplicas-st.Partition && st.ReadyReplicas == w.SpecReplicas
		}
		return st.CurrentRevision == st.UpdateRevision && st.ReadyReplicas == w.SpecReplicas &&
			st.UpdatedReplicas == w.SpecReplicas
	case StageEndpointsReady:
		return w.Endpoints == EndpointsReady
	}
	return false
}

// apiStart is the API-side time of the last spec write: the newest
// managedFields time touching f:spec, else the creation time.
func (w *Workload) apiStart() time.Time {
	if !w.SpecWritten.IsZero() {
		return w.SpecWritten
	}
	return w.Created
}

// stallReason picks the reason an episode is stuck, most specific first.
// stageAPITime is the API-side time at which the record shows stage s
// reached (see Event.APITime).
func (w *Workload) stageAPITime(s Stage) time.Time {
	switch {
	case s == StageEndpointsReady:
		return time.Time{}
	case s == StageReady && w.Custom != nil && !w.Custom.ReadySince.IsZero():
		return w.Custom.ReadySince
	}
	return w.StatusWritten
}

func (w *Workload) stallReason() string {
	switch {
	case !w.observed():
		return ReasonNotObserved
	case w.Custom != nil:
		if w.Custom.Reason != "" {
			return w.Custom.Reason
		}
		return ReasonOther
	case w.ReplicaFailure:
		return ReasonReplicaFailure
	case w.PodReason != "":
		return w.PodReason
	case w.ProgressDeadlineExceeded:
		return ReasonProgressDeadlineExceeded
	}
	return ReasonOther
}
