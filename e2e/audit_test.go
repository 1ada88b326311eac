package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"
	"time"
)

// auditEvent is what the tests read of an audit log line.
type auditEvent struct {
	Verb      string `json:"verb"`
	Stage     string `json:"stage"`
	ObjectRef *struct {
		Resource, Namespace, Name, Subresource string
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	// StageTimestamp is when the API server completed the response
	// (microseconds).
	StageTimestamp time.Time `json:"stageTimestamp"`
}

// audited returns the completed requests of the API server's audit log
// on resource in namespace that keep says to keep.
func audited(t *testing.T, resource, namespace string, keep func(auditEvent) bool) []auditEvent {
	t.Helper()
	f, err := os.Open(sb.AuditLogPath())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []auditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e auditEvent
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue // a line being written
		}
		if e.Stage == "ResponseComplete" && e.ObjectRef != nil && e.ObjectRef.Resource == resource &&
			e.ObjectRef.Namespace == namespace && e.ResponseStatus != nil && keep(e) {
			out = append(out, e)
		}
	}
	return out
}
