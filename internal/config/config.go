// Package config reads the exporter's optional configuration file: what is
// per collector (which collectors run, stall thresholds, label policy). Flags
// hold what is per process. The file is decoded strictly: an unknown key is an
// error naming the file, line and key, because a typo that silently falls back
// to a default is how thresholds end up wrong in production.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Collector names. Every collector is enabled unless the file disables it.
const (
	Rollouts  = "rollouts"
	Pods      = "pods"
	Endpoints = "endpoints"
	Watch     = "watch"
)

// KnownCollectors lists every collector name the file may mention, in the
// order they are started.
var KnownCollectors = []string{Rollouts, Pods, Endpoints, Watch}

// Namespace label modes.
const (
	NamespaceKeep      = "keep"      // the object's namespace (default)
	NamespaceDrop      = "drop"      // always ""
	NamespaceAllowlist = "allowlist" // listed namespaces kept, others folded into "other"
)

// NamespaceOther is the label value that namespaces outside the allow-list fold into.
const NamespaceOther = "other"

// DefaultStallThreshold is the default of --stall.threshold.
const DefaultStallThreshold = 5 * time.Minute

// DefaultStalledSeriesLimit caps the per-object stalled gauges of one collector.
const DefaultStalledSeriesLimit = 500

// Config is the whole file. The zero value is not valid; use Default or Load.
type Config struct {
	// Collectors maps a collector name to its settings. Absent collectors
	// are enabled with defaults.
	Collectors map[string]CollectorConfig `yaml:"collectors"`
	// NamespaceLabel bounds the cardinality of the namespace label.
	NamespaceLabel NamespaceLabel `yaml:"namespaceLabel"`
	// Stall configures when an unconverged object counts as stalled.
	Stall Stall `yaml:"stall"`
}

// CollectorConfig is one collector's settings.
type CollectorConfig struct {
	Enabled *bool `yaml:"enabled"`
}

// NamespaceLabel is the label policy for the namespace label of histograms,
// counters and aggregate gauges.
type NamespaceLabel struct {
	Mode  string   `yaml:"mode"`
	Allow []string `yaml:"allow"`
}

// Stall holds stall thresholds: Threshold overrides --stall.threshold, PerKind
// overrides both for one workload kind (Deployment, StatefulSet, DaemonSet, Pod).
type Stall struct {
	Threshold   Duration            `yaml:"threshold"`
	PerKind     map[string]Duration `yaml:"perKind"`
	SeriesLimit int                 `yaml:"seriesLimit"`
}

// Duration is a time.Duration written as a Go duration string ("90s", "5m").
type Duration time.Duration

// UnmarshalYAML decodes a Go duration string and rejects negative values.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return &lineError{n.Line, fmt.Sprintf("want a duration such as \"5m\", got %q", n.Value)}
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return &lineError{n.Line, fmt.Sprintf("want a non-negative duration such as \"5m\", got %q", s)}
	}
	*d = Duration(v)
	return nil
}

// Default is the configuration used without a file: every collector on.
func Default() *Config {
	return &Config{
		NamespaceLabel: NamespaceLabel{Mode: NamespaceKeep},
		Stall:          Stall{SeriesLimit: DefaultStalledSeriesLimit},
	}
}

// Enabled reports whether the named collector runs.
func (c *Config) Enabled(name string) bool {
	cc, ok := c.Collectors[name]
	return !ok || cc.Enabled == nil || *cc.Enabled
}

// StallThreshold returns the stall threshold for kind, given the flag's value.
func (c *Config) StallThreshold(kind string, flag time.Duration) time.Duration {
	if d, ok := c.Stall.PerKind[kind]; ok {
		return time.Duration(d)
	}
	if c.Stall.Threshold > 0 {
		return time.Duration(c.Stall.Threshold)
	}
	return flag
}

// NamespaceLabelValue maps a namespace to its label value under the policy.
func (c *Config) NamespaceLabelValue(ns string) string {
	switch c.NamespaceLabel.Mode {
	case NamespaceDrop:
		return ""
	case NamespaceAllowlist:
		if slices.Contains(c.NamespaceLabel.Allow, ns) {
			return ns
		}
		return NamespaceOther
	default:
		return ns
	}
}

// Load reads and validates the file at path. Errors name the file and line.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	c, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes and validates a configuration document.
func Parse(b []byte) (*Config, error) {
	c := Default()
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		return nil, cleanYAMLError(err)
	}
	if c.NamespaceLabel.Mode == "" {
		c.NamespaceLabel.Mode = NamespaceKeep
	}
	if c.Stall.SeriesLimit == 0 {
		c.Stall.SeriesLimit = DefaultStalledSeriesLimit
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Config) validate() error {
	var errs []error
	for name := range c.Collectors {
		if !slices.Contains(KnownCollectors, name) {
			errs = append(errs, fmt.Errorf("collectors: unknown collector %q (known: %s)", name, strings.Join(KnownCollectors, ", ")))
		}
	}
	switch c.NamespaceLabel.Mode {
	case NamespaceKeep, NamespaceDrop:
		if len(c.NamespaceLabel.Allow) > 0 {
			errs = append(errs, fmt.Errorf("namespaceLabel: allow is only used with mode %q", NamespaceAllowlist))
		}
	case NamespaceAllowlist:
		if len(c.NamespaceLabel.Allow) == 0 {
			errs = append(errs, errors.New("namespaceLabel: mode allowlist needs a non-empty allow list"))
		}
	default:
		errs = append(errs, fmt.Errorf("namespaceLabel: unknown mode %q (want keep, drop or allowlist)", c.NamespaceLabel.Mode))
	}
	for kind := range c.Stall.PerKind {
		if !slices.Contains([]string{"Deployment", "StatefulSet", "DaemonSet", "Pod"}, kind) {
			errs = append(errs, fmt.Errorf("stall.perKind: unknown kind %q (want Deployment, StatefulSet, DaemonSet or Pod)", kind))
		}
	}
	if c.Stall.SeriesLimit < 0 {
		errs = append(errs, fmt.Errorf("stall.seriesLimit: must be positive, got %d", c.Stall.SeriesLimit))
	}
	return errors.Join(errs...)
}

// lineError is a validation error at a line of the document.
type lineError struct {
	line int
	msg  string
}

func (e *lineError) Error() string { return fmt.Sprintf("line %d: %s", e.line, e.msg) }

// yaml.v3 reports unknown keys as "line 3: field foo not found in type
// config.Config"; users know keys, not Go types.
var unknownField = regexp.MustCompile(`field (\S+) not found in type \S+`)

func cleanYAMLError(err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs := make([]string, 0, len(te.Errors))
		for _, m := range te.Errors {
			msgs = append(msgs, unknownField.ReplaceAllString(m, `unknown key "$1"`))
		}
		return errors.New(strings.Join(msgs, "; "))
	}
	return fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "yaml: "))
}
