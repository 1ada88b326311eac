package config

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Defaults of the webhooks section and of each admission probe.
const (
	// DefaultWebhookMaxTimeout is the API server's own default
	// timeoutSeconds in admissionregistration.k8s.io/v1: a webhook that
	// waits longer adds more than that to every matching write.
	DefaultWebhookMaxTimeout = 10 * time.Second
	// DefaultCAExpiryWarning is 30 days: time to rotate a CA by hand.
	DefaultCAExpiryWarning = 720 * time.Hour
	// DefaultAPIServerMetricsInterval paces reads of the API server's /metrics.
	DefaultAPIServerMetricsInterval = 60 * time.Second
	// DefaultProbeInterval and DefaultProbeTimeout: the timeout is above
	// the largest webhook timeout the API allows (30 s), so a probe sees the
	// API server's own answer for a webhook that times out.
	DefaultProbeInterval = 30 * time.Second
	DefaultProbeTimeout  = 35 * time.Second
)

// WebhookAudit configures the webhooks collector's audit.
type WebhookAudit struct {
	// MaxTimeout: a webhook with a longer timeoutSeconds has the finding
	// timeout_too_long.
	MaxTimeout Duration `yaml:"maxTimeout"`
	// OwnNamespace is the exporter's namespace when it does not run with a
	// service account (out of cluster): matches_own_namespace is evaluated
	// against it. Empty: that finding is not evaluated out of cluster.
	OwnNamespace string `yaml:"ownNamespace"`
	// CAExpiryWarning: a caBundle certificate expiring within it has the
	// finding ca_bundle_expiring.
	CAExpiryWarning Duration `yaml:"caExpiryWarning"`
	// APIServerMetrics reads the API server's webhook latency histogram.
	APIServerMetrics APIServerMetrics `yaml:"apiServerMetrics"`
}

// APIServerMetrics is the optional read of the API server's own /metrics.
type APIServerMetrics struct {
	Enabled  bool     `yaml:"enabled"`
	Interval Duration `yaml:"interval"`
}

// Admission probe operations.
const (
	OperationCreate = "CREATE"
	OperationUpdate = "UPDATE"
	OperationDelete = "DELETE"
)

var probeOperations = []string{OperationCreate, OperationUpdate, OperationDelete}

// AdmissionProbe is one dry-run write the admission_probes collector sends
// at an interval, to time the admission chain its request goes through.
type AdmissionProbe struct {
	Name string `yaml:"name"`
	// Resource as RBAC names it: configmaps, deployments.apps.
	Resource  string `yaml:"resource"`
	Namespace string `yaml:"namespace"`
	// Operation is CREATE, UPDATE or DELETE. UPDATE and DELETE act on the
	// existing object named by Object's metadata.name.
	Operation string         `yaml:"operation"`
	Object    map[string]any `yaml:"object"`
	Interval  Duration       `yaml:"interval"`
	Timeout   Duration       `yaml:"timeout"`
}

// GroupResource splits the probe's Resource into group and plural.
func (p AdmissionProbe) GroupResource() (group, resource string) {
	resource, group, _ = strings.Cut(p.Resource, ".")
	return group, resource
}

// APIVersion splits the object's apiVersion into group and version ("v1"
// is the core group; "" "" when absent or malformed). Probes send at this
// version: the one the manifest is written in.
func (p AdmissionProbe) APIVersion() (group, version string) {
	av, _ := p.Object["apiVersion"].(string)
	group, version, ok := strings.Cut(av, "/")
	if !ok {
		group, version = "", av
	}
	if version == "" || strings.Contains(version, "/") || (ok && group == "") {
		return "", ""
	}
	return group, version
}

