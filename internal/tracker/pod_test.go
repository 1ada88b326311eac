package tracker

import "testing"

func TestNotReadyReason(t *testing.T) {
	running := ContainerState{Running: true}
	for _, tc := range []struct {
		name string
		p    PodFacts
		want string
	}{
		{"ready", PodFacts{Phase: "Running", Ready: true, Containers: []ContainerState{running}}, ""},
		{"finished job pod", PodFacts{Phase: "Succeeded"}, ""},
		{"terminating", PodFacts{Phase: "Running", Terminating: true}, ""},
		{"unschedulable", PodFacts{Phase: "Pending", Unschedulable: true}, PodUnschedulable},
		{"node not ready", PodFacts{Phase: "Running", NodeNotReady: true, Containers: []ContainerState{running}}, PodNodeNotReady},
		{"image pull", PodFacts{Phase: "Pending", Containers: []ContainerState{{WaitingReason: "ImagePullBackOff"}}}, PodImagePull},
		{"init image pull", PodFacts{Phase: "Pending", Init: []ContainerState{{WaitingReason: "ErrImagePull"}}}, PodImagePull},
		{"init failing", PodFacts{Phase: "Pending", Init: []ContainerState{{Terminated: true, TerminatedExit: 1}}}, PodInitFailing},
		{"crash loop", PodFacts{Phase: "Running", Containers: []ContainerState{running, {WaitingReason: "CrashLoopBackOff", RestartCount: 4}}}, PodCrashLoop},
		{"readiness failing", PodFacts{Phase: "Running", Containers: []ContainerState{running, running}}, PodReadinessFailing},
		{"starting", PodFacts{Phase: "Pending", Containers: []ContainerState{{WaitingReason: "ContainerCreating"}}}, PodOther},
		// Queued behind an admission gate, not starting.
		{"scheduling gated", PodFacts{Phase: "Pending", SchedulingGated: true}, PodSchedulingGated},
		// Containers ready, Ready False: the kubelet's Ready is
		// ContainersReady and every readiness gate True.
		{"readiness gate", PodFacts{Phase: "Running", ContainersReady: true, ReadinessGatePending: true, Containers: []ContainerState{running}}, PodReadinessGate},
		{"containers not ready, gate pending", PodFacts{Phase: "Running", ReadinessGatePending: true, Containers: []ContainerState{running}}, PodReadinessFailing},
	} {
		if got := NotReadyReason(tc.p); got != tc.want {
			t.Errorf("%s: NotReadyReason = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestDominantReason(t *testing.T) {
	if got := DominantReason(nil); got != "" {
		t.Errorf("empty: %q", got)
	}
	if got := DominantReason([]string{PodOther, PodCrashLoop, PodCrashLoop, PodOther, PodImagePull}); got != PodImagePull && got != PodCrashLoop {
		t.Errorf("got %q", got)
	}
	// A tie goes to the more specific reason.
	if got := DominantReason([]string{PodOther, PodReadinessFailing}); got != PodReadinessFailing {
		t.Errorf("tie: got %q", got)
	}
}

func TestEndpointsState(t *testing.T) {
	all := func(string) bool { return true }
	newReady := EndpointPod{UID: "a", New: true, Ready: true}
	for _, tc := range []struct {
		name     string
		pods     []EndpointPod
		services []ServiceSlices
		exists   func(string) bool
		want     Endpoints
		// oldMayStay: a StatefulSet partition keeps old pods serving.
		oldMayStay bool
	}{
		{"no service", []EndpointPod{newReady}, nil, all, EndpointsNoService, false},
		{"published", []EndpointPod{newReady}, []ServiceSlices{{Ready: map[string]bool{"a": true}}}, all, EndpointsReady, false},
		{"not yet published", []EndpointPod{newReady}, []ServiceSlices{{Ready: map[string]bool{}}}, all, EndpointsPending, false},
		{"published in one of two services", []EndpointPod{newReady},
			[]ServiceSlices{{Ready: map[string]bool{"a": true}}, {Ready: map[string]bool{}}}, all, EndpointsPending, false},
		{"old pod still ready endpoint", []EndpointPod{newReady, {UID: "o", Ready: true}},
			[]ServiceSlices{{Ready: map[string]bool{"a": true, "o": true}}}, all, EndpointsPending, false},
		{"terminating new pod still ready endpoint", []EndpointPod{newReady, {UID: "b", New: true, Ready: true, Terminating: true}},
			[]ServiceSlices{{Ready: map[string]bool{"a": true, "b": true}}}, all, EndpointsPending, false},
		{"deleted pod still ready endpoint", []EndpointPod{newReady},
			[]ServiceSlices{{Ready: map[string]bool{"a": true, "gone": true}}}, func(uid string) bool { return uid != "gone" }, EndpointsPending, false},
		{"not-ready new pod published with publishNotReadyAddresses", []EndpointPod{{UID: "a", New: true}},
			[]ServiceSlices{{PublishNotReadyAddresses: true, Ready: map[string]bool{"a": true}}}, all, EndpointsReady, false},
		{"partition: old pod below it still published", []EndpointPod{newReady, {UID: "o", Ready: true}},
			[]ServiceSlices{{Ready: map[string]bool{"a": true, "o": true}}}, all, EndpointsReady, true},
		{"partition: updated pod not yet published", []EndpointPod{newReady, {UID: "o", Ready: true}},
			[]ServiceSlices{{Ready: map[string]bool{"o": true}}}, all, EndpointsPending, true},
		{"partition: terminating old pod still published", []EndpointPod{newReady, {UID: "o", Ready: true, Terminating: true}},
			[]ServiceSlices{{Ready: map[string]bool{"a": true, "o": true}}}, all, EndpointsPending, true},
		{"partition: deleted pod still published", []EndpointPod{newReady},
			[]ServiceSlices{{Ready: map[string]bool{"a": true, "gone": true}}}, func(uid string) bool { return uid != "gone" }, EndpointsPending, true},
	} {
		if got := EndpointsState(tc.pods, tc.services, tc.exists, tc.oldMayStay); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}
