package config

import (
	"testing"
	"time"
)

func TestWebhookAndProbeErrorsNameLine(t *testing.T) {
	const probe = "admissionProbes:\n  - name: cm\n    resource: configmaps\n    namespace: probes\n    operation: CREATE\n    object: {apiVersion: v1, kind: ConfigMap, metadata: {name: probe}}\n"
	if _, err := Parse([]byte(probe)); err != nil {
		t.Fatalf("valid probe: %v", err)
	}
	for _, tc := range []struct{ name, doc, want string }{
		{"unknown webhooks key", "webhooks:\n  maxTimeOut: 5s\n", `line 2: unknown key "maxTimeOut"`},
		{"zero max timeout", "webhooks:\n  maxTimeout: 0s\n", `line 2: webhooks.maxTimeout: must be a positive duration such as "10s", got 0s`},
		{"negative ca warning", "webhooks: {caExpiryWarning: -1h}\n", `line 1: webhooks.caExpiryWarning: must be a positive duration such as "720h", got -1h0m0s`},
		{"bad own namespace", "webhooks:\n  ownNamespace: Monitoring\n", `line 2: webhooks.ownNamespace: "Monitoring" is not a namespace name`},
		{"zero api server interval", "webhooks:\n  apiServerMetrics:\n    enabled: true\n    interval: 0s\n", `line 4: webhooks.apiServerMetrics.interval: must be a positive duration such as "60s", got 0s`},
		{"unknown probe key", probe + "    intervall: 5s\n", `line 7: unknown key "intervall"`},
		{"bad operation", "admissionProbes:\n  - name: cm\n    resource: configmaps\n    namespace: probes\n    operation: PATCH\n    object: {apiVersion: v1, kind: ConfigMap, metadata: {name: probe}}\n", `line 5: admissionProbes[0].operation: want one of CREATE, UPDATE, DELETE, got "PATCH"`},
		{"missing object", "admissionProbes:\n  - name: cm\n    resource: configmaps\n    namespace: probes\n    operation: DELETE\n", `line 2: admissionProbes[0].object: an inline manifest is required (apiVersion, kind, metadata.name)`},
		{"object without name", "admissionProbes:\n  - name: cm\n    resource: configmaps\n    namespace: probes\n    operation: CREATE\n    object: {apiVersion: v1, kind: ConfigMap}\n", `line 6: admissionProbes[0].object: metadata.name is required (UPDATE and DELETE act on the object of that name)`},
		{"object in other namespace", "admissionProbes:\n  - name: cm\n    resource: configmaps\n    namespace: probes\n    operation: CREATE\n    object: {apiVersion: v1, kind: ConfigMap, metadata: {name: p, namespace: x}}\n", `line 6: admissionProbes[0].object: metadata.namespace "x" differs from namespace "probes"`},
		{"bad resource", "admissionProbes:\n  - name: cm\n    resource: Deployments.apps\n    namespace: probes\n    operation: CREATE\n    object: {apiVersion: v1, kind: ConfigMap, metadata: {name: p}}\n", `line 3: admissionProbes[0].resource: want a lower-case plural resource such as configmaps or deployments.apps, got "Deployments.apps"`},
		{"missing namespace", "admissionProbes:\n  - name: cm\n    resource: configmaps\n    operation: CREATE\n    object: {apiVersion: v1, kind: ConfigMap, metadata: {name: p}}\n", `line 2: admissionProbes[0].namespace: want a namespace name (probes write namespaced resources), got ""`},
		{"duplicate name", probe + "  - name: cm\n    resource: configmaps\n    namespace: probes\n    operation: CREATE\n    object: {apiVersion: v1, kind: ConfigMap, metadata: {name: probe}}\n", `line 7: admissionProbes[1]: name "cm" is already used at line 2`},
		{"object in another group", "admissionProbes:\n  - name: d\n    resource: deployments.apps\n    namespace: probes\n    operation: CREATE\n    object: {apiVersion: v1, kind: ConfigMap, metadata: {name: p}}\n", `line 6: admissionProbes[0].object: apiVersion "v1" is in API group "" (core), resource "deployments.apps" in "apps"`},
		{"object in core group for a grouped resource", "admissionProbes:\n  - name: cm\n    resource: configmaps\n    namespace: probes\n    operation: CREATE\n    object: {apiVersion: apps/v1, kind: Deployment, metadata: {name: p}}\n", `line 6: admissionProbes[0].object: apiVersion "apps/v1" is in API group "apps", resource "configmaps" in "" (core)`},
		{"object without version", "admissionProbes:\n  - name: d\n    resource: deployments.apps\n    namespace: probes\n    operation: CREATE\n    object: {apiVersion: apps/, kind: Deployment, metadata: {name: p}}\n", `line 6: admissionProbes[0].object: apiVersion "apps/" is not group/version or version`},
		{"zero timeout", probe + "    timeout: 0s\n", `line 7: admissionProbes[0].timeout: must be a positive duration such as "35s", got 0s`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			if err == nil || err.Error() != tc.want {
				t.Fatalf("Parse error:\n got %v\nwant %s", err, tc.want)
			}
		})
	}
}

func TestWebhookAndProbeDefaults(t *testing.T) {
	c, err := Parse([]byte("admissionProbes:\n  - name: d\n    resource: deployments.apps\n    namespace: probes\n    operation: UPDATE\n    object:\n      apiVersion: apps/v1\n      kind: Deployment\n      metadata: {name: web, labels: {app: web}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	p := c.AdmissionProbes[0]
	if time.Duration(p.Interval) != DefaultProbeInterval || time.Duration(p.Timeout) != DefaultProbeTimeout {
		t.Errorf("probe defaults: interval %v timeout %v", time.Duration(p.Interval), time.Duration(p.Timeout))
	}
	if g, r := p.GroupResource(); g != "apps" || r != "deployments" {
		t.Errorf("GroupResource = %q %q", g, r)
	}
	if g, v := p.APIVersion(); g != "apps" || v != "v1" {
		t.Errorf("APIVersion = %q %q", g, v)
	}
	if p.ObjectName() != "web" || p.ObjectLabels()["app"] != "web" {
		t.Errorf("object name %q labels %v", p.ObjectName(), p.ObjectLabels())
	}
	d := Default()
	if d.WebhookMaxTimeout() != 10*time.Second || d.WebhookCAExpiryWarning() != 720*time.Hour || d.APIServerMetricsInterval() != time.Minute || d.Webhooks.APIServerMetrics.Enabled {
		t.Errorf("webhook defaults: %v %v %v %v", d.WebhookMaxTimeout(), d.WebhookCAExpiryWarning(), d.APIServerMetricsInterval(), d.Webhooks.APIServerMetrics.Enabled)
	}
}
