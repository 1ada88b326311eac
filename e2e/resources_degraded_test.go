package e2e

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/kube-convergence/kube-convergence-exporter/internal/slowwebhook"
)

// TestResourcesListFailureDegradesOneResource: a tracked custom resource
// whose list fails with an error other than 403 (here the API server's 500
// when the CRD's conversion webhook is down) is shown in
// kube_convergence_resource_state and named in /readyz; after
// --resources.sync-timeout it is left out of readiness with that reason,
// and it joins again when its list succeeds (the webhook comes up). The
// other tracked resource is not affected.
func TestResourcesListFailureDegradesOneResource(t *testing.T) {
	t.Parallel() // mostly waiting: on the API server's Retry-After and the timeout
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dyn, err := dynamic.NewForConfig(sb.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	ca, err := slowwebhook.NewCA(time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	// The webhook's address, with nothing listening on it yet.
	addr := freeAddr(t)

	// converts.e2e.kce.io stores v1 and serves v2 through a conversion
	// webhook: a list at v2 converts every stored object, and fails with
	// 500 while the webhook is down.
	conv := crd("Convert", "converts", "Namespaced", true, "v2", "v1")
	spec := conv.Object["spec"].(map[string]any)
	spec["conversion"] = map[string]any{
		"strategy": "Webhook",
		"webhook": map[string]any{
			"conversionReviewVersions": []any{"v1"},
			"clientConfig": map[string]any{
				"url":      "https://" + addr + "/convert",
				"caBundle": base64.StdEncoding.EncodeToString(ca.PEM),
			},
		},
	}
	healthy := crd("Steady", "steadies", "Namespaced", true, "v1")
	t.Cleanup(func() {
		for _, n := range []string{"converts", "steadies"} {
			_ = dyn.Resource(crdGVR).Delete(context.Background(), n+"."+resGroup, metav1.DeleteOptions{})
		}
	})
	for _, c := range []*unstructured.Unstructured{conv, healthy} {
		if _, err := dyn.Resource(crdGVR).Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	v1 := dyn.Resource(schema.GroupVersionResource{Group: resGroup, Version: "v1", Resource: "converts"}).Namespace("default")
	eventually(t, 20*time.Second, "converts served at v1", func() (bool, string) {
		_, err := v1.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": resGroup + "/v1", "kind": "Convert",
			"metadata": map[string]any{"name": "stored-at-v1"},
			"spec":     map[string]any{"size": int64(1)},
		}}, metav1.CreateOptions{})
		return err == nil, fmt.Sprint(err)
	})
	v2 := dyn.Resource(schema.GroupVersionResource{Group: resGroup, Version: "v2", Resource: "converts"}).Namespace("default")
	if _, err := v2.List(ctx, metav1.ListOptions{}); err == nil {
		t.Fatal("list at v2 succeeded with the conversion webhook down: the test injects nothing")
	} else {
		t.Logf("list at v2 with the webhook down: %v", err)
	}

	// A WatchList stream is refused with 429 while the resource's watch
	// cache cannot initialize, and client-go's REST client retries that
	// ten times (about 35 s) before the reflector sees an error: the
	// timeout leaves room for it.
	const syncTimeout = 60 * time.Second
	cfg := writeConfig(t, "resources:\n  - {group: e2e.kce.io, resource: converts, version: v2}\n  - {group: e2e.kce.io, resource: steadies}\n")
	started := time.Now()
	e := startExporter(t, "--kubeconfig="+sb.Kubeconfig(""), "--config.file="+cfg, "--resources.sync-timeout="+syncTimeout.String())
	state := func(resource, s string) float64 {
		v, _ := value(e.scrape(), "kube_convergence_resource_state", map[string]string{"resource": resource, "state": s})
		return v
	}
	eventually(t, 15*time.Second, "exporter listening", func() (bool, string) {
		_, _, err := e.get("/healthz")
		return err == nil, fmt.Sprint(err)
	})

	// Before the timeout: not ready, and the body says which and why.
	eventually(t, 60*time.Second, "converts list_failing", func() (bool, string) {
		return state("converts.e2e.kce.io", "list_failing") == 1, fmt.Sprint(state("converts.e2e.kce.io", "tracking"))
	})
	code, body, err := e.get("/readyz")
	if err != nil {
		t.Fatal(err)
	}
	detected := time.Since(started)
	t.Logf("list_failing shown %v after the exporter's start", detected.Round(time.Millisecond))
	if detected > syncTimeout-5*time.Second {
		t.Fatalf("list_failing shown %v after start, too close to the %v sync timeout to check readiness before it", detected, syncTimeout)
	}
	if code != http.StatusServiceUnavailable {
		t.Errorf("/readyz %d %v after start with converts failing, want 503 until the %v sync timeout:\n%s", code, detected.Round(time.Millisecond), syncTimeout, body)
	}
	for _, want := range []string{"resource converts.e2e.kce.io: list_failing, syncing (left out of readiness after the 1m0s sync timeout)", "conversion webhook", "resource steadies.e2e.kce.io: tracking, synced"} {
		if !strings.Contains(body, want) {
			t.Errorf("/readyz body lacks %q:\n%s", want, body)
		}
	}
	if state("steadies.e2e.kce.io", "tracking") != 1 {
		t.Error("steadies is not tracking")
	}

	// After the timeout: ready, converts left out with its reason.
	body = e.waitReady(syncTimeout + 20*time.Second)
	if elapsed := time.Since(started); elapsed < syncTimeout {
		t.Errorf("ready %v after start, before the %v sync timeout", elapsed.Round(time.Millisecond), syncTimeout)
	}
	if want := "resource converts.e2e.kce.io: list_failing (excluded from readiness after the 1m0s sync timeout"; !strings.Contains(body, want) {
		t.Errorf("/readyz body lacks %q:\n%s", want, body)
	}
	if n := strings.Count(e.logs.String(), "state=list_failing"); n != 1 {
		t.Errorf("%d log lines for the failing list, want 1 (once per state change):\n%s", n, tail(e.logs.String(), 30))
	}

	// The webhook comes up: converts syncs and joins again.
	stop := serveConversion(t, ca, addr)
	defer stop()
	eventually(t, 60*time.Second, "converts tracking once the webhook answers", func() (bool, string) {
		return state("converts.e2e.kce.io", "tracking") == 1, fmt.Sprint(state("converts.e2e.kce.io", "list_failing"))
	})
	eventually(t, 10*time.Second, "converts synced in /readyz", func() (bool, string) {
		code, body, err := e.get("/readyz")
		return err == nil && code == http.StatusOK && strings.Contains(body, "resource converts.e2e.kce.io: tracking, synced"), body
	})
}

// serveConversion serves a CRD conversion webhook on addr that converts
// between the versions by setting apiVersion (the versions share a
// schema), until the returned stop.
func serveConversion(t *testing.T, ca *slowwebhook.CA, addr string) (stop func()) {
	t.Helper()
	cert, err := ca.ServingCert()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var review struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Request    struct {
					UID               string           `json:"uid"`
					DesiredAPIVersion string           `json:"desiredAPIVersion"`
					Objects           []map[string]any `json:"objects"`
				} `json:"request"`
			}
			if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			for _, o := range review.Request.Objects {
				o["apiVersion"] = review.Request.DesiredAPIVersion
			}
			_ = json.NewEncoder(w).Encode(map[string]any{
				"apiVersion": review.APIVersion, "kind": review.Kind,
				"response": map[string]any{
					"uid": review.Request.UID, "result": map[string]any{"status": "Success"},
					"convertedObjects": review.Request.Objects,
				},
			})
		}),
	}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	return func() { _ = srv.Close() }
}
