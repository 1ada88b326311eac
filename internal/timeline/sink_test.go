package timeline_test

import "github.com/kube-convergence/kube-convergence-exporter/internal/timeline"

// The store is what the API reads. That it is what the collectors feed
// (collectors.EpisodeSink) is checked where they are wired
// (collectors/all): the pure core imports no collector, not even in tests.
var _ timeline.Source = (*timeline.Store)(nil)
