package config

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/util/jsonpath"
)

// Resource is one custom resource the resources collector tracks: its
// rollouts are judged by a kstatus-compatible convention (docs/resources.md).
type Resource struct {
	// Group and Resource name it as RBAC does: cert-manager.io, certificates.
	Group    string `yaml:"group"`
	Resource string `yaml:"resource"`
	// Version to watch; empty: the CRD's preferred served version.
	Version string `yaml:"version"`
	// Conditions must all be True to be ready (default [Ready]).
	Conditions []string `yaml:"conditions"`
	// ObservedGeneration is a JSONPath (kubectl wait --for=jsonpath syntax)
	// overriding where the observed generation is read.
	ObservedGeneration string `yaml:"observedGeneration"`
	// Ready lists `{path}=value` expressions that must all hold; it
	// replaces Conditions.
	Ready []string `yaml:"ready"`
	// StallThreshold overrides stall.threshold and --stall.threshold.
	StallThreshold Duration `yaml:"stallThreshold"`
	// Operator names the controller of the resource in alerts (Flux
	// kustomize-controller); empty: "the operator of <kind>".
	Operator string `yaml:"operator"`
	// ObservedGenerationLag opts the resource into
	// KubeConvergenceObservedGenerationLag (one alert per kind when its
	// operator observes no new generation); otherwise a not-observed
	// object is KubeConvergenceRolloutStuck's, one alert per object.
	ObservedGenerationLag bool `yaml:"observedGenerationLag"`
	// Preset names a known operator's convention (Presets); without it,
	// the preset of Group and Resource applies, if any. Keys set here
	// override the preset's.
	Preset string `yaml:"preset"`

	// ReadyExprs are Ready, parsed.
	ReadyExprs []ReadyExpr `yaml:"-"`
	// ObservedFields are the status fields holding an observed generation
	// (the newest wins) when ObservedGeneration is not set: the preset's,
	// else status.observedGeneration.
	ObservedFields []string `yaml:"-"`
}

// maxOperator bounds resources[].operator, a label value.
const maxOperator = 63

// ReadyExpr is one readiness expression: the value at Path must print as
// Value (as kubectl wait --for=jsonpath='{path}'=value compares).
type ReadyExpr struct {
	Path, Value string
}

// String is the resource in the API server's form: certificates.cert-manager.io.
func (r Resource) String() string { return r.Resource + "." + r.Group }

// ResourceStallThreshold is the stall threshold of r given the flag.
func (c *Config) ResourceStallThreshold(r Resource, flag time.Duration) time.Duration {
	if r.StallThreshold > 0 {
		return time.Duration(r.StallThreshold)
	}
	if c.Stall.Threshold > 0 {
		return time.Duration(c.Stall.Threshold)
	}
	return flag
}

// ParseJSONPath checks a path in kubectl's JSONPath template syntax
// (client-go util/jsonpath), as kubectl wait --for=jsonpath reads it.
func ParseJSONPath(path string) (*jsonpath.JSONPath, error) {
	if !strings.HasPrefix(path, "{") {
		return nil, fmt.Errorf("want a JSONPath in braces such as '{.status.observedGeneration}', got %q", path)
	}
	j := jsonpath.New("path")
	if err := j.Parse(path); err != nil {
		return nil, fmt.Errorf("JSONPath %q: %w", path, err)
	}
	return j, nil
}

// parseReadyExpr splits `{path}=value`.
func parseReadyExpr(s string) (ReadyExpr, error) {
	i := strings.LastIndex(s, "}=")
	if i < 0 {
		return ReadyExpr{}, fmt.Errorf("want '{path}=value' such as '{.status.phase}=Ready', got %q", s)
	}
	e := ReadyExpr{Path: s[:i+1], Value: s[i+2:]}
	if _, err := ParseJSONPath(e.Path); err != nil {
		return ReadyExpr{}, err
	}
	return e, nil
}

