package config

// The series budget of docs/cardinality.md, from `make cardinality`: every
// namespace busy (a Deployment created, template-changed and scaled behind
// a Service, a StatefulSet, a DaemonSet and a Job), rounded up. The chart
// and the prometheus-operator component set sampleLimit from SampleLimit;
// deploy/ tests compare their renders with it.
const (
	// BudgetFixed: series without a namespace label, the exporter's own
	// go_ and process_ series included (measured 598).
	BudgetFixed = 700
	// BudgetPerNamespace: series per busy namespace label value with every
	// classic bucket (measured 2,034).
	BudgetPerNamespace = 2100
	// BudgetPerNamespaceThresholds: the same with histograms.classicBuckets:
	// thresholds, native histograms counted (one sample each) as Prometheus
	// counts them against sample_limit (measured 457).
	BudgetPerNamespaceThresholds = 500
	// BudgetDefaultNamespaces is the number of busy namespaces the
	// defaults leave room for.
	BudgetDefaultNamespaces = 50
)

// SampleLimit is a scrape sample limit for the exporter with this
// configuration on a cluster of namespaces busy namespaces: 1.5 × (fixed
// + per namespace × namespace label values), rounded up, where the label
// values are the namespaces (keep), 1 (drop) or the allow-list and
// "other" (allowlist).
func (c *Config) SampleLimit(namespaces int) int {
	values := namespaces
	switch c.NamespaceLabel.Mode {
	case NamespaceDrop:
		values = 1
	case NamespaceAllowlist:
		values = min(len(c.NamespaceLabel.Allow)+1, namespaces)
	}
	per := BudgetPerNamespace
	if c.Histograms.ClassicBuckets == ClassicThresholds {
		per = BudgetPerNamespaceThresholds
	}
	return (3*(BudgetFixed+per*values) + 1) / 2
}
