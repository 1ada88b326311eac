package demo

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
)

// The demo's custom resource: Backups, reconciled by the small controller
// below the way an operator does (observedGeneration, then Ready), so that
// the resources collector has something to time.
const (
	BackupGroup = "demo.kce.io"
	// BackupObserveDelay and BackupReadyDelay are the controller's
	// injected delays: observed after the first, Ready after both.
	BackupObserveDelay = 500 * time.Millisecond
	BackupReadyDelay   = 2 * time.Second
	// LabelBackupFails makes the controller give up on a Backup
	// (kstatus Stalled=True).
	LabelBackupFails = "demo.kce.io/fails"
)

// BackupsConfig is the exporter configuration that tracks Backups.
const BackupsConfig = `resources:
  - group: demo.kce.io
    resource: backups
    stallThreshold: 30s
`

var (
	crdResource    = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	backupResource = schema.GroupVersionResource{Group: BackupGroup, Version: "v1", Resource: "backups"}
)

// InstallBackups creates the Backup CRD, waits until it is served, and
// creates three Backups: nightly and hourly converge, broken stalls.
func InstallBackups(ctx context.Context, d dynamic.Interface) error {
	schemaObj := map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "backups." + BackupGroup},
		"spec": map[string]any{
			"group": BackupGroup, "scope": "Namespaced",
			"names": map[string]any{"kind": "Backup", "plural": "backups", "singular": "backup", "listKind": "BackupList"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{
					"spec": schemaObj, "status": schemaObj}}},
				"subresources": map[string]any{"status": map[string]any{}},
			}},
		},
	}}
	if _, err := d.Resource(crdResource).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("demo: backup CRD: %w", err)
	}
	backups := d.Resource(backupResource).Namespace(Namespace)
	for deadline := time.Now().Add(30 * time.Second); ; {
		_, err := backups.List(ctx, metav1.ListOptions{})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("demo: backups not served: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, b := range []struct {
		name  string
		fails bool
	}{{"nightly", false}, {"hourly", false}, {"broken", true}} {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": BackupGroup + "/v1", "kind": "Backup",
			"metadata": map[string]any{"name": b.name, "namespace": Namespace},
			"spec":     map[string]any{"schedule": "@daily", "retention": int64(7)},
		}}
		if b.fails {
			obj.SetLabels(map[string]string{LabelBackupFails: "true"})
		}
		if _, err := backups.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("demo: backup %s: %w", b.name, err)
		}
	}
	return nil
}

// RunBackupController reconciles Backups until ctx ends: it polls them every
// 100 ms (a demo needs no informer), observes a new generation after
// BackupObserveDelay (Ready=False, Reconciling=True) and sets Ready=True
// BackupReadyDelay later, or Stalled=True for a Backup labelled to fail. Every
// 20 s it changes hourly's spec, so that rollouts keep coming.
func RunBackupController(ctx context.Context, d dynamic.Interface, logger *slog.Logger) {
	RunBackupControllerReporting(ctx, d, logger, nil)
}

// BackupWrite is one status write of the demo controller: the backup, its
// generation, whether it set Ready=True, and when the API server answered.
type BackupWrite struct {
	Name       string
	Generation int64
	Ready      bool
	At         time.Time
}

// RunBackupControllerReporting is RunBackupController, calling wrote (when
// not nil) after each status write the API server accepted: the truth a
// test measures the exporter against.
func RunBackupControllerReporting(ctx context.Context, d dynamic.Interface, logger *slog.Logger, wrote func(BackupWrite)) {
	if wrote == nil {
		wrote = func(BackupWrite) {}
	}
	backups := d.Resource(backupResource).Namespace(Namespace)
	var mu sync.Mutex
	busy := map[string]int64{} // name -> generation being reconciled
	reconcile := func(name string, gen int64, fails bool) {
		defer func() { mu.Lock(); delete(busy, name); mu.Unlock() }()
		sleep := func(d time.Duration) bool {
			select {
			case <-ctx.Done():
				return false
			case <-time.After(d):
				return true
			}
		}
		if !sleep(BackupObserveDelay) {
			return
		}
		if writeBackupStatus(ctx, backups, name, gen, []any{cond("Ready", "False", "Progressing", gen), cond("Reconciling", "True", "Progressing", gen)}, logger) {
			wrote(BackupWrite{Name: name, Generation: gen, At: time.Now()})
		}
		if !sleep(BackupReadyDelay) {
			return
		}
		last := []any{cond("Ready", "True", "Succeeded", gen)}
		if fails {
			last = []any{cond("Ready", "False", "BucketUnreachable", gen), cond("Stalled", "True", "BucketUnreachable", gen)}
		}
		if writeBackupStatus(ctx, backups, name, gen, last, logger) {
			wrote(BackupWrite{Name: name, Generation: gen, Ready: !fails, At: time.Now()})
		}
	}
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	churn := time.NewTicker(20 * time.Second)
	defer churn.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-churn.C:
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				u, err := backups.Get(ctx, "hourly", metav1.GetOptions{})
				if err != nil {
					return err
				}
				r, _, _ := unstructured.NestedInt64(u.Object, "spec", "retention")
				_ = unstructured.SetNestedField(u.Object, r%30+1, "spec", "retention")
				_, err = backups.Update(ctx, u, metav1.UpdateOptions{})
				return err
			})
			if err != nil && ctx.Err() == nil {
				logger.Warn("demo: change backup", "err", err)
			}
		case <-poll.C:
			list, err := backups.List(ctx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			for i := range list.Items {
				u := &list.Items[i]
				observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
				mu.Lock()
				_, inFlight := busy[u.GetName()]
				start := !inFlight && observed < u.GetGeneration()
				if start {
					busy[u.GetName()] = u.GetGeneration()
				}
				mu.Unlock()
				if start {
					go reconcile(u.GetName(), u.GetGeneration(), u.GetLabels()[LabelBackupFails] == "true")
				}
			}
		}
	}
}

func cond(typ, status, reason string, gen int64) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": "demo backup controller",
		"observedGeneration": gen, "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
}

// writeBackupStatus writes a backup's status for generation gen and
// reports whether it was written.
func writeBackupStatus(ctx context.Context, backups dynamic.ResourceInterface, name string, gen int64, conds []any, logger *slog.Logger) bool {
	written := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u, err := backups.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if u.GetGeneration() != gen {
			return nil // a newer generation arrived: its own reconcile writes
		}
		u.Object["status"] = map[string]any{"observedGeneration": gen, "conditions": conds}
		_, err = backups.UpdateStatus(ctx, u, metav1.UpdateOptions{})
		written = err == nil
		return err
	})
	if err != nil && ctx.Err() == nil && !apierrors.IsNotFound(err) {
		logger.Warn("demo: backup status", "name", name, "err", err)
	}
	return written
}
