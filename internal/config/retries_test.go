package config

import (
	"slices"
	"testing"
	"time"
)

func TestRetriesChurnDefaults(t *testing.T) {
	for name, c := range map[string]*Config{"Default": Default(), "empty file": mustParse(t, "")} {
		if time.Duration(c.Retries.FailingWindow) != 20*time.Minute || c.Retries.MaxReasons != 100 {
			t.Errorf("%s: retries %+v", name, c.Retries)
		}
		if time.Duration(c.Churn.Window) != 5*time.Minute || c.Churn.HotWrites != 60 || time.Duration(c.Churn.FlapWindow) != 10*time.Minute || c.Churn.MaxPairs != 50 ||
			!slices.Equal(c.Churn.Exclude, []string{"nodes", "endpointslices.discovery.k8s.io"}) {
			t.Errorf("%s: churn %+v", name, c.Churn)
		}
	}
	c := mustParse(t, "retries: {failingWindow: 30m}\nchurn:\n  hotWrites: 30\n  window: 1m\n  exclude: []\n")
	if time.Duration(c.Retries.FailingWindow) != 30*time.Minute || c.Retries.MaxReasons != 100 {
		t.Errorf("partial retries: %+v", c.Retries)
	}
	if c.Churn.HotWrites != 30 || time.Duration(c.Churn.Window) != time.Minute || c.Churn.MaxPairs != 50 || len(c.Churn.Exclude) != 0 || c.ChurnExcluded("nodes") {
		t.Errorf("partial churn: %+v", c.Churn)
	}
	if !Default().ChurnExcluded("endpointslices.discovery.k8s.io") || Default().ChurnExcluded("deployments.apps") {
		t.Error("ChurnExcluded with defaults")
	}
}

func TestRetriesChurnErrors(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"retries:\n  failingWindow: 0s\n", `line 2: retries.failingWindow: must be a positive duration such as "10m", got 0s`},
		{"retries:\n  maxReasons: 0\n", `line 2: retries.maxReasons: must be positive, got 0 (it caps the reason label's values)`},
		{"retries:\n  maxreasons: 5\n", `line 2: unknown key "maxreasons"`},
		{"churn:\n  window: -1m\n", `line 2: churn.window: must be a positive duration such as "10m", got -1m0s`},
		{"churn:\n  hotWrites: 0\n", `line 2: churn.hotWrites: must be positive, got 0 (writes per window above which an object is hot)`},
		{"churn:\n  flapWindow: 0s\n", `line 2: churn.flapWindow: must be a positive duration such as "10m", got 0s`},
		{"churn:\n  maxPairs: -1\n", `line 2: churn.maxPairs: must be positive, got -1 (it caps the manager pairs of the flaps counter)`},
		{"churn:\n  exclude: [Nodes]\n", `line 2: churn.exclude[0]: want a resource in the API server's form such as "nodes" or "endpointslices.discovery.k8s.io", got "Nodes"`},
	} {
		if _, err := Parse([]byte(tc.doc)); err == nil || err.Error() != tc.want {
			t.Errorf("Parse(%q):\n got %v\nwant %s", tc.doc, err, tc.want)
		}
	}
}

func mustParse(t *testing.T, doc string) *Config {
	t.Helper()
	c, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return c
}
