package resources

import (
	"reflect"
	"testing"
	"time"

	"github.com/kube-convergence/kube-convergence-exporter/internal/records"
)

// A custom resource's conditions enter its timeline when their status,
// reason or message change; all of them when there is nothing to compare.
func TestConditionEntries(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 5, 0, time.UTC)
	obj := func(cs ...records.CustomCondition) *records.CustomObject {
		return &records.CustomObject{Conditions: cs}
	}
	issuing := records.CustomCondition{Type: "Ready", Status: "False", Reason: "Issuing", Message: "<script>alert(1)</script>", LastTransition: at}
	failed := records.CustomCondition{Type: "Ready", Status: "False", Reason: "Failed", Message: "rate limited", LastTransition: at}
	stalled := records.CustomCondition{Type: "Stalled", Status: "True", Reason: "Failed"}
	for _, tc := range []struct {
		name     string
		old, cur *records.CustomObject
		want     []string
	}{
		{"first seen", nil, obj(issuing, stalled), []string{"Ready=False|Issuing: <script>alert(1)</script>|true", "Stalled=True|Failed: |false"}},
		{"unchanged", obj(issuing), obj(issuing), nil},
		{"reason and message changed", obj(issuing), obj(failed), []string{"Ready=False|Failed: rate limited|true"}},
		{"a new condition", obj(failed), obj(failed, stalled), []string{"Stalled=True|Failed: |false"}},
	} {
		var got []string
		for _, e := range conditionEntries(tc.old, tc.cur) {
			got = append(got, e.Reason+"|"+e.Message+"|"+map[bool]string{true: "true", false: "false"}[e.APITime != nil && e.APITime.Equal(at)])
			if e.Type != "condition" {
				t.Errorf("%s: type %s", tc.name, e.Type)
			}
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}
