package replay

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/kube-convergence/kube-convergence-exporter/internal/informers"
)

// The notification types of a recording (see Notification).
const (
	// typeList is one object of a list cycle (an initial list or a
	// relist), received at At; the cycle is delivered at its list-end.
	typeList = "list"
	// typeListEnd completes the open list cycle of its resource (an empty
	// one when no list line came before): the informer replaces its store.
	typeListEnd = "list-end"
	// Watch events, as the reflector hands them to the informer.
	typeAdded    = "added"
	typeModified = "modified"
	typeDeleted  = "deleted"
	// typeTombstone hands the handlers a cache.DeletedFinalStateUnknown
	// of Key carrying Object (absent: none). Never recorded: a relist
	// produces tombstones by itself; synthetic recordings use it to hand
	// what a broken informer could.
	typeTombstone = "tombstone"
	// typeNote is free text (what the scenario did, a watch error the
	// recorder saw); the replay skips it.
	typeNote = "note"
	// typeEnd is the time the recording stopped, its last line: the replay
	// runs the clock (and the collectors' periodic work) up to it.
	typeEnd = "end"
)

// Notification is one line of a recording: one thing an informer received,
// in the order the exporter's informers would process them.
//
// A watch gap with a relist is a run of list lines ending with list-end
// after the resource's first cycle: the replay informer turns keys the
// relist lacks into tombstones and a key listed under another uid into an
// update from the old object (a recreation), exactly as client-go does.
type Notification struct {
	// Resource is the informers.Resource String() form: pods,
	// deployments.apps, widgets.example.com. Absent on end lines; on a
	// note line, the resource it is about, if any (free text too).
	Resource string `json:"resource,omitempty"`
	Type     string `json:"type"`
	// At is the receive time: the stamp package listwatch put on the
	// object (list items of one LIST page share it), else the time the
	// reflector handed the line to the store.
	At time.Time `json:"at"`
	// Live is false for objects of a list cycle and for the replayed
	// backlog of a resumed watch (listwatch's judgement); required on
	// added, modified and deleted lines.
	Live *bool `json:"live,omitempty"`
	// Key is a tombstone's store key (namespace/name).
	Key string `json:"key,omitempty"`
	// Note is a note line's text.
	Note string `json:"note,omitempty"`
	// Object is the object as the API server sent it (apiVersion and kind
	// set, managedFields kept), without the exporter's receive stamps.
	Object json.RawMessage `json:"object,omitempty"`
	// Old, on a modified line of a synthetic recording, is the old object
	// the informer hands whatever its store holds (a recorded line never
	// has it: the store decides).
	Old json.RawMessage `json:"old,omitempty"`
}

// Recording is a parsed, validated recording.
type Recording struct {
	Name  string // the file, for messages
	Lines []Line
}

// Line is one notification, decoded.
type Line struct {
	N        int // line number in the file, from 1
	Type     string
	Resource informers.Resource
	At       time.Time
	Live     bool
	Key      string
	Note     string
	Object   runtime.Object // typed for built-in kinds, else *unstructured.Unstructured
	Old      runtime.Object
}

// Start is the receive time of the first line.
func (r *Recording) Start() time.Time {
	if len(r.Lines) == 0 {
		return time.Time{}
	}
	return r.Lines[0].At
}

// End is the time of the last line.
func (r *Recording) End() time.Time {
	end := time.Time{}
	for _, l := range r.Lines {
		if l.At.After(end) {
			end = l.At
		}
	}
	return end
}

