package sandbox

import (
	"reflect"
	"slices"
	"testing"

	"gopkg.in/yaml.v3"
)

// The extra flags of each control-plane component come last on its command
// line (a later flag wins), and reach no other component. Pure: runs with
// -short too.
func TestComponentExtraFlags(t *testing.T) {
	s := &Sandbox{
		opts: Options{
			APIServerFlags:         []string{"--watch-cache=false"},
			ControllerManagerFlags: []string{"--kube-api-qps=3000", "--kube-api-burst=6000"},
			SchedulerFlags:         []string{"--kube-api-qps=2999", "--kube-api-burst=5999"},
		},
		dir:    t.TempDir(),
		tokens: map[string]string{adminUser: "token"},
	}
	for c, want := range map[Component][]string{
		APIServer:         s.opts.APIServerFlags,
		ControllerManager: s.opts.ControllerManagerFlags,
		Scheduler:         s.opts.SchedulerFlags,
	} {
		spec, err := s.launchSpec(c)
		if err != nil {
			t.Fatal(err)
		}
		if got := spec.args[len(spec.args)-len(want):]; !slices.Equal(got, want) {
			t.Errorf("%s: last flags %q, want %q (all: %q)", c, got, want, spec.args)
		}
		for other, flags := range map[Component][]string{ControllerManager: s.opts.ControllerManagerFlags, Scheduler: s.opts.SchedulerFlags} {
			if other == c {
				continue
			}
			for _, f := range flags {
				if slices.Contains(spec.args, f) {
					t.Errorf("%s got %s's flag %s", c, other, f)
				}
			}
		}
	}
}

// The audit policy logs every request of the listed groups first (the first
// matching rule wins), then writes, then nothing; without groups it is the
// writes-only policy. Pure: runs with -short too.
func TestAuditPolicy(t *testing.T) {
	type rule struct {
		Level      string   `yaml:"level"`
		UserGroups []string `yaml:"userGroups"`
		Verbs      []string `yaml:"verbs"`
	}
	type policy struct {
		Kind  string `yaml:"kind"`
		Rules []rule `yaml:"rules"`
	}
	for _, tc := range []struct {
		groups []string
		want   []rule
	}{
		{nil, []rule{
			{Level: "Metadata", Verbs: []string{"create", "update", "patch", "delete", "deletecollection"}},
			{Level: "None"},
		}},
		{[]string{"system:serviceaccounts:kube-convergence"}, []rule{
			{Level: "Metadata", UserGroups: []string{"system:serviceaccounts:kube-convergence"}},
			{Level: "Metadata", Verbs: []string{"create", "update", "patch", "delete", "deletecollection"}},
			{Level: "None"},
		}},
	} {
		var p policy
		if err := yaml.Unmarshal([]byte(auditPolicy(tc.groups)), &p); err != nil {
			t.Fatalf("%v: %v\n%s", tc.groups, err, auditPolicy(tc.groups))
		}
		if p.Kind != "Policy" || !reflect.DeepEqual(p.Rules, tc.want) {
			t.Errorf("%v: rules %+v, want %+v", tc.groups, p.Rules, tc.want)
		}
	}
}
