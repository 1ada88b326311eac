package webhooks

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-convergence/kube-convergence-exporter/internal/admission"
)

// hostile is a configuration of n webhooks as large as a tenant allowed to
// write webhook configurations could make it: rules of 100 resources, a
// CEL condition of 10 KiB, a caBundle of 1 MiB of garbage (shared, as the
// informer's decoded object would hold it once per webhook).
func hostile(n int) []admission.Webhook {
	resources := make([]string, 100)
	for i := range resources {
		resources[i] = fmt.Sprintf("widgets%d", i)
	}
	resources[99] = "pods"
	cel := strings.Repeat("request.namespace != 'kube-system' && ", 10*1024/38) + "true"
	garbage := bytes.Repeat([]byte("not a certificate -----BEGIN nothing\n"), 1<<20/37)
	out := make([]admission.Webhook, n)
	for i := range out {
		out[i] = admission.Webhook{
			Configuration: "hostile", Name: fmt.Sprintf("h%d.example.com", i), Type: admission.Validating,
			FailurePolicy: "Fail", SideEffects: "None", MatchPolicy: "Equivalent",
			Service:  &admissionv1.ServiceReference{Namespace: "gone", Name: "hook"},
			CABundle: garbage, Timeout: 30 * time.Second,
			Rules: []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{"*"},
				Rule: admissionv1.Rule{APIGroups: []string{"", "apps"}, APIVersions: []string{"*"}, Resources: resources}}},
			NamespaceSelector: &metav1.LabelSelector{},
			MatchConditions:   []admissionv1.MatchCondition{{Name: "long", Expression: cel}},
		}
	}
	return out
}

// Hostile input gives findings or "unanalysed", never a panic: the 10 KiB
// condition is unanalysed (not scanned: over 4 KiB), so the scope findings
// are not guessed; the garbage bundle is ca_bundle_invalid; the deleted
// Service is service_missing, and no_ready_endpoints (Fail); without the
// condition, its pods would be refused too (self_blocking).
func TestHostileWebhooks(t *testing.T) {
	want := []string{NoReadyEndpoints, ServiceMissing, CABundleInvalid, MatchConditionsUnanalysed}
	for _, w := range hostile(3) {
		if got := Evaluate(w, cluster(), policy, now).Findings; !slices.Equal(got, want) {
			t.Errorf("%s: findings %v, want %v", w.Name, got, want)
		}
	}
	// Without the condition the 100 resources are read: pods in every
	// namespace, Fail, 30 s.
	w := hostile(1)[0]
	w.MatchConditions = nil
	want = []string{TimeoutTooLong, Unscoped, FailClosedUnscoped, MatchesKubeSystem, MatchesOwnNamespace,
		SelfBlocking, WildcardOperations, NoReadyEndpoints, ServiceMissing, CABundleInvalid}
	if got := Evaluate(w, cluster(), policy, now).Findings; !slices.Equal(got, want) {
		t.Errorf("without the condition: findings %v, want %v", got, want)
	}
}

// The audit's cost per scrape for 500 hostile webhooks (docs/benchmarks.md).
func BenchmarkEvaluateHostile(b *testing.B) {
	hooks := hostile(500)
	c := cluster()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		for _, w := range hooks {
			Evaluate(w, c, policy, now)
		}
	}
}

// The same scrapes with the collector's caBundle verdicts kept per
// configuration version: the megabyte bundles are parsed at the first
// scrape only.
func BenchmarkEvaluateHostileKept(b *testing.B) {
	hooks := hostile(500)
	for i := range hooks {
		hooks[i].Version = "42"
	}
	col := &Collector{}
	c := cluster()
	c.CA = col.ca
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		col.casNext = make(map[caKey]caResult, len(col.cas))
		for _, w := range hooks {
			if a := Evaluate(w, c, policy, now); a.CAErr == nil {
				b.Fatal("garbage bundle parsed")
			}
		}
		col.cas, col.casNext = col.casNext, nil
	}
}
