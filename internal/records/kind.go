package records

// builtinGroups are the API groups kube-apiserver serves itself (v1.37,
// pkg/controlplane and the apiextensions and kube-aggregator servers), with
// the core group "". Every other group is served by a CustomResourceDefinition
// or an aggregated API server, even under k8s.io: Gateway API
// (gateway.networking.k8s.io), volume snapshots (snapshot.storage.k8s.io),
// metrics.k8s.io.
var builtinGroups = map[string]bool{
	"": true, "admissionregistration.k8s.io": true, "apiextensions.k8s.io": true,
	"apiregistration.k8s.io": true, "apps": true, "authentication.k8s.io": true,
	"authorization.k8s.io": true, "autoscaling": true, "batch": true,
	"certificates.k8s.io": true, "coordination.k8s.io": true, "discovery.k8s.io": true,
	"events.k8s.io": true, "flowcontrol.apiserver.k8s.io": true,
	"internal.apiserver.k8s.io": true, "networking.k8s.io": true, "node.k8s.io": true,
	"policy": true, "rbac.authorization.k8s.io": true, "resource.k8s.io": true,
	"scheduling.k8s.io": true, "storage.k8s.io": true, "storagemigration.k8s.io": true,
}

// KindLabel is the kind label of an object of group: its bare Kind for a
// group kube-apiserver serves itself (Deployment), Kind.group for any other
// (a custom resource: Certificate.cert-manager.io, HTTPRoute.gateway.networking.k8s.io),
// so that a kind label never collides across groups. The resources, churn
// and retries collectors label kinds alike.
func KindLabel(group, kind string) string {
	if builtinGroups[group] {
		return kind
	}
	return kind + "." + group
}
