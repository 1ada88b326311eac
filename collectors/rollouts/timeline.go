package rollouts

import "github.com/kube-convergence/kube-convergence-exporter/internal/timeline"

// SetTimelines makes the collector feed store with the evidence of the
// open episodes (call before Start).
func (c *Collector) SetTimelines(store *timeline.Store) { c.tl = store }
