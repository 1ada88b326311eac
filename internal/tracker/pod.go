package tracker

import "sort"

// Pod not-ready reasons: why a non-terminating Pending or Running pod is not
// Ready, in the order NotReadyReason applies them: the first that holds is
// the reason.
const (
	PodSchedulingGated  = "scheduling_gated"  // spec.schedulingGates not empty: waiting for an admission queue (Kueue and friends)
	PodUnschedulable    = "unschedulable"     // PodScheduled=False, reason Unschedulable
	PodNodeNotReady     = "node_not_ready"    // the pod's node is not Ready (kubelet unreachable)
	PodInitFailing      = "init_failing"      // an init container failed or crash-loops
	PodImagePull        = "image_pull"        // a container or init container waits in ErrImagePull / ImagePullBackOff / InvalidImageName / ErrImageNeverPull
	PodCrashLoop        = "crash_loop"        // a container waits in CrashLoopBackOff or keeps terminating with errors
	PodReadinessGate    = "readiness_gate"    // containers ready, a readiness gate's condition not True (a load balancer not programmed yet)
	PodReadinessFailing = "readiness_failing" // containers run, but readiness does not pass
	PodOther            = "other"             // starting, or a reason not classified
)

// PodReasons lists every not-ready reason in NotReadyReason's precedence:
// the order of the zero-initialised gauges, of the reasons named in help
// texts and docs (docs/pods.md), and of DominantReason's tie-break.
var PodReasons = []string{PodSchedulingGated, PodUnschedulable, PodNodeNotReady, PodInitFailing, PodImagePull, PodCrashLoop, PodReadinessGate, PodReadinessFailing, PodOther}

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
// pod is not "not ready"). The reasons apply in the order of PodReasons,
// whatever the order of the containers: a pod on a node that is not Ready
// is node_not_ready before anything its container statuses say (the kubelet
// that would update them is unreachable); init containers run before the
// others, so a failing one comes before any image pull; and a container
// that cannot pull its image comes before another that crash-loops (for
// want of it, often).
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
	var pulling, initFailing, crashing bool
	for i := range p.Init {
		c := &p.Init[i]
		pulling = pulling || imagePull(c.WaitingReason)
		initFailing = initFailing || failing(c)
	}
	allRunning := len(p.Containers) > 0
	for i := range p.Containers {
		c := &p.Containers[i]
		pulling = pulling || imagePull(c.WaitingReason)
		crashing = crashing || failing(c)
		allRunning = allRunning && c.Running
	}
	switch {
	case initFailing:
		return PodInitFailing
	case pulling:
		return PodImagePull
	case crashing:
		return PodCrashLoop
	case p.ContainersReady && p.ReadinessGatePending:
		// The kubelet sets Ready = ContainersReady and every readiness
		// gate True: the gate is what is missing.
		return PodReadinessGate
	case allRunning && p.Phase == "Running":
		return PodReadinessFailing
	}
	return PodOther
}

// failing: the container crash-loops or last terminated with an error.
func failing(c *ContainerState) bool {
	return c.WaitingReason == "CrashLoopBackOff" || (c.Terminated && c.TerminatedExit != 0)
}

func imagePull(reason string) bool {
	switch reason {
	case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull":
		return true
	}
	return false
}

// DominantReason returns the most frequent reason, ties broken by the order
// of PodReasons (NotReadyReason's precedence); "" for none.
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