// validateResources checks the resources list: JSONPath syntax, no built-in
// or refused resource, no duplicate, a known preset, sane conditions and
// thresholds; and applies the presets under the keys set.
func (c *Config) validateResources(pos positions, add func(line int, format string, a ...any)) {
	seen := map[string]int{}
	for i := range c.Resources {
		r := &c.Resources[i]
		line := func(key string) int {
			if l := pos.itemLine("resources", i, key); l > 0 {
				return l
			}
			return pos.itemLine("resources", i, "")
		}
		switch {
		case r.Group == "":
			add(line("group"), "resources[%d]: group is required (core resources have no CRD; Deployments, StatefulSets and DaemonSets are tracked by the rollouts collector)", i)
		case !strings.Contains(r.Group, "."):
			// apiextensions rejects a CRD whose group has no dot, so such a
			// group is built in (apps, batch, policy...).
			add(line("group"), "resources[%d]: %q is a built-in API group, not a custom resource's (a CRD's group has at least one dot); built-in workloads are tracked by the rollouts collector", i, r.Group)
		}
		if r.Resource == "" {
			add(line("resource"), "resources[%d]: resource (the plural name, such as certificates) is required", i)
		} else if r.Resource != strings.ToLower(r.Resource) {
			add(line("resource"), "resources[%d]: resource must be the lower-case plural name, got %q", i, r.Resource)
		}
		for _, ref := range Refused {
			if r.Group == ref.Group && r.Resource == ref.Resource {
				add(line(""), "resources[%d]: %s: %s", i, r, ref.Why)
			}
		}
		preset, hasPreset := PresetFor(r.Group, r.Resource)
		if r.Preset != "" {
			if preset, hasPreset = PresetNamed(r.Preset); !hasPreset {
				add(line("preset"), "resources[%d].preset: unknown preset %q (known: %s)", i, r.Preset, presetNames())
			}
		}
		if r.Group != "" && r.Resource != "" {
			if first, dup := seen[r.String()]; dup {
				add(line(""), "resources[%d]: %s is already configured at line %d", i, r, first)
			} else {
				seen[r.String()] = line("")
			}
		}
		if r.ObservedGeneration != "" {
			if _, err := ParseJSONPath(r.ObservedGeneration); err != nil {
				add(line("observedGeneration"), "resources[%d].observedGeneration: %v", i, err)
			}
		}
		condLine := pos.itemLine("resources", i, "conditions")
		if len(r.Ready) > 0 && condLine > 0 {
			add(condLine, "resources[%d]: conditions and ready are exclusive (ready replaces conditions)", i)
		}
		if condLine > 0 && len(r.Conditions) == 0 {
			add(condLine, "resources[%d].conditions: must not be empty (default: [Ready])", i)
		}
		for j, s := range r.Ready {
			e, err := parseReadyExpr(s)
			if err != nil {
				add(line("ready"), "resources[%d].ready[%d]: %v", i, j, err)
				continue
			}
			r.ReadyExprs = append(r.ReadyExprs, e)
		}
		if len(r.Ready) == 0 && len(r.Conditions) == 0 && condLine == 0 {
			r.Conditions = []string{"Ready"}
			if hasPreset {
				r.Conditions = slices.Clone(preset.Conditions)
			}
		}
		if r.Operator == "" && hasPreset {
			r.Operator = preset.Operator
		}
		if r.ObservedGeneration == "" {
			r.ObservedFields = defaultObservedFields
			if hasPreset && len(preset.ObservedFields) > 0 {
				r.ObservedFields = preset.ObservedFields
			}
		}
		if len(r.Operator) > maxOperator {
			add(line("operator"), "resources[%d].operator: at most %d characters (it is a label value), got %d", i, maxOperator, len(r.Operator))
		}
		if l := pos.itemLine("resources", i, "stallThreshold"); l > 0 && r.StallThreshold <= 0 {
			add(l, "resources[%d].stallThreshold: must be a positive duration such as \"10m\", got %v", i, time.Duration(r.StallThreshold))
		}
	}
}
