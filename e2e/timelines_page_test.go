package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/kube-convergence/kube-convergence-exporter/internal/demo"
)

// timelineState reads one object's newest episode from the API: its state
// and outcome; found is false on a 404.
func timelineState(ctx context.Context, t *testing.T, base, kind, ns, name string) (state, outcome string, found bool) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/timelines/"+kind+"/"+ns+"/"+name, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var api struct {
		Items []struct {
			State   string `json:"state"`
			Outcome string `json:"outcome"`
		} `json:"items"`
	}
	if resp.StatusCode != http.StatusOK {
		return "", "", false
	}
	if err := json.NewDecoder(resp.Body).Decode(&api); err != nil || len(api.Items) == 0 {
		t.Fatalf("GET %s: %v, %d items", req.URL, err, len(api.Items))
	}
	return api.Items[0].State, api.Items[0].Outcome, true
}

// The page of the real exporter in headless Chromium. A Deployment created
// with the field manager <script>alert(1)</script>, about which a Warning
// Event with that note is written while it rolls out, and a custom
// resource whose controller sets a condition with that message: the
// waterfall of each has one bar per stage reached, as wide as the API's
// durationSeconds say (± 1 px), the three strings are shown as text, no
// dialog opens, nothing throws or logs an error, nothing is requested from
// elsewhere, and the CSP header is present.
func TestTimelinesPageInChromium(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dyn := dynamic.NewForConfigOrDie(sb.AdminConfig())
	t.Cleanup(func() {
		_ = dyn.Resource(crdGVR).Delete(context.Background(), "gadgets."+resGroup, metav1.DeleteOptions{})
	})
	if _, err := dyn.Resource(crdGVR).Create(ctx, crd("Gadget", "gadgets", "Namespaced", true, "v1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e := startExporter(t, "--kubeconfig="+sb.Kubeconfig(""), "--config.file="+writeConfig(t, "resources:\n  - {group: e2e.kce.io, resource: gadgets}\n"))
	e.waitReady(60 * time.Second)
	eventually(t, 20*time.Second, "gadgets tracked", func() (bool, string) {
		v, _ := value(e.scrape(), "kube_convergence_resource_state", map[string]string{"resource": "gadgets." + resGroup, "state": "tracking"})
		return v == 1, fmt.Sprint(v)
	})

	ns := namespace(t, "tl-page")
	service(t, ns, "web")
	// Pods Ready 1 s + 3 s after creation: the episode is open for about 4 s
	// (more with the slice batch period), time to write an Event into it.
	d, err := client.AppsV1().Deployments(ns).Create(ctx, demo.Deployment(ns, "web", 2, demo.Delays(time.Second, 3*time.Second)),
		metav1.CreateOptions{FieldManager: xss})
	if err != nil {
		t.Fatal(err)
	}
	// The store keeps evidence of open episodes only, and the Events
	// informer may deliver before the Deployments one: write the Event once
	// the episode is open.
	eventually(t, 10*time.Second, "the Deployment's episode open", func() (bool, string) {
		state, _, _ := timelineState(ctx, t, e.url, "deploy", ns, "web")
		return state == "in_progress", state
	})
	ev := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web.xss"},
		EventTime:  metav1.NewMicroTime(time.Now()), ReportingController: "e2e.kce.io/tl-page", ReportingInstance: "e2e",
		Action: "Check", Reason: "PageEscaping", Type: corev1.EventTypeWarning, Note: xss,
		Regarding: corev1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: "web", UID: d.UID},
	}
	if _, err := client.EventsV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	gadgets := testController{t: t, kind: "Gadget", dyn: dyn.Resource(schema.GroupVersionResource{Group: resGroup, Version: "v1", Resource: "gadgets"}).Namespace(ns)}
	eventually(t, 10*time.Second, "gadgets served", func() (bool, string) {
		_, err := gadgets.dyn.List(ctx, metav1.ListOptions{})
		return err == nil, fmt.Sprint(err)
	})
	gadgets.create(ctx, "tls")
	eventually(t, 10*time.Second, "the gadget's episode", func() (bool, string) {
		state, _, ok := timelineState(ctx, t, e.url, "Gadget.e2e.kce.io", ns, "tls")
		return ok, state
	})
	// The controller's injected delays: observed after 0.5 s, with
	// Ready=False and the message; Ready after 0.7 s more. They give the
	// stages distinct bars; the expected widths come from the API.
	time.Sleep(500 * time.Millisecond)
	cond := condition("Ready", "False", 1)
	cond["message"] = xss
	gadgets.setStatus(ctx, "tls", statusOf(1, cond))
	time.Sleep(700 * time.Millisecond)
	gadgets.setStatus(ctx, "tls", statusOf(1, condition("Ready", "True", 1)))

	for _, o := range []struct{ kind, name string }{{"deploy", "web"}, {"gadgets.e2e.kce.io", "tls"}} {
		eventually(t, 60*time.Second, o.kind+" "+o.name+" converged", func() (bool, string) {
			state, outcome, _ := timelineState(ctx, t, e.url, o.kind, ns, o.name)
			return state == "closed" && outcome == "converged", state + " " + outcome
		})
	}
	checkTimelinePage(ctx, t, e.url, "deployments.apps", ns, "web", []string{"PageEscaping"}, []string{xss}, []string{xss})
	checkTimelinePage(ctx, t, e.url, "Gadget.e2e.kce.io", ns, "tls", nil, nil, []string{xss})

	// The list page, with both episodes on it, is as clean.
	_, problems := openTimelinePage(ctx, t, e.url, e.url+"/timelines?namespace="+ns)
	if len(problems) > 0 {
		t.Errorf("/timelines in chromium:\n%s", strings.Join(problems, "\n"))
	}
}
