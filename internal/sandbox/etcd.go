package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// CompactEtcd compacts etcd at its current revision and returns that
// revision. A watch from any older resourceVersion then fails with 410 Gone
// once it reaches etcd (immediately with --watch-cache=false; with the watch
// cache, only when the cache no longer holds the version either).
//
// It talks to etcd's gRPC gateway (JSON over HTTP on the client URL) rather
// than go.etcd.io/etcd/client/v3, which would add a gRPC stack to the
// project's module for two calls.
func (s *Sandbox) CompactEtcd(ctx context.Context) (int64, error) {
	if !s.enabled[Etcd] {
		return 0, fmt.Errorf("sandbox: compact etcd: etcd is not running in this sandbox")
	}
	// A single-key range returns the store's current revision in its header
	// ("Lw==" is base64 for "/"; keys_only keeps the answer small).
	var rng struct {
		Header struct {
			Revision jsonInt64 `json:"revision"`
		} `json:"header"`
	}
	if err := s.etcdPost(ctx, "/v3/kv/range", `{"key":"Lw==","limit":1,"keys_only":true}`, &rng); err != nil {
		return 0, fmt.Errorf("sandbox: compact etcd: reading the revision: %w", err)
	}
	rev := int64(rng.Header.Revision)
	if rev <= 0 {
		return 0, fmt.Errorf("sandbox: compact etcd: etcd reported revision %d", rev)
	}
	// physical=true returns only once the compaction is applied to the
	// backend, so a watch started after this call sees it.
	body := fmt.Sprintf(`{"revision":"%d","physical":true}`, rev)
	if err := s.etcdPost(ctx, "/v3/kv/compaction", body, nil); err != nil {
		return 0, fmt.Errorf("sandbox: compact etcd at revision %d: %w", rev, err)
	}
	return rev, nil
}

func (s *Sandbox) etcdPost(ctx context.Context, path, body string, out any) error {
	// Compaction of a small store takes milliseconds; 30 s only guards
	// against a hung etcd when the caller's context has no deadline.
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.EtcdURL()+path, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	// No keep-alive: a pooled connection would be stale after RestartEtcd.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("POST %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s: %s", path, resp.Status, bytes.TrimSpace(b))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("POST %s: decoding %q: %w", path, b, err)
		}
	}
	return nil
}

// jsonInt64 decodes an int64 that the gRPC gateway writes as a JSON string
// (proto3's JSON mapping for 64-bit integers), or as a plain number.
type jsonInt64 int64

func (n *jsonInt64) UnmarshalJSON(b []byte) error {
	v, err := strconv.ParseInt(strings.Trim(string(b), `"`), 10, 64)
	if err != nil {
		return fmt.Errorf("decoding int64 %s: %w", b, err)
	}
	*n = jsonInt64(v)
	return nil
}
