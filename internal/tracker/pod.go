package tracker

import "sort"

// Pod not-ready reasons: why a non-terminating Pending or Running pod is not
// Ready, most specific first.
const (
	PodSchedulingGated  = "scheduling_gated"  // spec.schedulingGates not empty: waiting for an admission queue (Kueue and friends)
	PodUnschedulable    = "unschedulable"     // PodScheduled=False, reason Unschedulable
	PodImagePull        = "image_pull"        // a container waits in ErrImagePull / ImagePullBackOff / InvalidImageName
	PodCrashLoop        = "crash_loop"        // a container waits in CrashLoopBackOff or keeps terminating with errors
	PodInitFailing      = "init_failing"      // an init container failed or crash-loops
	PodReadinessGate    = "readiness_gate"    // containers ready, a readiness gate's condition not True (a load balancer not programmed yet)
	PodReadinessFailing = "readiness_failing" // containers run, but readiness does not pass
	PodNodeNotReady     = "node_not_ready"    // the pod's node is not Ready (kubelet unreachable)
	PodOther            = "other"             // starting, or a reason not classified
)

// PodReasons lists every not-ready reason, for zero-initialised gauges.
var PodReasons = []string{PodSchedulingGated, PodUnschedulable, PodImagePull, PodCrashLoop, PodInitFailing, PodReadinessGate, PodReadinessFailing, PodNodeNotReady, PodOther}

// ContainerState is the compact state of one container.
type ContainerState struct {
	Running        bool
	WaitingReason  string // state.waiting.reason
	TerminatedExit int32  // state.terminated.exitCode, when terminated
	Terminated     bool
	RestartCount   int32
}

// PodFacts is what the not-ready classification reads from a pod.
type PodFacts struct {
	Phase       string // Pending, Running, Succeeded, Failed, Unknown
	Terminating bool   // deletionTimestamp set
	Ready       bool
	// Unschedulable: PodScheduled=False with reason Unschedulable.
	Unschedulable bool
	Init          []ContainerState
	Containers    []ContainerState
	// NodeNotReady: the pod is bound to a node whose Ready condition is not True.
	NodeNotReady bool
	// SchedulingGated: spec.schedulingGates is not empty. The scheduler
	// does not consider the pod until the last gate is removed; gates can
	// only be removed after creation, never added.
	SchedulingGated bool
	// ContainersReady: the ContainersReady condition is True.
	ContainersReady bool
	// ReadinessGatePending: a condition named by spec.readinessGates is not
	// True (absent counts as not True, as for the kubelet).
	ReadinessGatePending bool
}

// NotReadyReason classifies a pod that is not Ready. It returns "" for pods
// that are Ready, terminating, or finished (Succeeded/Failed: a finished Job
// pod is not "not ready").
func NotReadyReason(p PodFacts) string {
	if p.Ready || p.Terminating || (p.Phase != "Pending" && p.Phase != "Running") {
		return ""
	}
	switch {
	case p.SchedulingGated:
		return PodSchedulingGated
	case p.Unschedulable:
		return PodUnschedulable
	case p.NodeNotReady:
		return PodNodeNotReady
	}
	for _, c := range p.Init {
		if c.WaitingReason == "CrashLoopBackOff" || (c.Terminated && c.TerminatedExit != 0) || imagePull(c.WaitingReason) {
			if imagePull(c.WaitingReason) {
				return PodImagePull
			}
			return PodInitFailing
		}
	}
	allRunning := len(p.Containers) > 0
	for _, c := range p.Containers {
		switch {
		case imagePull(c.WaitingReason):
			return PodImagePull
		case c.WaitingReason == "CrashLoopBackOff", c.Terminated && c.TerminatedExit != 0:
			return PodCrashLoop
		}
		allRunning = allRunning && c.Running
	}
	if p.ContainersReady && p.ReadinessGatePending {
		// The kubelet sets Ready = ContainersReady and every readiness
		// gate True: the gate is what is missing.
		return PodReadinessGate
	}
	if allRunning && p.Phase == "Running" {
		return PodReadinessFailing
	}
	return PodOther
}

func imagePull(reason string) bool {
	switch reason {
	case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull":
		return true
	}
	return false
}

// DominantReason returns the most frequent reason, ties broken by the order
// of PodReasons (most specific first); "" for none.
func DominantReason(reasons []string) string {
	if len(reasons) == 0 {
		return ""
	}
	count := map[string]int{}
	for _, r := range reasons {
		count[r]++
	}
	rank := func(r string) int {
		for i, x := range PodReasons {
			if x == r {
				return i
			}
		}
		return len(PodReasons)
	}
	sorted := make([]string, 0, len(count))
	for r := range count {
		sorted = append(sorted, r)
	}
	sort.Slice(sorted, func(i, j int) bool {
		if count[sorted[i]] != count[sorted[j]] {
			return count[sorted[i]] > count[sorted[j]]
		}
		return rank(sorted[i]) < rank(sorted[j])
	})
	return sorted[0]
}
