package main

import (
	"fmt"
	"time"
)

// Shape of the run: N pods in N/10 Deployments of 10 replicas, each behind
// a Service, in N/200 namespaces. 1 % of the Deployments (at least
// minTruthDeployments) are truth Deployments, in namespaces of their own,
// 20 to a namespace like the others: kwok leaves their pods not Ready and
// the truth writer makes them Ready.
const (
	replicas            = 10
	perNamespace        = 20 // Deployments per namespace: N/200 namespaces
	minTruthDeployments = 5  // 50 pods: 100 Ready writes over the run's two phases
	podsPerNode         = 1000
	podDelay            = 100 * time.Millisecond // kwok's pod-create and pod-ready delays
)

type shape struct {
	pods, deployments, namespaces int
	truthDeployments, truthNS     int
	nodes                         int
}

func newShape(pods int) (shape, error) {
	if pods < 2*replicas*perNamespace || pods%(replicas*perNamespace) != 0 {
		return shape{}, fmt.Errorf("SCALE_PODS: want a multiple of %d, at least %d (N/10 Deployments in N/200 namespaces), got %d",
			replicas*perNamespace, 2*replicas*perNamespace, pods)
	}
	s := shape{pods: pods, deployments: pods / replicas, namespaces: pods / (replicas * perNamespace)}
	s.truthDeployments = max(s.deployments/100, minTruthDeployments)
	s.truthNS = (s.truthDeployments + perNamespace - 1) / perNamespace
	// A rolling update with the default 25 % surge runs 13 pods per
	// Deployment at its peak, and old pods stay bound while kwok deletes
	// them: room for 1.5 N, and one node more.
	s.nodes = (pods*3/2+podsPerNode-1)/podsPerNode + 1
	return s, nil
}

type deploymentRef struct {
	namespace, name string
	truth           bool
}

func (s shape) namespaceNames() (regular, truth []string) {
	for i := range s.truthNS {
		truth = append(truth, fmt.Sprintf("scale-truth-%02d", i))
	}
	for i := range s.namespaces - s.truthNS {
		regular = append(regular, fmt.Sprintf("scale-%03d", i))
	}
	return regular, truth
}

// deploymentRefs lists every Deployment: the truth ones first, then the
// others spread over the regular namespaces.
func (s shape) deploymentRefs() []deploymentRef {
	regular, truth := s.namespaceNames()
	var out []deploymentRef
	for i := range s.truthDeployments {
		out = append(out, deploymentRef{namespace: truth[i/perNamespace], name: fmt.Sprintf("truth-%03d", i), truth: true})
	}
	for i := range s.deployments - s.truthDeployments {
		out = append(out, deploymentRef{namespace: regular[i%len(regular)], name: fmt.Sprintf("app-%04d", i)})
	}
	return out
}

// phaseTimeout bounds each phase (creation, churn): the 2,000-pod run on
// 2 busy cores took 92 s and 152 s (docs/performance.md), about 75 ms per
// pod at most; twice that, and 10 minutes for a machine busier still.
func (s shape) phaseTimeout() time.Duration {
	return 10*time.Minute + time.Duration(s.pods)*150*time.Millisecond
}
