package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// kubectlApply server-side applies docs (JSON, one per line group) and
// returns kubectl's stderr, where the API server's warnings land.
func kubectlApply(t *testing.T, docs ...any) (string, error) {
	t.Helper()
	var parts []string
	for _, d := range docs {
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, string(b))
	}
	file := filepath.Join(t.TempDir(), "objects.yaml")
	if err := os.WriteFile(file, []byte(strings.Join(parts, "\n---\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, tool(t, "kubectl"), "--kubeconfig="+sb.Kubeconfig(""),
		"apply", "--server-side", "--field-manager=kce-pod-security-test", "-f", file)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return stderr.String(), &applyError{err: err, out: string(out) + stderr.String()}
	}
	return stderr.String(), nil
}

type applyError struct {
	err error
	out string
}

func (e *applyError) Error() string { return e.err.Error() + ": " + e.out }

// The rendered workload (kustomize's base, its sharding StatefulSet, and
// the chart with default values) is admitted, stored for real by
// server-side apply, in a namespace that enforces the restricted Pod
// Security Standard at the sandbox's version (v1.37, `latest`): the
// workload raises no Pod Security warning (PodSecurity warns on workload
// templates), and a Pod of its template, with its ServiceAccount, is
// admitted under enforce. The same Pod made to run as root is refused:
// the check can fail.
func TestRestrictedPodSecurity(t *testing.T) {
	if sb == nil {
		t.Skip("needs the sandbox; skipped with -short")
	}
	renders := map[string]func(t *testing.T, ns string) []object{
		"kustomize base": func(t *testing.T, _ string) []object {
			return kustomize(t, kustomizations()["base"])
		},
		"kustomize sharding": func(t *testing.T, _ string) []object {
			return kustomize(t, kustomizations()["sharding"])
		},
		"helm defaults": func(t *testing.T, ns string) []object {
			return helmTemplate(t, "kce", ns)
		},
	}
	i := 0
	for name, render := range renders {
		i++
		ns := "pss-restricted-" + string(rune('a'+i))
		t.Run(name, func(t *testing.T) {
			objs := render(t, ns)
			nsObj := corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{
				"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest",
				"pod-security.kubernetes.io/warn": "restricted", "pod-security.kubernetes.io/warn-version": "latest",
			}}}
			if _, err := kubectlApply(t, nsObj); err != nil {
				t.Fatal(err)
			}
			var sa, wl object
			for _, o := range objs {
				switch o.kind() {
				case "ServiceAccount":
					sa = o
				case "Deployment", "StatefulSet":
					wl = o
				}
			}
			if sa == nil || wl == nil {
				t.Fatalf("rendered no ServiceAccount or workload: %v", objs)
			}
			sa.meta()["namespace"], wl.meta()["namespace"] = ns, ns
			stderr, err := kubectlApply(t, sa, wl)
			if err != nil {
				t.Fatalf("server-side apply of the %s: %v", wl.kind(), err)
			}
			if strings.Contains(stderr, "PodSecurity") {
				t.Errorf("the %s raises a Pod Security warning:\n%s", wl.kind(), stderr)
			}
			d := workload(t, objs)
			pod := corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
				ObjectMeta: metav1.ObjectMeta{Name: "from-template", Namespace: ns, Labels: d.Spec.Template.Labels},
				Spec:       d.Spec.Template.Spec}
			if _, err := kubectlApply(t, pod); err != nil {
				t.Errorf("a Pod of the %s's template is refused under enforce=restricted: %v", wl.kind(), err)
			}
			root := pod.DeepCopy()
			root.Name = "as-root"
			root.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(false), RunAsUser: ptr.To[int64](0)}
			for i := range root.Spec.Containers {
				root.Spec.Containers[i].SecurityContext = nil
			}
			_, err = kubectlApply(t, root)
			if err == nil || !strings.Contains(err.Error(), "violates PodSecurity") {
				t.Errorf("the same Pod as root is not refused by PodSecurity: %v", err)
			}
		})
	}
}
