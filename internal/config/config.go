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
	Resources = "resources"
	Retries   = "retries"
	Churn     = "churn"
	// Webhooks audits admission webhook configurations.
	Webhooks = "webhooks"
	// AdmissionProbes sends dry-run writes; it reads nothing unless
	// admissionProbes lists probes.
	AdmissionProbes = "admission_probes"
	// Timelines keeps the timeline of every rollout and custom-resource
	// episode (the store behind /api/v1/timelines) and reads Warning
	// Events for it, whether retries runs or not.
	Timelines = "timelines"
)

// KnownCollectors lists every collector name the file may mention, in the
// order they are started.
var KnownCollectors = []string{Rollouts, Pods, Endpoints, Watch, Resources, Retries, Churn, Webhooks, AdmissionProbes, Timelines}

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
	// Resources lists the custom resources the resources collector tracks
	// (none by default).
	Resources []Resource `yaml:"resources"`
	// Retries configures the retries collector (Warning Events).
	Retries RetriesConfig `yaml:"retries"`
	// Churn configures the churn collector (writes, hot objects, flaps).
	Churn ChurnConfig `yaml:"churn"`
	// Webhooks configures the admission webhook audit.
	Webhooks WebhookAudit `yaml:"webhooks"`
	// AdmissionProbes lists dry-run writes that time the admission chain
	// (none by default).
	AdmissionProbes []AdmissionProbe `yaml:"admissionProbes"`
	// Tracing sends OpenTelemetry spans of rollout episodes (off unless
	// its endpoint is set).
	Tracing Tracing `yaml:"tracing"`
	// Histograms chooses the classic buckets of the latency histograms.
	Histograms Histograms `yaml:"histograms"`
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
// Its sign is checked by validate, which knows the key it was written under.
type Duration time.Duration

// UnmarshalYAML decodes a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return &lineError{n.Line, fmt.Sprintf("want a duration such as \"5m\", got %q", n.Value)}
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return &lineError{n.Line, fmt.Sprintf("want a duration such as \"5m\", got %q", s)}
	}
	*d = Duration(v)
	return nil
}

