package timeline_test

import (
	"github.com/kube-convergence/kube-convergence-exporter/collectors"
	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
)

// The store is what the collectors feed and what the API reads.
var (
	_ collectors.EpisodeSink = (*timeline.Store)(nil)
	_ timeline.Source        = (*timeline.Store)(nil)
)
