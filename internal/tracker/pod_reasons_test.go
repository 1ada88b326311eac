package tracker

import (
	"maps"
	"testing"
)

// podReasonFacts makes each reason hold on a pod, alone or with others: the
// container edits append, so that two reasons can hold at once.
var podReasonFacts = map[string]func(p *PodFacts){
	PodSchedulingGated: func(p *PodFacts) { p.SchedulingGated = true },
	PodUnschedulable:   func(p *PodFacts) { p.Unschedulable = true },
	PodNodeNotReady:    func(p *PodFacts) { p.NodeNotReady = true },
	PodImagePull: func(p *PodFacts) {
		p.Containers = append(p.Containers, ContainerState{WaitingReason: "ImagePullBackOff"})
	},
	PodInitFailing: func(p *PodFacts) {
		p.Init = append(p.Init, ContainerState{Terminated: true, TerminatedExit: 1, RestartCount: 3})
	},
	PodCrashLoop: func(p *PodFacts) {
		p.Containers = append(p.Containers, ContainerState{WaitingReason: "CrashLoopBackOff", RestartCount: 4})
	},
	PodReadinessGate: func(p *PodFacts) {
		p.Phase, p.ContainersReady, p.ReadinessGatePending = "Running", true, true
		p.Containers = append(p.Containers, ContainerState{Running: true})
	},
	PodReadinessFailing: func(p *PodFacts) {
		p.Phase = "Running"
		p.Containers = append(p.Containers, ContainerState{Running: true})
	},
	PodOther: func(*PodFacts) {}, // a Pending pod whose containers are not created yet
}

// PodReasons is NotReadyReason's precedence: for every two reasons that
// hold at once, in either order of the edits (so of the containers), the
// classifier answers the one PodReasons lists first; with the image pull in
// an app container and in an init container. A reason added to one and not
// the other, or an order changed in one, fails here.
func TestPodReasonsIsNotReadyReasonsPrecedence(t *testing.T) {
	if len(podReasonFacts) != len(PodReasons) {
		t.Fatalf("%d reasons have facts, PodReasons lists %d: give every reason facts", len(podReasonFacts), len(PodReasons))
	}
	initPull := maps.Clone(podReasonFacts)
	initPull[PodImagePull] = func(p *PodFacts) {
		p.Init = append(p.Init, ContainerState{WaitingReason: "ErrImagePull"})
	}
	for _, facts := range []map[string]func(*PodFacts){podReasonFacts, initPull} {
		pod := func(edits ...string) PodFacts {
			p := PodFacts{Phase: "Pending"}
			for _, r := range edits {
				facts[r](&p)
			}
			return p
		}
		for i, first := range PodReasons {
			if facts[first] == nil {
				t.Fatalf("no facts for %s", first)
			}
			if got := NotReadyReason(pod(first)); got != first {
				t.Errorf("%s alone (facts %+v): NotReadyReason = %q", first, pod(first), got)
			}
			for _, later := range PodReasons[i+1:] {
				for _, edits := range [][]string{{first, later}, {later, first}} {
					if got := NotReadyReason(pod(edits...)); got != first {
						t.Errorf("%s and %s (facts %+v): NotReadyReason = %q, want %s, listed first in PodReasons",
							edits[0], edits[1], pod(edits...), got, first)
					}
				}
			}
		}
	}
}

// A tie between two reasons goes to the one NotReadyReason would answer.
func TestDominantReasonTieFollowsThePrecedence(t *testing.T) {
	for i, first := range PodReasons {
		for _, later := range PodReasons[i+1:] {
			for _, reasons := range [][]string{{first, later}, {later, first}} {
				if got := DominantReason(reasons); got != first {
					t.Errorf("DominantReason(%v) = %q, want %s", reasons, got, first)
				}
			}
		}
	}
}
