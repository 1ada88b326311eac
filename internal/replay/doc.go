// Package replay feeds recorded notification sequences into every
// collector of the exporter at once, with a fake clock, and answers what
// the exporter would: the whole /metrics exposition and the timeline API.
// The arithmetic of the trackers is proven there in milliseconds, against
// golden files; the end-to-end suite keeps what needs a real control plane.
//
// A recording is JSON lines, one notification per line, in the order the
// exporter's informers would process them (Notification documents the
// fields; docs/replay.md shows examples):
//
//	{"resource":"pods","type":"list","at":"...","object":{...}}
//	{"resource":"pods","type":"list-end","at":"..."}
//	{"resource":"pods","type":"modified","at":"...","live":true,"object":{...}}
//	{"type":"note","at":"...","note":"cut the recorder's connections"}
//	{"type":"end","at":"..."}
//
// A list cycle is its list lines and list-end: the first one of a resource
// is its initial list, a later one a relist, from which the replay
// informer derives tombstones (keys the relist lacks) and recreations (a
// key listed under another uid) as client-go does. Synthetic recordings
// may also hand what a broken informer could: a tombstone line, an update
// from an explicit old object.
//
// Recordings come from a real cluster through a Recorder (cmd/kce-record,
// or TestRecordScenarios for the sandbox scenarios of testdata:
// KCE_RECORD=1 go test -run TestRecordScenarios ./internal/replay/). The
// replay of testdata runs in the unit suite (TestRecordings); -update
// rewrites its goldens.
package replay
