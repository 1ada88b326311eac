package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/yaml"
)

// object is one rendered manifest as a JSON tree.
type object map[string]any

func (o object) kind() string { s, _ := o["kind"].(string); return s }

func (o object) apiVersion() string { s, _ := o["apiVersion"].(string); return s }

func (o object) meta() map[string]any { m, _ := o["metadata"].(map[string]any); return m }

func (o object) name() string { s, _ := o.meta()["name"].(string); return s }

func (o object) namespace() string { s, _ := o.meta()["namespace"].(string); return s }

func (o object) id() string { return o.kind() + "/" + o.name() }

// builtIn reports whether the API server serves the kind without a CRD.
func (o object) builtIn() bool { return !strings.HasSuffix(o.apiVersion(), "monitoring.coreos.com/v1") }

// clusterScoped lists the cluster-scoped kinds the manifests may hold.
var clusterScoped = map[string]bool{"ClusterRole": true, "ClusterRoleBinding": true, "Namespace": true}

// decodeInto converts o into a typed object through JSON, failing on any
// field the type does not have: the API server would drop a misspelt
// field (with a warning at best), and prometheus-operator's CRD schemas
// prune unknown fields silently.
func (o object) decodeInto(into any) error {
	b, err := json.Marshal(o)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		return fmt.Errorf("%s into %T: %w", o.id(), into, err)
	}
	return nil
}

// parseObjects splits a YAML stream into objects.
func parseObjects(b []byte) ([]object, error) {
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []object
	for {
		var o object
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(o) > 0 {
			out = append(out, o)
		}
	}
}

// byKind returns the objects of one kind.
func byKind(objs []object, kind string) []object {
	var out []object
	for _, o := range objs {
		if o.kind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// only returns the one object of a kind, failing the test otherwise.
func only(t *testing.T, objs []object, kind string) object {
	t.Helper()
	found := byKind(objs, kind)
	if len(found) != 1 {
		t.Fatalf("%d objects of kind %s, want 1", len(found), kind)
	}
	return found[0]
}

// command runs a pinned tool and returns its standard output; stderr goes
// into the error.
func command(ctx context.Context, dir, bin string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w\n%s", bin, strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}
