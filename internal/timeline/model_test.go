package timeline

import (
	"reflect"
	"testing"
	"time"
)

// The expected id is computed outside Go: printf 'b7c1e3a0-uid/3' | sha256sum | cut -c1-32.
func TestTraceIDIsStableSHA256Prefix(t *testing.T) {
	if got, want := TraceID("b7c1e3a0-uid", 3), "bcdae66ca18e3a533be23eb34052379a"; got != want {
		t.Errorf("TraceID = %s, want %s", got, want)
	}
	if TraceID("b7c1e3a0-uid", 4) == TraceID("b7c1e3a0-uid", 3) {
		t.Error("generations share a trace id")
	}
}

// The write entry names the managers of the newest managedFields stamp,
// unless the stamp did not move with the generation: then it is an earlier
// write's (a /scale write stamps none) and the writer is unknown.
func TestWriteEntry(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 9, 0, time.UTC)
	helmAt := now.Add(-time.Minute)
	helm := Write{Generation: 4, Managers: []string{"helm"}, At: helmAt}
	for _, tc := range []struct {
		name         string
		prev         *Write
		cur          Write
		wantManagers []string
		wantAPI      *time.Time
		wantMessage  string
	}{
		{"added: the newest stamp", nil, helm, []string{"helm"}, &helmAt, ""},
		{"the stamp moved with the generation", &Write{Generation: 3, Managers: []string{"argocd"}, At: helmAt.Add(-time.Hour)}, helm, []string{"helm"}, &helmAt, ""},
		{"a /scale write: the generation moved, the stamp did not", &helm, Write{Generation: 5, Managers: []string{"helm"}, At: helmAt, MaybeScale: true}, nil, nil, WriterUnknown},
		{"not a scale: helm's second write in the same second", &helm, Write{Generation: 5, Managers: []string{"helm"}, At: helmAt}, []string{"helm"}, &helmAt, ""},
		{"same generation (a status write): the stamp as it is", &helm, helm, []string{"helm"}, &helmAt, ""},
		{"no stamp at all", nil, Write{Generation: 1}, nil, nil, ""},
	} {
		e := WriteEntry(tc.prev, tc.cur, now)
		if e.Type != EntryWrite || !e.Time.Equal(now) || e.Generation != tc.cur.Generation {
			t.Errorf("%s: entry %+v, want a write of generation %d at %v", tc.name, e, tc.cur.Generation, now)
		}
		if !reflect.DeepEqual(e.Managers, tc.wantManagers) || !reflect.DeepEqual(e.APITime, tc.wantAPI) || e.Message != tc.wantMessage {
			t.Errorf("%s: managers %v api %v message %q, want %v %v %q", tc.name, e.Managers, e.APITime, e.Message, tc.wantManagers, tc.wantAPI, tc.wantMessage)
		}
	}
}
