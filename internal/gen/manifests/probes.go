package manifests

import (
	"bytes"
	"fmt"
	"slices"

	"gopkg.in/yaml.v3"

	"github.com/kube-convergence/kube-convergence-exporter/internal/config"
)

// ProbeRoleName names the Role that lets the exporter send its admission
// probes (deploy/components/admission-probes binds it; the Helm chart's
// templates/admission-probes.yaml renders the same rules as
// <fullname>-admission-probes).
const ProbeRoleName = "kube-convergence-exporter-admission-probes"

// probeVerbs are the verbs a probe's dry-run request needs: RBAC
// authorizes a dry-run write exactly like the write (UPDATE also reads the
// object first).
var probeVerbs = map[string][]string{
	config.OperationCreate: {"create"},
	config.OperationUpdate: {"get", "update"},
	config.OperationDelete: {"delete"},
}

type role struct {
	APIVersion string       `yaml:"apiVersion"`
	Kind       string       `yaml:"kind"`
	Metadata   roleMeta     `yaml:"metadata"`
	Rules      []policyRule `yaml:"rules"`
}

type roleMeta struct {
	Name      string `yaml:"name"`
	Namespace string `yaml:"namespace"`
}

const probeRolesHeader = `---
# The admission probes' write verbs (dry-run requests are authorized like
# the writes), one Role per probed namespace, narrower than a ClusterRole
# rule. Bind each to the exporter's ServiceAccount with a RoleBinding, as
# deploy/components/admission-probes does for its namespace (the Helm chart
# renders these Roles and their bindings from config.admissionProbes).
`

// ProbeRoles renders one Role per namespace the probes write to, with
// the verbs their operations need on their resources; nil without probes.
func ProbeRoles(probes []config.AdmissionProbe) ([]byte, error) {
	if len(probes) == 0 {
		return nil, nil
	}
	// namespace -> group -> resource -> verbs
	byNS := map[string]map[string]map[string][]string{}
	for _, p := range probes {
		group, resource := p.GroupResource()
		if byNS[p.Namespace] == nil {
			byNS[p.Namespace] = map[string]map[string][]string{}
		}
		if byNS[p.Namespace][group] == nil {
			byNS[p.Namespace][group] = map[string][]string{}
		}
		for _, v := range probeVerbs[p.Operation] {
			if !slices.Contains(byNS[p.Namespace][group][resource], v) {
				byNS[p.Namespace][group][resource] = append(byNS[p.Namespace][group][resource], v)
			}
		}
	}
	var buf bytes.Buffer
	buf.WriteString(probeRolesHeader)
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	for _, ns := range sortedKeys(byNS) {
		var rules []policyRule
		for _, g := range sortedKeys(byNS[ns]) {
			for _, r := range sortedKeys(byNS[ns][g]) {
				verbs := slices.Clone(byNS[ns][g][r])
				slices.Sort(verbs)
				rules = append(rules, policyRule{APIGroups: []string{g}, Resources: []string{r}, Verbs: verbs})
			}
		}
		if err := enc.Encode(role{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role",
			Metadata: roleMeta{Name: ProbeRoleName, Namespace: ns}, Rules: rules}); err != nil {
			return nil, fmt.Errorf("probe roles: encode: %w", err)
		}
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("probe roles: encode: %w", err)
	}
	return buf.Bytes(), nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// APIServerMetricsRoleName names the ClusterRole that lets the webhooks
// collector read the API server's /metrics (webhooks.apiServerMetrics).
const APIServerMetricsRoleName = "kube-convergence-exporter-apiserver-metrics"

// APIServerMetricsRole renders get on the non-resource URL /metrics, which
// webhooks.apiServerMetrics needs; nil when it is off.
func APIServerMetricsRole(cfg *config.Config) []byte {
	if !cfg.Webhooks.APIServerMetrics.Enabled {
		return nil
	}
	return []byte(`---
# webhooks.apiServerMetrics reads the API server's /metrics. Bind this
# ClusterRole to the exporter's ServiceAccount with a ClusterRoleBinding.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: ` + APIServerMetricsRoleName + `
rules:
  - nonResourceURLs:
      - /metrics
    verbs:
      - get
`)
}
