package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-convergence/kube-convergence-exporter/internal/demo"
	"github.com/kube-convergence/kube-convergence-exporter/internal/timeline"
)

// explain runs the real binary's explain against the exporter at url.
func explain(ctx context.Context, url string, args ...string) (code int, stdout, stderr string) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, exporter, append([]string{"explain", "--exporter.url", url}, args...)...)
	var out, errs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errs
	err := cmd.Run()
	if exit, ok := errors.AsType[*exec.ExitError](err); ok {
		return exit.ExitCode(), out.String(), errs.String()
	} else if err != nil {
		return -1, out.String(), err.Error()
	}
	return 0, out.String(), errs.String()
}

// explain's acceptance: a ResourceQuota of one pod blocks a
// 3-replica Deployment; explain, for the kind spelt deployment, deploy and
// deployments.apps, prints the stage holding it, the reason
// replica_failure and the FailedCreate events of its ReplicaSet, from the
// shared exporter's API. The reason is held at any age: no wait for the
// stall threshold.
func TestExplainQuotaBlockedRollout(t *testing.T) {
	t.Parallel()
	e := shared.forTest(t)
	ctx := context.Background()
	ns := namespace(t, "explain-quota")
	podQuota(t, ns, "one-pod", "1")
	if _, err := client.AppsV1().Deployments(ns).Create(ctx, demo.Deployment(ns, "x", 3, demo.Delays(100*time.Millisecond, 100*time.Millisecond)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The JSON first: it says which stage holds the rollout, which the
	// text must then name.
	episode := func() (timeline.Episode, bool, string) {
		code, out, errs := explain(ctx, e.url, "deployment/x", "-n", ns, "-o", "json")
		if code != 0 {
			return timeline.Episode{}, false, fmt.Sprintf("exit %d: %s", code, errs)
		}
		var list struct {
			Items []timeline.Episode `json:"items"`
		}
		if err := json.Unmarshal([]byte(out), &list); err != nil || len(list.Items) == 0 {
			return timeline.Episode{}, false, fmt.Sprintf("%v: %s", err, out)
		}
		return list.Items[0], true, out
	}
	var ep timeline.Episode
	// One pod of three fits the quota: the new ReplicaSet never has every
	// replica, so the rollout is held at updated.
	eventually(t, 60*time.Second, "explain -o json: stage updated, reason replica_failure", func() (bool, string) {
		var ok bool
		var out string
		ep, ok, out = episode()
		return ok && ep.Reason == "replica_failure" && ep.Stage == "updated", out
	})
	if ep.Kind != "Deployment" || ep.Namespace != ns || ep.Name != "x" || ep.Generation != 1 || ep.State == timeline.StateClosed {
		t.Errorf("episode %s %s/%s generation %d state %s, want an open Deployment %s/x generation 1", ep.Kind, ep.Namespace, ep.Name, ep.Generation, ep.State, ns)
	}
	text := func(want ...string) {
		t.Helper()
		for _, kind := range []string{"deployment", "deploy", "deployments.apps"} {
			code, out, errs := explain(ctx, e.url, kind+"/x", "-n", ns)
			if code != 0 || errs != "" {
				t.Errorf("explain %s/x: exit %d, stderr %q", kind, code, errs)
				continue
			}
			for _, w := range want {
				if !strings.Contains(out, w) {
					t.Errorf("explain %s/x lacks %q:\n%s", kind, w, out)
				}
			}
		}
	}
	text("Deployment "+ns+"/x", "generation 1, create change", "held by:  stage updated, reason replica_failure")

	// The exemplar link of deploy/grafana/datasource.yaml,
	// <external-url>/timelines?uid=<the exemplar's uid>, opens the
	// object's episodes on the page.
	if code, body, err := e.get("/timelines?uid=" + url.QueryEscape(ep.UID)); err != nil || code != http.StatusOK || !strings.Contains(body, ns+"/x") {
		t.Errorf("GET /timelines?uid=%s = %d (%v), want 200 and the page of %s/x:\n%s", ep.UID, code, err, ns, body)
	}

	// Exit codes against the real API: an object without a timeline is 1,
	// an unknown kind 2 with the accepted forms.
	if code, _, errs := explain(ctx, e.url, "deploy/absent", "-n", ns); code != 1 || !strings.Contains(errs, "has no timeline of deploy/absent in namespace "+ns) {
		t.Errorf("absent object: exit %d, stderr %q; want 1", code, errs)
	}
	if code, _, errs := explain(ctx, e.url, "deplyment/x", "-n", ns); code != 2 || !strings.Contains(errs, "deployments.apps") {
		t.Errorf("unknown kind: exit %d, stderr %q; want 2 and the accepted forms", code, errs)
	}

	// The ReplicaSet's FailedCreate Warning Events, with the quota's
	// message.
	eventually(t, 30*time.Second, "explain -o json: a FailedCreate event", func() (bool, string) {
		ep, ok, out := episode()
		return ok && slices.ContainsFunc(ep.Entries, func(en timeline.Entry) bool {
			return en.Type == timeline.EntryEvent && en.Reason == "FailedCreate"
		}), out
	})
	text("FailedCreate", "exceeded quota: one-pod")
}