// Default is the configuration used without a file: every collector on.
func Default() *Config {
	return &Config{
		NamespaceLabel: NamespaceLabel{Mode: NamespaceKeep},
		Stall:          Stall{SeriesLimit: DefaultStalledSeriesLimit},
		Retries:        defaultRetries(),
		Churn:          defaultChurn(),
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

// Parse decodes and validates a configuration document. The input must be
// one YAML document: yaml.v3 decodes only the first one, so a second one
// (after "---") would be ignored without a word.
func Parse(b []byte) (*Config, error) {
	// The node tree gives validate the line of every key; the strict decode
	// below cannot be done from it (yaml.v3's Node.Decode drops KnownFields).
	var root yaml.Node
	nodes := yaml.NewDecoder(bytes.NewReader(b))
	if err := nodes.Decode(&root); err != nil && !errors.Is(err, io.EOF) {
		return nil, cleanYAMLError(err, b, nil)
	}
	var second yaml.Node
	switch err := nodes.Decode(&second); {
	case err == nil:
		return nil, &lineError{second.Line, "a second YAML document: the file must hold exactly one (everything after the first \"---\" separator would be ignored)"}
	case !errors.Is(err, io.EOF):
		return nil, cleanYAMLError(err, b, nil)
	}

	c := Default()
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		return nil, cleanYAMLError(err, b, &root)
	}
	if c.NamespaceLabel.Mode == "" {
		c.NamespaceLabel.Mode = NamespaceKeep
	}
	pos := positions{&root}
	if c.Stall.SeriesLimit == 0 && pos.line("stall", "seriesLimit") == 0 {
		c.Stall.SeriesLimit = DefaultStalledSeriesLimit
	}
	if err := c.validate(pos); err != nil {
		return nil, err
	}
	return c, nil
}

// Kinds that stall.perKind may name.
var stallKinds = []string{"Deployment", "StatefulSet", "DaemonSet", "Pod"}

func (c *Config) validate(pos positions) error {
	var errs []string
	add := func(line int, format string, a ...any) {
		errs = append(errs, (&lineError{line, fmt.Sprintf(format, a...)}).Error())
	}
	for _, name := range sortedKeys(c.Collectors) {
		if !slices.Contains(KnownCollectors, name) {
			add(pos.keyLine("collectors", name), "collectors: unknown collector %q (known: %s)", name, strings.Join(KnownCollectors, ", "))
		}
	}
	modeLine := pos.line("namespaceLabel", "mode")
	switch c.NamespaceLabel.Mode {
	case NamespaceKeep, NamespaceDrop:
		if len(c.NamespaceLabel.Allow) > 0 {
			add(pos.line("namespaceLabel", "allow"), "namespaceLabel: allow is only used with mode %q", NamespaceAllowlist)
		}
	case NamespaceAllowlist:
		if len(c.NamespaceLabel.Allow) == 0 {
			add(modeLine, "namespaceLabel: mode allowlist needs a non-empty allow list")
		}
	default:
		add(modeLine, "namespaceLabel: unknown mode %q (want keep, drop or allowlist)", c.NamespaceLabel.Mode)
	}
	// A stall threshold is the age after which an unconverged object counts
	// as stalled. 0 used to be accepted and meant "use the default" for
	// stall.threshold and pods but "stalled at once" for workloads.
	const positive = "must be a positive duration such as \"5m\", got %v (an unconverged object counts as stalled once it is older than this)"
	if l := pos.line("stall", "threshold"); l > 0 && c.Stall.Threshold <= 0 {
		add(l, "stall.threshold: "+positive, time.Duration(c.Stall.Threshold))
	}
	for _, kind := range sortedKeys(c.Stall.PerKind) {
		if !slices.Contains(stallKinds, kind) {
			add(pos.keyLine("stall", "perKind", kind), "stall.perKind: unknown kind %q (want %s)", kind, strings.Join(stallKinds, ", "))
			continue
		}
		if d := c.Stall.PerKind[kind]; d <= 0 {
			add(pos.line("stall", "perKind", kind), "stall.perKind.%s: "+positive, kind, time.Duration(d))
		}
	}
	if c.Stall.SeriesLimit <= 0 {
		add(pos.line("stall", "seriesLimit"), "stall.seriesLimit: must be positive, got %d (it caps the per-object stalled series of each collector)", c.Stall.SeriesLimit)
	}
	c.validateResources(pos, add)
	c.validateRetries(pos, add)
	c.validateWebhooks(pos, add)
	c.validateTracing(pos, add)
	c.validateHistograms(pos, add)
	if len(errs) > 0 {
		// One line: the error ends up as a single slog attribute.
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// positions finds the line of a key in the decoded document.
type positions struct{ root *yaml.Node }

// find returns the key and value nodes at path (a sequence of mapping keys).
func (p positions) find(path ...string) (key, value *yaml.Node) {
	n := p.root
	if n == nil || n.Kind != yaml.DocumentNode || len(n.Content) == 0 {
		return nil, nil
	}
	n = n.Content[0]
	for _, k := range path {
		if n.Kind != yaml.MappingNode {
			return nil, nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				key, next = n.Content[i], n.Content[i+1]
			}
		}
		if next == nil {
			return nil, nil
		}
		n = next
	}
	return key, n
}

// line is the line of the value at path, 0 if the path is absent.
func (p positions) line(path ...string) int {
	if _, v := p.find(path...); v != nil {
		return v.Line
	}
	return 0
}

// keyLine is the line of the last key of path, 0 if the path is absent.
func (p positions) keyLine(path ...string) int {
	if k, _ := p.find(path...); k != nil {
		return k.Line
	}
	return 0
}

// lineError is a validation error at a line of the document.
type lineError struct {
	line int
	msg  string
}

func (e *lineError) Error() string {
	if e.line <= 0 {
		return e.msg
	}
	return fmt.Sprintf("line %d: %s", e.line, e.msg)
}

// yaml.v3 reports unknown keys as "line 3: field foo not found in type
// config.Config"; users know keys, not Go types.
var unknownField = regexp.MustCompile(`field (\S+) not found in type \S+`)

// cleanYAMLError is err as a user reads it: keys, not Go types, and a
// line. yaml.v3 leaves the line out of some of its errors (FuzzParse found
// them): see problemLine, which finds it in doc (and root, the node tree
// of the first pass, when the error comes from the typed one).
func cleanYAMLError(err error, doc []byte, root *yaml.Node) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs := make([]string, 0, len(te.Errors))
		for _, m := range te.Errors {
			msgs = append(msgs, unknownField.ReplaceAllString(m, `unknown key "$1"`))
		}
		return errors.New(strings.Join(msgs, "; "))
	}
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if l, ok := problemLine(msg, doc, root); ok {
		return &lineError{l, yamlLine.ReplaceAllString(msg, "")}
	}
	return errors.New(msg)
}

// itemLine is the line of key in the i-th item of the top-level list (the
// item's own line for an empty key), 0 if absent.
func (p positions) itemLine(list string, i int, key string) int {
	_, n := p.find(list)
	if n == nil || n.Kind != yaml.SequenceNode || i >= len(n.Content) {
		return 0
	}
	item := n.Content[i]
	if key == "" {
		return item.Line
	}
	if item.Kind != yaml.MappingNode {
		return 0
	}
	for j := 0; j+1 < len(item.Content); j += 2 {
		if item.Content[j].Value == key {
			return item.Content[j+1].Line
		}
	}
	return 0
}
