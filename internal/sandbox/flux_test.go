package sandbox

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"testing"
)

// The artefact tarball is what kustomize-controller verifies and untars
// (fluxcd/pkg/http/fetch v0.25.0: the sha256 of the downloaded bytes must
// equal the digest, then a gzipped tar): the same files always give the
// same bytes, a change gives another digest, and the server serves exactly
// the bytes the digest was taken of.
func TestArtifactTarball(t *testing.T) {
	files := map[string]string{"app/deployment.yaml": "kind: Deployment\n", "app/kustomization.yaml": "resources: [deployment.yaml]\n"}
	a, err := tarGz(files)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := tarGz(files)
	if !bytes.Equal(a, b) {
		t.Error("the same files gave two different tarballs")
	}
	files["app/deployment.yaml"] = "kind: Deployment # changed\n"
	c, _ := tarGz(files)
	if sha256.Sum256(a) == sha256.Sum256(c) {
		t.Error("changed files gave the same digest")
	}
	zr, err := gzip.NewReader(bytes.NewReader(c))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	got := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		got[h.Name] = string(body)
	}
	if len(got) != 2 || got["app/deployment.yaml"] != files["app/deployment.yaml"] {
		t.Errorf("tarball holds %v, want %v", got, files)
	}
	for _, bad := range []string{"/etc/passwd", "../up", "a/../../b", ""} {
		if _, err := tarGz(map[string]string{bad: "x"}); err == nil {
			t.Errorf("file name %q accepted", bad)
		}
	}

	srv, err := startArtifactServer()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := srv.close(); err != nil {
			t.Error(err)
		}
	}()
	url := srv.serve("gitrepository/ns/repo/x.tar.gz", c)
	get := func(u string) (int, []byte) {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, u, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, body
	}
	code, body := get(url)
	sum := sha256.Sum256(c)
	if got := sha256.Sum256(body); code != http.StatusOK || got != sum {
		t.Errorf("GET %s: %d, sha256 %s; want 200, %s", url, code, hex.EncodeToString(got[:]), hex.EncodeToString(sum[:]))
	}
	// The controller reads 404 as "artifact not found" and retries later.
	if code, _ := get(srv.base + "/gitrepository/ns/other/y.tar.gz"); code != http.StatusNotFound {
		t.Errorf("GET of an unpublished artefact: %d, want 404", code)
	}
}
