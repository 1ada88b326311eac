package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-convergence/kube-convergence-exporter/internal/replay"
	"github.com/kube-convergence/kube-convergence-exporter/internal/sandbox"
)

func TestBadFlagsExit2(t *testing.T) {
	var stderr bytes.Buffer
	if code := run([]string{"--duration=soon"}, &bytes.Buffer{}, &stderr); code != 2 || !strings.Contains(stderr.String(), "duration") {
		t.Errorf("exit %d, stderr %q; want 2 naming the flag", code, stderr.String())
	}
}

// TestRecordsAnAPIServer runs the command against a real API server
// (KCE_RECORD=1: it starts one) and reads its recording back.
func TestRecordsAnAPIServer(t *testing.T) {
	if os.Getenv("KCE_RECORD") == "" {
		t.Skip("starts an API server: KCE_RECORD=1")
	}
	sb := sandbox.StartT(t, sandbox.Options{Only: []sandbox.Component{sandbox.Etcd, sandbox.APIServer}})
	c := kubernetes.NewForConfigOrDie(sb.AdminConfig())
	go func() {
		time.Sleep(2 * time.Second)
		_, _ = c.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "recorded"}}, metav1.CreateOptions{})
	}()
	out := filepath.Join(t.TempDir(), "r.jsonl")
	var stderr bytes.Buffer
	if code := run([]string{"--kubeconfig=" + sb.Kubeconfig(""), "--namespace=recorded", "--duration=4s", "-o", out}, &bytes.Buffer{}, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	rec, err := replay.ReadFile(out, replay.NewResources())
	if err != nil {
		t.Fatal(err)
	}
	var added, ended bool
	for _, l := range rec.Lines {
		added = added || l.Type == "added" && l.Resource.Resource == "namespaces" && l.Live
		ended = ended || l.Type == "end"
	}
	if !added || !ended {
		t.Errorf("recording lacks the live Namespace add (%v) or the end line (%v):\n%s", added, ended, stderr.String())
	}
}
