package records

import "testing"

func TestKindLabel(t *testing.T) {
	for _, c := range []struct{ group, kind, want string }{
		{"", "Pod", "Pod"},
		{"apps", "Deployment", "Deployment"},
		{"networking.k8s.io", "Ingress", "Ingress"},
		{"gateway.networking.k8s.io", "HTTPRoute", "HTTPRoute.gateway.networking.k8s.io"},
		{"snapshot.storage.k8s.io", "VolumeSnapshot", "VolumeSnapshot.snapshot.storage.k8s.io"},
		{"cert-manager.io", "Certificate", "Certificate.cert-manager.io"},
		{"example.com", "Knob", "Knob.example.com"},
	} {
		if got := KindLabel(c.group, c.kind); got != c.want {
			t.Errorf("KindLabel(%q, %q) = %q, want %q", c.group, c.kind, got, c.want)
		}
	}
}
