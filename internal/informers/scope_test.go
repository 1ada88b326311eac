package informers

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

// ShardOf is FNV-1a 32 modulo total: the published test vectors of the
// hash ("" 0x811c9dc5, "a" 0xe40c292c, "foobar" 0xbf9cf968) and names whose
// hashes were computed outside Go (team-a 0x26db73d6, team-b 0x25db7243).
func TestShardOfIsFNV1aModTotal(t *testing.T) {
	for _, tc := range []struct {
		ns    string
		hash  uint32
		total int
	}{
		{"", 0x811c9dc5, 2}, {"a", 0xe40c292c, 2}, {"foobar", 0xbf9cf968, 3},
		{"team-a", 0x26db73d6, 2}, {"team-b", 0x25db7243, 2}, {"team-b", 0x25db7243, 3}, {"team-b", 0x25db7243, 7},
	} {
		if got, want := ShardOf(tc.ns, tc.total), int(tc.hash%uint32(tc.total)); got != want {
			t.Errorf("ShardOf(%q, %d) = %d, want %d", tc.ns, tc.total, got, want)
		}
	}
	if got := ShardOf("team-b", 1); got != 0 {
		t.Errorf("ShardOf(team-b, 1) = %d, want 0", got)
	}
}

func TestScopeValidateNamesTheFlag(t *testing.T) {
	for _, tc := range []struct {
		s    Scope
		want string
	}{
		{Scope{Index: 2, Total: 2}, "--shard.index: must be below --shard.total=2 (shards are numbered from 0), got 2"},
		{Scope{Index: 0, Total: 0}, "--shard.total: must be at least 1, got 0 (the number of exporter processes the namespaces are split among)"},
		{Scope{Index: 0, Total: -3}, "--shard.total: must be at least 1, got -3 (the number of exporter processes the namespaces are split among)"},
		{Scope{Index: -1, Total: 2}, "--shard.index: must not be negative, got -1"},
	} {
		err := tc.s.Validate()
		if err == nil || err.Error() != tc.want {
			t.Errorf("%+v: %v, want %q", tc.s, err, tc.want)
		}
	}
	for _, ok := range []Scope{{Index: 0, Total: 1}, {Index: 1, Total: 2}, {Index: 4, Total: 5}} {
		if err := ok.Validate(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
}

// scopeCluster is pods in four namespaces (team-a and team-c in shard 0 of
// 2, team-b and team-d in shard 1), a node and a webhook configuration.
func scopeCluster() []runtime.Object {
	var objs []runtime.Object
	for _, ns := range []string{"team-a", "team-b", "team-c", "team-d"} {
		objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p", UID: types.UID("uid-" + ns)}})
	}
	return append(objs,
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-0"}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "hook"}})
}

func storeKeys(t *testing.T, f *Factory, r Resource) []string {
	t.Helper()
	inf, err := f.Informer(r)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	f.Start(t.Context())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatalf("%s: not synced", r)
	}
	keys := inf.GetStore().ListKeys()
	slices.Sort(keys)
	return keys
}

// waitKeys waits until r's store holds want.
func waitKeys(t *testing.T, f *Factory, r Resource, want []string) {
	t.Helper()
	inf, _ := f.Informer(r)
	deadline := time.Now().Add(10 * time.Second)
	for {
		keys := inf.GetStore().ListKeys()
		slices.Sort(keys)
		if slices.Equal(keys, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: store %v, want %v", r, keys, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Both directions: each shard's store holds its namespaces' objects and
// no other's, from the list and from the watch; nodes are in both;
// cluster-scoped webhook configurations in shard 0 only; an excluded
// namespace in none. The expected keys are the hashes above, not ShardOf.
func TestScopeFiltersListsAndWatches(t *testing.T) {
	for _, tc := range []struct {
		name          string
		scope         Scope
		pods, hooks   []string
		late, lateOut string // a pod created after the sync: kept, dropped
	}{
		{"whole cluster", Scope{}, []string{"team-a/p", "team-b/p", "team-c/p", "team-d/p"}, []string{"hook"}, "team-f", ""},
		{"shard 0 of 2", Scope{Index: 0, Total: 2}, []string{"team-a/p", "team-c/p"}, []string{"hook"}, "team-e", "team-f"},
		{"shard 1 of 2", Scope{Index: 1, Total: 2}, []string{"team-b/p", "team-d/p"}, nil, "team-f", "team-e"},
		{"excluded", Scope{Index: 0, Total: 1, Exclude: []string{"team-b", "team-f"}}, []string{"team-a/p", "team-c/p", "team-d/p"}, []string{"hook"}, "team-e", "team-f"},
		{"shard 1 less an exclusion", Scope{Index: 1, Total: 2, Exclude: []string{"team-d"}}, []string{"team-b/p"}, nil, "team-h", "team-d"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset(scopeCluster()...)
			f := New(cs, nil, slog.New(slog.DiscardHandler))
			f.SetScope(tc.scope)
			if got := storeKeys(t, f, Pods); !slices.Equal(got, tc.pods) {
				t.Errorf("pods %v, want %v", got, tc.pods)
			}
			if got := storeKeys(t, f, Nodes); !slices.Equal(got, []string{"node-0"}) {
				t.Errorf("nodes %v, want [node-0] on every shard", got)
			}
			if got := storeKeys(t, f, ValidatingWebhookConfigurations); !slices.Equal(got, tc.hooks) && len(got)+len(tc.hooks) > 0 {
				t.Errorf("webhook configurations %v, want %v", got, tc.hooks)
			}
			for _, ns := range []string{tc.lateOut, tc.late} { // the kept one last: its arrival proves the other was seen first
				if ns == "" {
					continue
				}
				if _, err := cs.CoreV1().Pods(ns).Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late"}}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			want := slices.Sorted(slices.Values(append(slices.Clone(tc.pods), tc.late+"/late")))
			waitKeys(t, f, Pods, want)
		})
	}
}

// Custom resources go through the same filter: namespaced ones by their
// namespace, cluster-scoped ones to shard 0 only.
func TestScopeFiltersCustomResources(t *testing.T) {
	widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	clusterWidgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "clusterwidgets"}
	obj := func(kind, ns, name string) runtime.Object {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("example.com/v1")
		u.SetKind(kind)
		u.SetNamespace(ns)
		u.SetName(name)
		return u
	}
	for _, tc := range []struct {
		scope         Scope
		namespaced    []string
		clusterScoped []string
	}{
		{Scope{Index: 0, Total: 2}, []string{"team-a/w"}, []string{"cw"}},
		{Scope{Index: 1, Total: 2}, []string{"team-b/w"}, nil},
	} {
		dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
			map[schema.GroupVersionResource]string{widgets: "WidgetList", clusterWidgets: "ClusterWidgetList"},
			obj("Widget", "team-a", "w"), obj("Widget", "team-b", "w"), obj("ClusterWidget", "", "cw"))
		f := New(fake.NewClientset(), nil, slog.New(slog.DiscardHandler))
		f.SetDynamic(dyn)
		f.SetScope(tc.scope)
		for _, c := range []struct {
			r    Resource
			want []string
		}{
			{Resource{widgets.Group, widgets.Version, widgets.Resource}, tc.namespaced},
			{Resource{clusterWidgets.Group, clusterWidgets.Version, clusterWidgets.Resource}, tc.clusterScoped},
		} {
			inf, err := f.Dynamic(c.r, func(o any) (any, error) { return o, nil }, nil)
			if err != nil {
				t.Fatal(err)
			}
			go inf.RunWithContext(t.Context())
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
				t.Fatalf("%s: not synced", c.r)
			}
			cancel()
			keys := inf.GetStore().ListKeys()
			slices.Sort(keys)
			if !slices.Equal(keys, c.want) && len(keys)+len(c.want) > 0 {
				t.Errorf("shard %d: %s %v, want %v", tc.scope.Index, c.r, keys, c.want)
			}
		}
	}
}

// --kube.namespaces: the API server is asked for the included namespaces
// only (one list and one watch each: decode saved), the store holds their
// objects, handlers get each object once, and the indexes read across
// namespaces; cluster-scoped resources stay one cluster-wide informer. In
// shard 1 of 2 only its included namespaces are watched.
func TestIncludedNamespacesHaveWatchesOfTheirOwn(t *testing.T) {
	for _, tc := range []struct {
		name    string
		scope   Scope
		watched []string // namespaces of the pod list calls
		pods    []string
	}{
		{"included", Scope{Include: []string{"team-a", "team-b", "team-c"}}, []string{"team-a", "team-b", "team-c"}, []string{"team-a/p", "team-b/p", "team-c/p"}},
		{"included, shard 1 of 2", Scope{Index: 1, Total: 2, Include: []string{"team-a", "team-b", "team-d"}}, []string{"team-b", "team-d"}, []string{"team-b/p", "team-d/p"}},
		{"included less excluded", Scope{Include: []string{"team-a", "team-c"}, Exclude: []string{"team-d"}}, []string{"team-a", "team-c"}, []string{"team-a/p", "team-c/p"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset(scopeCluster()...)
			var mu sync.Mutex
			lists := map[string][]string{}
			cs.PrependReactor("list", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
				mu.Lock()
				defer mu.Unlock()
				lists[a.GetResource().Resource] = append(lists[a.GetResource().Resource], a.GetNamespace())
				return false, nil, nil
			})
			f := New(cs, nil, slog.New(slog.DiscardHandler))
			f.SetScope(tc.scope)
			inf, err := f.Informer(Pods)
			if err != nil {
				t.Fatal(err)
			}
			var handled []string
			var hmu sync.Mutex
			if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(o any) {
				hmu.Lock()
				defer hmu.Unlock()
				p := o.(*Pod)
				handled = append(handled, p.Namespace+"/"+p.Name)
			}}); err != nil {
				t.Fatal(err)
			}
			if got := storeKeys(t, f, Pods); !slices.Equal(got, tc.pods) {
				t.Errorf("pods %v, want %v", got, tc.pods)
			}
			if got := storeKeys(t, f, Nodes); !slices.Equal(got, []string{"node-0"}) {
				t.Errorf("nodes %v, want [node-0]", got)
			}
			mu.Lock()
			got := slices.Sorted(slices.Values(lists["pods"]))
			nodeLists := slices.Clone(lists["nodes"])
			mu.Unlock()
			if !slices.Equal(got, tc.watched) {
				t.Errorf("pods listed in %q, want %q (one list per included namespace of the shard)", got, tc.watched)
			}
			if !slices.Equal(nodeLists, []string{""}) {
				t.Errorf("nodes listed in %q, want one cluster-wide list", nodeLists)
			}
			for _, key := range tc.pods {
				ns, _, _ := strings.Cut(key, "/")
				objs, err := inf.GetIndexer().ByIndex(IndexUID, "uid-"+ns)
				if err != nil || len(objs) != 1 {
					t.Errorf("ByIndex(uid, uid-%s): %d objects, %v", ns, len(objs), err)
				}
				if _, ok, _ := inf.GetIndexer().GetByKey(key); !ok {
					t.Errorf("GetByKey(%s): missing", key)
				}
			}
			if _, ok, _ := inf.GetIndexer().GetByKey("team-z/p"); ok {
				t.Error("GetByKey(team-z/p): found")
			}
			deadline := time.Now().Add(5 * time.Second)
			for {
				hmu.Lock()
				h := slices.Sorted(slices.Values(handled))
				hmu.Unlock()
				if slices.Equal(h, tc.pods) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("handled %v, want %v once each", h, tc.pods)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}
