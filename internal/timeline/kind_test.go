package timeline

import (
	"errors"
	"strings"
	"testing"
)

func TestResolveKind(t *testing.T) {
	// As --config.file configures them, plus the kinds the store has seen.
	custom := []string{"certificates.cert-manager.io", "Certificate.cert-manager.io", "networkpolicies.example.com", "NetworkPolicy.example.com", "issuers.cert-manager.io"}
	for _, tc := range []struct{ in, want string }{
		{"Deployment", "Deployment"},
		{"deployment", "Deployment"},
		{"deploy", "Deployment"},
		{"deployments", "Deployment"},
		{"deployments.apps", "Deployment"},
		{"deployment.apps", "Deployment"},
		{"DEPLOYMENT", "Deployment"},
		{" deploy ", "Deployment"},
		{"sts", "StatefulSet"},
		{"statefulsets.apps", "StatefulSet"},
		{"StatefulSet", "StatefulSet"},
		{"ds", "DaemonSet"},
		{"daemonset", "DaemonSet"},
		{"daemonsets.apps", "DaemonSet"},
		// Custom resources: Kind.group, any case of a known Kind, plural.group.
		{"Certificate.cert-manager.io", "Certificate.cert-manager.io"},
		{"certificate.cert-manager.io", "Certificate.cert-manager.io"},
		{"certificates.cert-manager.io", "Certificate.cert-manager.io"},
		{"Certificate.Cert-Manager.io", "Certificate.cert-manager.io"},
		{"networkpolicies.example.com", "NetworkPolicy.example.com"},
		// A Kind of a configured group not seen yet: taken as written.
		{"Issuer.cert-manager.io", "Issuer.cert-manager.io"},
		{"ClusterIssuer.cert-manager.io", "ClusterIssuer.cert-manager.io"},
	} {
		got, err := ResolveKind(tc.in, custom)
		if err != nil || got != tc.want {
			t.Errorf("ResolveKind(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestResolveKindRejects(t *testing.T) {
	custom := []string{"certificates.cert-manager.io", "Certificate.cert-manager.io"}
	for _, in := range []string{
		"", "pod", "ReplicaSet", "deployments.batch", "deployments.v1", ".apps",
		"Certificate.example.com",         // group not configured
		"issuers.cert-manager.io",         // plural of a Kind not known
		"certificate",                     // a custom kind needs its group
		"Certificate.",                    // empty group
		"deploy/x",                        // not a kind
		"<script>.cert-manager.io",        // not a Kind
		"Deployment.apps.cert-manager.io", // not a Kind.group of a configured group
	} {
		got, err := ResolveKind(in, custom)
		var uk *UnknownKindError
		if !errors.As(err, &uk) {
			t.Errorf("ResolveKind(%q) = %q, %v; want an *UnknownKindError", in, got, err)
			continue
		}
		msg := err.Error()
		for _, want := range []string{"Deployment (deployment, deploy, deployments, deployments.apps)", "StatefulSet (statefulset, sts", "DaemonSet (daemonset, ds", "Kind.cert-manager.io (Certificate.cert-manager.io)"} {
			if !strings.Contains(msg, want) {
				t.Errorf("ResolveKind(%q): %q lacks %q", in, msg, want)
			}
		}
	}
	_, err := ResolveKind("Certificate.cert-manager.io", nil)
	if err == nil || !strings.Contains(err.Error(), "none is") {
		t.Errorf("without custom resources: %v, want an error saying none is configured", err)
	}
}

func TestGuessPlural(t *testing.T) {
	for kind, want := range map[string]string{"Certificate": "certificates", "NetworkPolicy": "networkpolicies", "Ingress": "ingresses", "HTTPRoute": "httproutes"} {
		if got := guessPlural(kind); got != want {
			t.Errorf("guessPlural(%q) = %q, want %q", kind, got, want)
		}
	}
}