// ObjectName is the object's metadata.name ("" when absent).
func (p AdmissionProbe) ObjectName() string {
	meta, _ := p.Object["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	return name
}

// ObjectLabels is the object's metadata.labels.
func (p AdmissionProbe) ObjectLabels() map[string]string {
	meta, _ := p.Object["metadata"].(map[string]any)
	raw, _ := meta["labels"].(map[string]any)
	out := map[string]string{}
	for k, v := range raw {
		out[k] = fmt.Sprint(v)
	}
	return out
}

// WebhookMaxTimeout is webhooks.maxTimeout or its default.
func (c *Config) WebhookMaxTimeout() time.Duration {
	if c.Webhooks.MaxTimeout > 0 {
		return time.Duration(c.Webhooks.MaxTimeout)
	}
	return DefaultWebhookMaxTimeout
}

// WebhookCAExpiryWarning is webhooks.caExpiryWarning or its default.
func (c *Config) WebhookCAExpiryWarning() time.Duration {
	if c.Webhooks.CAExpiryWarning > 0 {
		return time.Duration(c.Webhooks.CAExpiryWarning)
	}
	return DefaultCAExpiryWarning
}

// APIServerMetricsInterval is webhooks.apiServerMetrics.interval or its default.
func (c *Config) APIServerMetricsInterval() time.Duration {
	if c.Webhooks.APIServerMetrics.Interval > 0 {
		return time.Duration(c.Webhooks.APIServerMetrics.Interval)
	}
	return DefaultAPIServerMetricsInterval
}

// groupName quotes an API group, saying which one "" is.
func groupName(g string) string {
	if g == "" {
		return `"" (core)`
	}
	return fmt.Sprintf("%q", g)
}

// dnsLabel is a namespace name (RFC 1123 label).
var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// probeResource is plural or plural.group, lower case.
var probeResource = regexp.MustCompile(`^[a-z0-9]+(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

func (c *Config) validateWebhooks(pos positions, add func(line int, format string, a ...any)) {
	if l := pos.line("webhooks", "maxTimeout"); l > 0 && c.Webhooks.MaxTimeout <= 0 {
		add(l, "webhooks.maxTimeout: must be a positive duration such as \"10s\", got %v", time.Duration(c.Webhooks.MaxTimeout))
	}
	if l := pos.line("webhooks", "caExpiryWarning"); l > 0 && c.Webhooks.CAExpiryWarning <= 0 {
		add(l, "webhooks.caExpiryWarning: must be a positive duration such as \"720h\", got %v", time.Duration(c.Webhooks.CAExpiryWarning))
	}
	if l := pos.line("webhooks", "apiServerMetrics", "interval"); l > 0 && c.Webhooks.APIServerMetrics.Interval <= 0 {
		add(l, "webhooks.apiServerMetrics.interval: must be a positive duration such as \"60s\", got %v", time.Duration(c.Webhooks.APIServerMetrics.Interval))
	}
	if ns := c.Webhooks.OwnNamespace; ns != "" && !dnsLabel.MatchString(ns) {
		add(pos.line("webhooks", "ownNamespace"), "webhooks.ownNamespace: %q is not a namespace name", ns)
	}

	seen := map[string]int{}
	for i := range c.AdmissionProbes {
		p := &c.AdmissionProbes[i]
		line := func(key string) int {
			if l := pos.itemLine("admissionProbes", i, key); l > 0 {
				return l
			}
			return pos.itemLine("admissionProbes", i, "")
		}
		switch {
		case p.Name == "":
			add(line("name"), "admissionProbes[%d]: name is required (it is the probe label)", i)
		case seen[p.Name] > 0:
			add(line("name"), "admissionProbes[%d]: name %q is already used at line %d", i, p.Name, seen[p.Name])
		default:
			seen[p.Name] = line("name")
		}
		if !probeResource.MatchString(p.Resource) {
			add(line("resource"), "admissionProbes[%d].resource: want a lower-case plural resource such as configmaps or deployments.apps, got %q", i, p.Resource)
		}
		if !dnsLabel.MatchString(p.Namespace) {
			add(line("namespace"), "admissionProbes[%d].namespace: want a namespace name (probes write namespaced resources), got %q", i, p.Namespace)
		}
		if !slices.Contains(probeOperations, p.Operation) {
			add(line("operation"), "admissionProbes[%d].operation: want one of %s, got %q", i, strings.Join(probeOperations, ", "), p.Operation)
		}
		if len(p.Object) == 0 {
			add(line("object"), "admissionProbes[%d].object: an inline manifest is required (apiVersion, kind, metadata.name)", i)
		} else {
			if av, ok := p.Object["apiVersion"].(string); !ok {
				add(line("object"), "admissionProbes[%d].object: apiVersion is required", i)
			} else if g, v := p.APIVersion(); v == "" {
				add(line("object"), "admissionProbes[%d].object: apiVersion %q is not group/version or version", i, av)
			} else if rg, _ := p.GroupResource(); probeResource.MatchString(p.Resource) && g != rg {
				// The request goes to the resource's group at the
				// object's version: the two must agree.
				add(line("object"), "admissionProbes[%d].object: apiVersion %q is in API group %s, resource %q in %s", i, av, groupName(g), p.Resource, groupName(rg))
			}
			if _, ok := p.Object["kind"].(string); !ok {
				add(line("object"), "admissionProbes[%d].object: kind is required", i)
			}
			if p.ObjectName() == "" {
				add(line("object"), "admissionProbes[%d].object: metadata.name is required (UPDATE and DELETE act on the object of that name)", i)
			}
			if _, err := json.Marshal(p.Object); err != nil {
				add(line("object"), "admissionProbes[%d].object: not a JSON-compatible manifest: %v", i, err)
			}
			meta, _ := p.Object["metadata"].(map[string]any)
			if ns, ok := meta["namespace"].(string); ok && ns != p.Namespace {
				add(line("object"), "admissionProbes[%d].object: metadata.namespace %q differs from namespace %q", i, ns, p.Namespace)
			}
		}
		if l := pos.itemLine("admissionProbes", i, "interval"); l > 0 && p.Interval <= 0 {
			add(l, "admissionProbes[%d].interval: must be a positive duration such as \"30s\", got %v", i, time.Duration(p.Interval))
		} else if p.Interval == 0 {
			p.Interval = Duration(DefaultProbeInterval)
		}
		if l := pos.itemLine("admissionProbes", i, "timeout"); l > 0 && p.Timeout <= 0 {
			add(l, "admissionProbes[%d].timeout: must be a positive duration such as \"35s\", got %v", i, time.Duration(p.Timeout))
		} else if p.Timeout == 0 {
			p.Timeout = Duration(DefaultProbeTimeout)
		}
	}
}
