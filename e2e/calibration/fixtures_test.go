package calibration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// TestOperatorFixturesValidateAgainstTheirCRDs: every document of the
// fixtures whose operator's CRD can be had here (testdata/operators) is
// accepted by the real API server under that CRD, spec and status: a
// status shape the operator's own schema refuses is one it never writes.
// Crossplane's (the CRDs are a provider's or an XRD's) and
// prometheus-operator's (its CRDs are in its root module, which the Go
// module proxy does not serve) are read from their sources only.
func TestOperatorFixturesValidateAgainstTheirCRDs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dyn, err := dynamic.NewForConfig(sb.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(sb.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	const ns = "fixtures"
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, c := range operatorCRDs {
		applyCRD(ctx, t, dyn, moduleFile(t, c.module, c.version, c.path))
	}
	files := map[string]string{ // fixture -> resource
		"cert-manager/certificate.yaml":               "certificates",
		"cert-manager/clusterissuer.yaml":             "clusterissuers",
		"keda/scaledobject.yaml":                      "scaledobjects",
		"flux/helmrelease.yaml":                       "helmreleases",
		"flux/kustomization.yaml":                     "kustomizations",
		"flux/gitrepository.yaml":                     "gitrepositories",
		"flux/ocirepository.yaml":                     "ocirepositories",
		"flux/kustomization-ready.yaml":               "kustomizations",
		"flux/kustomization-recovered.yaml":           "kustomizations",
		"flux/kustomization-build-failed.yaml":        "kustomizations",
		"flux/kustomization-health-check-failed.yaml": "kustomizations",
		"flux/kustomization-new-revision.yaml":        "kustomizations",
	}
	checked := 0
	for file, resource := range files {
		b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "operators", file))
		if err != nil {
			t.Fatal(err)
		}
		docs := 0
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for {
			var m map[string]any
			if dec.Decode(&m) != nil {
				break
			}
			if m != nil {
				docs++
			}
		}
		for i := range docs {
			f := fixture(t, file, i)
			gvr, err := gvrOf(dyn, f.GetAPIVersion(), resource)
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			namespace := ""
			if f.GetNamespace() != "" {
				namespace = ns
			}
			// A name per document: the real kustomize-controller adds its
			// finalizer to every Kustomization, so a deleted one lingers.
			name := fmt.Sprintf("%s-%d", strings.TrimSuffix(filepath.Base(file), ".yaml"), i)
			obj := asNew(f, namespace, name)
			ri := dyn.Resource(gvr).Namespace(namespace)
			u, err := ri.Create(ctx, obj, metav1.CreateOptions{})
			if err != nil {
				t.Errorf("%s document %d: the %s CRD refuses the object: %v", file, i, resource, err)
				continue
			}
			if st, ok := f.Object["status"]; ok {
				// Its controller may write the object meanwhile (a
				// finalizer): on a conflict, the status again on the
				// newest copy.
				err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
					u.Object["status"] = st
					_, err := ri.UpdateStatus(ctx, u, metav1.UpdateOptions{})
					if apierrors.IsConflict(err) {
						if cur, gerr := ri.Get(ctx, name, metav1.GetOptions{}); gerr == nil {
							u = cur
						}
					}
					return err
				})
				if err != nil {
					t.Errorf("%s document %d: the %s CRD refuses the status: %v", file, i, resource, err)
				}
			}
			_ = ri.Delete(ctx, name, metav1.DeleteOptions{})
			checked++
		}
	}
	t.Logf("%d fixture documents accepted by their operators' CRDs", checked)
}

// gvrOf is the resource of apiVersion, checked to be served.
func gvrOf(dyn dynamic.Interface, apiVersion, resource string) (schema.GroupVersionResource, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return schema.GroupVersionResource{}, err
	}
	gvr := gv.WithResource(resource)
	if _, err := dyn.Resource(gvr).List(context.Background(), metav1.ListOptions{Limit: 1}); err != nil {
		return gvr, fmt.Errorf("%s not served: %w", gvr, err)
	}
	return gvr, nil
}
