package tracker

// EndpointPod is a workload's pod as the endpoints check sees it.
type EndpointPod struct {
	UID         string
	New         bool // of the workload's current revision
	Ready       bool
	Terminating bool
}

// ServiceSlices is one Service selecting the workload's pods, with the pods
// that its EndpointSlices list as ready endpoints (by pod UID).
type ServiceSlices struct {
	PublishNotReadyAddresses bool
	Ready                    map[string]bool
}

// EndpointsState decides whether a workload's pods are published as they
// should be: every Ready, non-terminating pod of the new revision is a ready
// endpoint of every selecting Service, and no other pod of the workload
// (old revision, not Ready, terminating) still is. exists tells whether a
// pod UID is still in the cache: a ready endpoint of a pod that no longer
// exists is stale (a scale-down not yet propagated) and keeps the state
// pending. With publishNotReadyAddresses a pod is published whether or not
// it is Ready, so readiness is not required there.
//
// oldMayStay: old-revision pods that are not terminating may be published
// or not (a StatefulSet with rollingUpdate.partition P > 0 keeps its pods
// below P on the old revision, serving, on purpose).
func EndpointsState(pods []EndpointPod, services []ServiceSlices, exists func(uid string) bool, oldMayStay bool) Endpoints {
	if len(services) == 0 {
		return EndpointsNoService
	}
	for _, s := range services {
		for _, p := range pods {
			if oldMayStay && !p.New && !p.Terminating {
				continue
			}
			want := p.New && !p.Terminating && (p.Ready || s.PublishNotReadyAddresses)
			if s.Ready[p.UID] != want {
				return EndpointsPending
			}
		}
		for uid := range s.Ready {
			if !exists(uid) {
				return EndpointsPending
			}
		}
	}
	return EndpointsReady
}
