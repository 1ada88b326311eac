package config

import (
	"slices"
	"strings"
)

// Preset is the convention of a known operator's resource, read from its
// source at a named version: which conditions say it is ready, and which
// status fields hold an observed generation. A configured resource takes
// the preset of its group and resource, or the one it names with
// `preset:`; every key it sets itself overrides the preset's.
type Preset struct {
	Name string
	// Group and Resource select the preset without `preset:`; empty for a
	// preset whose groups vary (Crossplane's providers and XRDs), usable
	// by name only.
	Group, Resource string
	// Conditions must all be True.
	Conditions []string
	// ObservedFields are the status fields holding an observed generation,
	// besides the conditions' own; the newest wins.
	ObservedFields []string
	// Operator names the controller in alerts (Resource.Operator).
	Operator string
	// Source names the upstream code read, for docs/resources.md.
	Source string
}

// defaultObservedFields is where the observed generation is read when
// neither a preset nor the config says otherwise.
var defaultObservedFields = []string{"observedGeneration"}

// Presets lists the known operators' conventions (docs/resources.md has
// the same table, with what each convention means). Their names are
// public: a renamed preset breaks configurations.
var Presets = []Preset{
	// kustomize-controller finalizeStatus sets status.observedGeneration
	// only when Ready is True; fluxcd/pkg runtime/conditions.Set writes the
	// object's generation on every condition, so a failing change is
	// observed through its conditions.
	{Name: "flux-kustomization", Operator: "Flux kustomize-controller", Group: "kustomize.toolkit.fluxcd.io", Resource: "kustomizations", Conditions: []string{"Ready"},
		Source: "fluxcd/kustomize-controller v1.9.6 (internal/controller/kustomization_controller.go finalizeStatus), fluxcd/pkg runtime v0.110.3 (conditions/setter.go Set)"},
	// helm-controller patches status.observedGeneration only on a terminal
	// or successful result; status.lastAttemptedGeneration moves when an
	// install or upgrade is attempted.
	{Name: "flux-helmrelease", Operator: "Flux helm-controller", Group: "helm.toolkit.fluxcd.io", Resource: "helmreleases", Conditions: []string{"Ready"},
		ObservedFields: []string{"observedGeneration", "lastAttemptedGeneration"},
		Source:         "fluxcd/helm-controller v1.6.3 (internal/controller/helmrelease_controller.go Reconcile and reconcileRelease, internal/reconcile/atomic_release.go)"},
	{Name: "flux-gitrepository", Operator: "Flux source-controller", Group: "source.toolkit.fluxcd.io", Resource: "gitrepositories", Conditions: []string{"Ready"},
		Source: "fluxcd/source-controller v1.9.1 (internal/reconcile/reconcile.go ComputeReconcileResult)"},
	{Name: "flux-ocirepository", Operator: "Flux source-controller", Group: "source.toolkit.fluxcd.io", Resource: "ocirepositories", Conditions: []string{"Ready"},
		Source: "fluxcd/source-controller v1.9.1 (internal/reconcile/reconcile.go ComputeReconcileResult)"},
	// cert-manager writes observedGeneration on its conditions only, and
	// appends them in the order they were first set: Issuing often
	// comes before Ready.
	{Name: "cert-manager-certificate", Operator: "cert-manager", Group: "cert-manager.io", Resource: "certificates", Conditions: []string{"Ready"},
		Source: "cert-manager v1.21.1 (pkg/api/util/conditions.go SetCertificateCondition, pkg/controller/certificates/readiness, trigger, issuing)"},
	{Name: "cert-manager-issuer", Operator: "cert-manager", Group: "cert-manager.io", Resource: "issuers", Conditions: []string{"Ready"},
		Source: "cert-manager v1.21.1 (pkg/api/util/conditions.go SetIssuerCondition, pkg/issuer/*/setup.go)"},
	{Name: "cert-manager-clusterissuer", Operator: "cert-manager", Group: "cert-manager.io", Resource: "clusterissuers", Conditions: []string{"Ready"},
		Source: "cert-manager v1.21.1 (pkg/api/util/conditions.go SetIssuerCondition, pkg/issuer/*/setup.go)"},
	// Synced says the managed reconciler applied the spec (it carries
	// the generation: conditions.ObservedGenerationPropagationManager);
	// Ready says the external resource is available.
	{Name: "crossplane-managed", Operator: "the Crossplane provider", Conditions: []string{"Synced", "Ready"},
		Source: "crossplane/crossplane-runtime v2.4.0 (pkg/reconciler/managed/reconciler.go, pkg/conditions/manager.go), crossplane/crossplane apis v2.3.4 (apis/core/v2/condition.go)"},
	{Name: "crossplane-claim", Operator: "Crossplane", Conditions: []string{"Synced", "Ready"},
		Source: "crossplane/crossplane v2.3.4 (internal/controller/apiextensions/claim/reconciler.go Reconcile)"},
	// Available: enough pods ready; Reconciled: the operator applied the
	// spec. Both carry the generation.
	{Name: "prometheus-operator-prometheus", Operator: "prometheus-operator", Group: "monitoring.coreos.com", Resource: "prometheuses", Conditions: []string{"Available", "Reconciled"},
		Source: "prometheus-operator v0.93.0 (pkg/prometheus/operator.go StatusReporter.Process, pkg/operator/statefulset_reporter.go, pkg/operator/operator.go GetCondition)"},
	{Name: "prometheus-operator-alertmanager", Operator: "prometheus-operator", Group: "monitoring.coreos.com", Resource: "alertmanagers", Conditions: []string{"Available", "Reconciled"},
		Source: "prometheus-operator v0.93.0 (pkg/alertmanager/operator.go UpdateStatus)"},
	// Ready only: Active=False is an idle scaler (no events to scale on),
	// healthy; Fallback is a fallback replica count in use, which Ready
	// reports if it matters. KEDA writes neither an observedGeneration
	// nor a lastTransitionTime.
	{Name: "keda-scaledobject", Operator: "the KEDA operator", Group: "keda.sh", Resource: "scaledobjects", Conditions: []string{"Ready"},
		Source: "kedacore/keda v2.20.2 (apis/keda/v1alpha1/condition_types.go, controllers/keda/scaledobject_controller.go, pkg/scaling/executor/scale_scaledobjects.go)"},
}

// Refused are resources that cannot be judged by generation at all, with
// why and what to use instead.
var Refused = []struct {
	Group, Resource, Why string
}{
	{"argoproj.io", "applications",
		"Argo CD Applications cannot be judged: their CRD has no status subresource, so every status patch of the application controller " +
			"(status.reconciledAt at each refresh, argo-cd v3.5.1 controller/appcontroller.go persistAppStatus) bumps metadata.generation and no spec write can be told from a refresh; " +
			"use Argo CD's own argocd_app_info{health_status,sync_status} and argocd_app_sync_total, and this exporter's rollouts collector for the workloads it applies"},
}

// PresetNamed returns the preset called name.
func PresetNamed(name string) (Preset, bool) {
	i := slices.IndexFunc(Presets, func(p Preset) bool { return p.Name == name })
	if i < 0 {
		return Preset{}, false
	}
	return Presets[i], true
}

// PresetFor returns the preset of group and resource.
func PresetFor(group, resource string) (Preset, bool) {
	i := slices.IndexFunc(Presets, func(p Preset) bool { return p.Group != "" && p.Group == group && p.Resource == resource })
	if i < 0 {
		return Preset{}, false
	}
	return Presets[i], true
}

func presetNames() string {
	names := make([]string, len(Presets))
	for i, p := range Presets {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}