// LineError is a malformed line of a recording.
type LineError struct {
	File string
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// Resources resolves a recording's resource names: the ones the exporter
// reads, the configured custom resources included.
type Resources map[string]informers.Resource

// NewResources returns the built-in resources the informer factory knows
// and custom.
func NewResources(custom ...informers.Resource) Resources {
	rs := Resources{}
	for _, r := range builtin {
		rs[r.String()] = r
	}
	for _, r := range custom {
		rs[r.String()] = r
	}
	return rs
}

// builtin are the resources the informer factory knows (informers.known
// and the CRDs): a test checks every resource a collector reads is here.
var builtin = []informers.Resource{
	informers.Pods, informers.Services, informers.Nodes, informers.Deployments, informers.StatefulSets,
	informers.DaemonSets, informers.ReplicaSets, informers.EndpointSlices, informers.Namespaces,
	informers.ValidatingWebhookConfigurations, informers.MutatingWebhookConfigurations,
	informers.WarningEvents, informers.CustomResourceDefinitions,
}

// ReadFile reads and validates the recording at path.
func ReadFile(path string, rs Resources) (*Recording, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	defer f.Close()
	return Read(f, path, rs)
}

// maxLine bounds one line: a recorded object is rarely above 100 KB (a
// large ConfigMap or CRD schema would be; the collectors read neither).
const maxLine = 8 << 20

// Read reads and validates a recording; name is used in errors. A
// malformed line fails the whole recording with its line number: bad JSON,
// an unknown resource or type, an object that does not decode, a receive
// time before the previous one of its resource, a list cycle left open.
func Read(r io.Reader, name string, rs Resources) (*Recording, error) {
	rec := &Recording{Name: name}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	last := map[informers.Resource]time.Time{}     // the previous line of each resource, outside list cycles
	cycleMax := map[informers.Resource]time.Time{} // the newest item of each open cycle
	open := map[informers.Resource]int{}           // resource -> line of its open cycle's first list line
	ended := 0
	n := 0
	fail := func(err error) (*Recording, error) { return nil, &LineError{File: name, Line: n, Err: err} }
	for sc.Scan() {
		n++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		if ended > 0 {
			return fail(fmt.Errorf("a line after the end line %d", ended))
		}
		l, err := parseLine(b, rs)
		if err != nil {
			return fail(err)
		}
		l.N = n
		switch l.Type {
		case typeNote:
		case typeEnd:
			ended = n
			if end := rec.End(); l.At.Before(end) {
				return fail(fmt.Errorf("time goes backwards: end at %s is before the last line at %s", l.At.Format(time.RFC3339Nano), end.Format(time.RFC3339Nano)))
			}
		default:
			// A list cycle's items may come in any time order (a WatchList
			// stream's are stamped one by one, handed over through a map),
			// after the resource's previous line; its list-end after them.
			prev, ok := last[l.Resource]
			if m := cycleMax[l.Resource]; l.Type == typeListEnd && m.After(prev) {
				prev, ok = m, true
			}
			if ok && l.At.Before(prev) {
				return fail(fmt.Errorf("time goes backwards: %s at %s is before the previous %s line at %s",
					l.Type, l.At.Format(time.RFC3339Nano), l.Resource, prev.Format(time.RFC3339Nano)))
			}
			if l.Type == typeList {
				if l.At.After(cycleMax[l.Resource]) {
					cycleMax[l.Resource] = l.At
				}
			} else {
				last[l.Resource] = l.At
				delete(cycleMax, l.Resource)
			}
			switch first, isOpen := open[l.Resource]; {
			case l.Type == typeList && !isOpen:
				open[l.Resource] = n
			case l.Type == typeListEnd:
				delete(open, l.Resource)
			case l.Type != typeList && isOpen:
				return fail(fmt.Errorf("a %s line of %s inside its list cycle (opened at line %d, not ended)", l.Type, l.Resource, first))
			}
		}
		rec.Lines = append(rec.Lines, l)
	}
	if err := sc.Err(); err != nil {
		n++
		return fail(fmt.Errorf("reading: %w", err))
	}
	for r, first := range open {
		n = first
		return fail(fmt.Errorf("the list cycle of %s opened here never ends (no list-end line)", r))
	}
	return rec, nil
}

// parseLine decodes and checks one line.
func parseLine(b []byte, rs Resources) (Line, error) {
	var nt Notification
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&nt); err != nil {
		return Line{}, fmt.Errorf("not a notification: %w", err)
	}
	if d.More() {
		return Line{}, errors.New("not a notification: more than one JSON value on the line")
	}
	l := Line{Type: nt.Type, At: nt.At, Key: nt.Key, Note: nt.Note}
	if nt.At.IsZero() {
		return l, errors.New(`no receive time ("at")`)
	}
	var errs []error
	check := func(field string, present bool, r rule) {
		switch {
		case present && r == forbidden:
			errs = append(errs, fmt.Errorf("a %s line takes no %q", nt.Type, field))
		case !present && r == required:
			errs = append(errs, fmt.Errorf("a %s line needs %q", nt.Type, field))
		}
	}
	switch nt.Type {
	case typeNote, typeEnd:
		if nt.Type == typeEnd {
			check("resource", nt.Resource != "", forbidden)
		}
		check("object", nt.Object != nil, forbidden)
		check("old", nt.Old != nil, forbidden)
		check("live", nt.Live != nil, forbidden)
		check("key", nt.Key != "", forbidden)
		if nt.Type == typeEnd {
			check("note", nt.Note != "", forbidden)
		}
		return l, errors.Join(errs...)
	case typeList, typeListEnd, typeAdded, typeModified, typeDeleted, typeTombstone:
	default:
		return l, fmt.Errorf("unknown type %q: want list, list-end, added, modified, deleted, tombstone, note or end", nt.Type)
	}
	r, ok := rs[nt.Resource]
	if !ok {
		if nt.Resource == "" {
			return l, errors.New(`no "resource"`)
		}
		return l, fmt.Errorf("unknown resource %q: not one the exporter reads (a custom resource must be in the replay's config)", nt.Resource)
	}
	l.Resource = r
	object, old, live, key := required, forbidden, forbidden, forbidden
	switch nt.Type {
	case typeListEnd:
		object = forbidden
	case typeAdded, typeDeleted:
		live = required
	case typeModified:
		live, old = required, optional
	case typeTombstone:
		object, key = optional, required
	}
	check("object", nt.Object != nil, object)
	check("old", nt.Old != nil, old)
	check("live", nt.Live != nil, live)
	check("key", nt.Key != "", key)
	check("note", nt.Note != "", forbidden)
	if err := errors.Join(errs...); err != nil {
		return l, err
	}
	l.Live = nt.Live != nil && *nt.Live
	var err error
	if nt.Object != nil {
		if l.Object, err = decode(nt.Object); err != nil {
			return l, fmt.Errorf("object: %w", err)
		}
	}
	if nt.Old != nil {
		if l.Old, err = decode(nt.Old); err != nil {
			return l, fmt.Errorf("old: %w", err)
		}
	}
	return l, nil
}

type rule int

const (
	optional rule = iota
	required
	forbidden
)

// decode decodes an object with client-go's scheme when it knows the kind
// (built-in types, as the typed clientset hands them: no apiVersion and
// kind), else as unstructured (custom resources and CRDs, as the dynamic
// client hands them).
func decode(raw json.RawMessage) (runtime.Object, error) {
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(raw, &tm); err != nil {
		return nil, err
	}
	if tm.APIVersion == "" || tm.Kind == "" {
		return nil, errors.New("no apiVersion or kind")
	}
	gv, err := schema.ParseGroupVersion(tm.APIVersion)
	if err != nil {
		return nil, err
	}
	var obj runtime.Object
	if gvk := gv.WithKind(tm.Kind); scheme.Scheme.Recognizes(gvk) {
		if obj, _, err = scheme.Codecs.UniversalDeserializer().Decode(raw, &gvk, nil); err != nil {
			return nil, err
		}
		// The typed clientset clears them (runtime.WithoutVersionDecoder).
		obj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	} else {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			return nil, err
		}
		obj = u
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	if m.GetName() == "" {
		return nil, errors.New("no metadata.name")
	}
	return obj, nil
}
