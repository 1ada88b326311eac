package config

import (
	"strings"
	"time"
)

// Defaults of the retries and churn settings (docs/retries.md).
const (
	// DefaultFailingWindow is longer than the longest gap between two
	// written occurrences of an object failing for good: client-go's
	// default controller back-off caps at 1000 s
	// (workqueue.DefaultTypedControllerRateLimiter), the legacy recorder's
	// spam filter writes one occurrence per object and source every 300 s
	// after a burst of 25 (tools/record events_cache.go). 20 minutes keeps
	// such an object failing, and its failing run growing, between them.
	DefaultFailingWindow = 20 * time.Minute
	DefaultMaxReasons    = 100
	DefaultChurnWindow   = 5 * time.Minute
	DefaultHotWrites     = 60
	DefaultFlapWindow    = 10 * time.Minute
	DefaultMaxPairs      = 50
)

// DefaultChurnExclude lists resources whose writers are heartbeats, not
// controllers fighting: the kubelet's node status every 10 s, the
// EndpointSlice controller on every pod readiness change.
var DefaultChurnExclude = []string{"nodes", "endpointslices.discovery.k8s.io"}

// RetriesConfig configures the retries collector.
type RetriesConfig struct {
	// FailingWindow: an object counts as failing while its last Warning
	// occurrence is younger than this.
	FailingWindow Duration `yaml:"failingWindow"`
	// MaxReasons caps the distinct reason values (and, alike, controller
	// and kind values); later ones fold into "other".
	MaxReasons int `yaml:"maxReasons"`
}

// ChurnConfig configures the churn collector.
type ChurnConfig struct {
	// Window over which writes per object are counted.
	Window Duration `yaml:"window"`
	// HotWrites: an object with more writes without progress than this in
	// Window (by one manager) is hot.
	HotWrites int `yaml:"hotWrites"`
	// FlapWindow: an ownership change A→B and back B→A within it is a flap.
	FlapWindow Duration `yaml:"flapWindow"`
	// MaxPairs caps the distinct manager pairs; later ones fold into
	// other/other.
	MaxPairs int `yaml:"maxPairs"`
	// Exclude lists resources (in the API server's form, "nodes",
	// "endpointslices.discovery.k8s.io") whose writes are not counted.
	Exclude []string `yaml:"exclude"`
}

func defaultRetries() RetriesConfig {
	return RetriesConfig{FailingWindow: Duration(DefaultFailingWindow), MaxReasons: DefaultMaxReasons}
}

func defaultChurn() ChurnConfig {
	return ChurnConfig{Window: Duration(DefaultChurnWindow), HotWrites: DefaultHotWrites, FlapWindow: Duration(DefaultFlapWindow),
		MaxPairs: DefaultMaxPairs, Exclude: append([]string(nil), DefaultChurnExclude...)}
}

// validateRetries checks the retries and churn sections.
func (c *Config) validateRetries(pos positions, add func(line int, format string, a ...any)) {
	positiveDuration := func(d Duration, path ...string) {
		if d <= 0 {
			add(pos.line(path...), "%s: must be a positive duration such as \"10m\", got %v", strings.Join(path, "."), time.Duration(d))
		}
	}
	positiveInt := func(n int, why string, path ...string) {
		if n <= 0 {
			add(pos.line(path...), "%s: must be positive, got %d (%s)", strings.Join(path, "."), n, why)
		}
	}
	positiveDuration(c.Retries.FailingWindow, "retries", "failingWindow")
	positiveInt(c.Retries.MaxReasons, "it caps the reason label's values", "retries", "maxReasons")
	positiveDuration(c.Churn.Window, "churn", "window")
	positiveDuration(c.Churn.FlapWindow, "churn", "flapWindow")
	positiveInt(c.Churn.HotWrites, "writes per window above which an object is hot", "churn", "hotWrites")
	positiveInt(c.Churn.MaxPairs, "it caps the manager pairs of the flaps counter", "churn", "maxPairs")
	for i, r := range c.Churn.Exclude {
		if r == "" || r != strings.ToLower(r) || strings.ContainsAny(r, " /") {
			add(pos.line("churn", "exclude"), "churn.exclude[%d]: want a resource in the API server's form such as \"nodes\" or \"endpointslices.discovery.k8s.io\", got %q", i, r)
		}
	}
}

// ChurnExcluded reports whether writes to resource (in the API server's
// form) are not counted.
func (c *Config) ChurnExcluded(resource string) bool {
	for _, r := range c.Churn.Exclude {
		if r == resource {
			return true
		}
	}
	return false
}
