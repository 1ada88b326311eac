// Package sandbox runs a real Kubernetes control plane on loopback for
// end-to-end tests and the demo: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok (which plays the kubelet
// for fake nodes), each as a plain child process built by tools/build.sh.
// It also runs Prometheus and Alertmanager (prometheus.go, alertmanager.go),
// and Flux's kustomize-controller with a stand-in for source-controller's
// artefacts (flux.go).
//
// Everything binds to 127.0.0.1 on free ports and keeps its data under one
// scratch directory, so several sandboxes can run side by side. Every child
// is stopped by its own pid when the sandbox stops, and dies with the test
// binary if that is killed (see spawner).
//
// A test binary should start one sandbox in TestMain and share it: a full
// control plane costs about 500 MB and a few seconds of a 2-core machine.
package sandbox

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// Component names one process of the control plane; the value is also the
// binary's name and the stem of its log file.
type Component string

const (
	Etcd              Component = "etcd"
	APIServer         Component = "kube-apiserver"
	ControllerManager Component = "kube-controller-manager"
	Scheduler         Component = "kube-scheduler"
	Kwok              Component = "kwok"
)

// components returns every component in start order.
func components() []Component {
	return []Component{Etcd, APIServer, ControllerManager, Scheduler, Kwok}
}

// Options for Start. The zero value starts the full control plane with
// instant pod stages.
type Options struct {
	// Dir is the scratch directory for data, keys, kubeconfigs and logs.
	// Default: a fresh os.MkdirTemp("", "kce-sandbox-"), removed by Stop.
	// A given Dir is created if needed and never removed.
	Dir string
	// BinDir holds the component binaries. Default: $KCE_BIN_DIR, else .bin
	// in the root of this project's module, found by walking up from the
	// working directory.
	BinDir string
	// Stages selects kwok's pod lifecycle; the default is StagesFast.
	Stages Stages
	// ExtraStages are additional kwok Stage YAML documents, appended after
	// the stock ones.
	ExtraStages []string
	// APIServerFlags are appended to kube-apiserver's command line (a later
	// flag wins), e.g. "--watch-cache=false".
	APIServerFlags []string
	// AuditLog makes the API server write a Metadata-level audit log of
	// every write (create, update, patch, delete) to AuditLogPath, one JSON
	// event per line; reads are not logged (but see AuditEveryRequestOf).
	// Tests compare what a controller reports with what the API server
	// answered (the pod creates a quota rejected with 403).
	AuditLog bool
	// AuditEveryRequestOf are user groups (a ServiceAccount's is
	// system:serviceaccounts:<namespace>) whose every request, reads and
	// non-resource URLs (/version, /api, discovery) included, the audit
	// log records at Metadata level, so that a test can compare what a
	// client did with what its roles grant. Needs AuditLog. A group, not a
	// user name: a test creates its ServiceAccounts after Start.
	AuditEveryRequestOf []string
	// ControllerManagerFlags are appended to kube-controller-manager's
	// command line, e.g. "--endpointslice-updates-batch-period=2s".
	ControllerManagerFlags []string
	// SchedulerFlags are appended to kube-scheduler's command line, e.g.
	// "--kube-api-qps=3000" (its client's default of 50 QPS binds about
	// 50 pods a second: a scale run of 20,000 pods needs more).
	SchedulerFlags []string
	// Users are extra token users without any group besides
	// system:authenticated, so RBAC grants them nothing until a test binds
	// a role. Names must be unique and must not be "admin".
	Users []string
	// Only, if non-empty, starts just these components, e.g.
	// {Etcd, APIServer}. The API server needs etcd; the other components
	// need the API server.
	Only []Component
	// Logf receives progress lines; default: discard.
	Logf func(format string, args ...any)
}

// adminUser is the system:masters token user that the sandbox's own
// components and AdminConfig use.
const adminUser = "admin"

// Sandbox is a running control plane. Its methods are safe for concurrent
// use.
type Sandbox struct {
	opts    Options
	dir     string
	ownDir  bool
	binDir  string
	logf    func(string, ...any)
	spawner *spawner
	probe   *http.Client
	enabled map[Component]bool

	// Ports, fixed after Start; restarts reuse them.
	etcdPort, etcdPeerPort int
	apiPort                int
	cmPort, schedPort      int
	kwokPort               int

	tokens map[string]string // user -> bearer token, including adminUser
	caData []byte            // PEM of the apiserver's self-signed serving cert and its CA

	// lifecycle serialises Stop with restarts, so a component is never
	// restarted into a stopped sandbox.
	lifecycle sync.Mutex
	mu        sync.Mutex // guards the fields below
	procs     map[Component]*process
	proxies   []*Proxy
	stopped   bool
	stopErr   error
}

// Start starts the selected components in dependency order and returns once
// every one of them is ready: etcd /health, kube-apiserver /readyz,
// controller-manager and scheduler /healthz on their secure ports, kwok
// /healthz. On failure it stops whatever it started; the error names the
// component and ends with the last lines of its log.
func Start(ctx context.Context, o Options) (_ *Sandbox, err error) {
	begin := time.Now()
	s := &Sandbox{
		opts:    o,
		logf:    o.Logf,
		enabled: map[Component]bool{},
		tokens:  map[string]string{},
		procs:   map[Component]*process{},
		probe: &http.Client{
			Timeout: 2 * time.Second,
			Transport: &http.Transport{
				// Health probes only: the components' serving certificates
				// are self-signed, and the probe carries no secret except to
				// the apiserver, whose CA is not known until it has started.
				TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
				// A probe must not reuse a connection to a process that a
				// restart replaced.
				DisableKeepAlives: true,
			},
		},
	}
	if s.logf == nil {
		s.logf = func(string, ...any) {}
	}
	if err := s.selectComponents(o.Only); err != nil {
		return nil, err
	}
	if err := validateUsers(o.Users); err != nil {
		return nil, err
	}
	s.binDir = o.BinDir
	if s.binDir == "" {
		if s.binDir, err = findBinDir(); err != nil {
			return nil, err
		}
	}
	for _, c := range components() {
		if s.enabled[c] {
			if _, err := binary(s.binDir, string(c)); err != nil {
				return nil, fmt.Errorf("sandbox: %w", err)
			}
		}
	}

	if o.Dir == "" {
		if s.dir, err = os.MkdirTemp("", "kce-sandbox-"); err != nil {
			return nil, fmt.Errorf("sandbox: creating scratch dir: %w", err)
		}
		s.ownDir = true
	} else {
		if s.dir, err = filepath.Abs(o.Dir); err != nil {
			return nil, fmt.Errorf("sandbox: %w", err)
		}
		if err := os.MkdirAll(s.dir, 0o755); err != nil {
			return nil, fmt.Errorf("sandbox: creating scratch dir: %w", err)
		}
	}
	s.spawner = newSpawner()
	defer func() {
		if err != nil {
			err = errors.Join(err, s.Stop())
		}
	}()

	if err := s.writeCredentials(); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	s.logf("sandbox: dir %s, bin %s", s.dir, s.binDir)

	for _, c := range []Component{Etcd, APIServer} {
		if s.enabled[c] {
			if err := s.startComponent(ctx, c, true); err != nil {
				return nil, err
			}
		}
	}
	if s.enabled[APIServer] {
		if err := s.afterAPIServer(); err != nil {
			return nil, fmt.Errorf("sandbox: %w", err)
		}
	}
	// The rest depend only on the API server: start them side by side. Each
	// is ready in 0.1-0.4 s here, so this saves about half a second of a
	// 3 s start, and more on a loaded machine.
	var wg sync.WaitGroup
	errs := make([]error, len(components()))
	for i, c := range components()[2:] {
		if !s.enabled[c] {
			continue
		}
		wg.Go(func() { errs[i] = s.startComponent(ctx, c, true) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	s.logf("sandbox: ready in %s", time.Since(begin).Round(time.Millisecond))
	return s, nil
}

// StartT starts a sandbox for a test and stops it in t.Cleanup. If the test
// failed, the cleanup first logs the tail of every component's log.
func StartT(t testing.TB, o Options) *Sandbox {
	t.Helper()
	if o.Logf == nil {
		o.Logf = t.Logf
	}
	s, err := Start(context.Background(), o)
	if err != nil {
		t.Fatalf("starting sandbox: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, c := range components() {
				if s.enabled[c] {
					t.Logf("--- last %d lines of %s:\n%s", logTailLines, s.LogPath(c), logTail(s.LogPath(c), logTailLines))
				}
			}
		}
		if err := s.Stop(); err != nil {
			t.Errorf("stopping sandbox: %v", err)
		}
	})
	return s
}

func (s *Sandbox) selectComponents(only []Component) error {
	if len(only) == 0 {
		only = components()
	}
	known := map[Component]bool{}
	for _, c := range components() {
		known[c] = true
	}
	for _, c := range only {
		if !known[c] {
			return fmt.Errorf("sandbox: unknown component %q", c)
		}
		s.enabled[c] = true
	}
	if s.enabled[APIServer] && !s.enabled[Etcd] {
		return errors.New("sandbox: kube-apiserver needs etcd")
	}
	for _, c := range []Component{ControllerManager, Scheduler, Kwok} {
		if s.enabled[c] && !s.enabled[APIServer] {
			return fmt.Errorf("sandbox: %s needs kube-apiserver", c)
		}
	}
	return nil
}

func validateUsers(users []string) error {
	seen := map[string]bool{adminUser: true}
	for _, u := range users {
		if u == "" || strings.ContainsAny(u, ",\"\n\r") {
			return fmt.Errorf("sandbox: invalid user name %q", u)
		}
		if seen[u] {
			return fmt.Errorf("sandbox: duplicate or reserved user name %q", u)
		}
		seen[u] = true
	}
	return nil
}

// Paths inside Dir.
func (s *Sandbox) path(elem ...string) string {
	return filepath.Join(append([]string{s.dir}, elem...)...)
}
func (s *Sandbox) saKeyFile() string   { return s.path("pki", "sa.key") }
func (s *Sandbox) saPubFile() string   { return s.path("pki", "sa.pub") }
func (s *Sandbox) tokenFile() string   { return s.path("pki", "tokens.csv") }
func (s *Sandbox) certDir() string     { return s.path("pki", "apiserver") }
func (s *Sandbox) servingCert() string { return filepath.Join(s.certDir(), "apiserver.crt") }

// writeCredentials writes the service-account key pair and the token file.
func (s *Sandbox) writeCredentials() error {
	for _, d := range []string{s.path("pki"), s.certDir(), s.path("kubeconfig")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("creating %s: %w", d, err)
		}
	}
	if err := writeServiceAccountKeys(s.saKeyFile(), s.saPubFile()); err != nil {
		return err
	}
	var csv strings.Builder
	for _, u := range append([]string{adminUser}, s.opts.Users...) {
		tok, err := newToken()
		if err != nil {
			return err
		}
		s.tokens[u] = tok
		// Format of --token-auth-file: token,user,uid[,"group1,group2"].
		if u == adminUser {
			fmt.Fprintf(&csv, "%s,%s,%s-uid,\"system:masters\"\n", tok, u, u)
		} else {
			fmt.Fprintf(&csv, "%s,%s,%s-uid\n", tok, u, u)
		}
	}
	if err := os.WriteFile(s.tokenFile(), []byte(csv.String()), 0o600); err != nil {
		return fmt.Errorf("writing token file: %w", err)
	}
	return nil
}

// afterAPIServer reads the serving certificate the apiserver generated and
// writes a kubeconfig per user.
func (s *Sandbox) afterAPIServer() error {
	ca, err := os.ReadFile(s.servingCert())
	if err != nil {
		return fmt.Errorf("reading the apiserver's serving certificate: %w", err)
	}
	s.caData = ca
	for u := range s.tokens {
		if err := writeKubeconfig(s.kubeconfigPath(u), s.config(u)); err != nil {
			return err
		}
	}
	return nil
}

// startComponent starts c and waits until it is ready. With freshPorts it
// allocates new ports first and retries on new ones if it lost a port race;
// restarts keep the ports so that clients and proxies keep working.
func (s *Sandbox) startComponent(ctx context.Context, c Component, freshPorts bool) error {
	bin, err := binary(s.binDir, string(c))
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	for attempt := 1; ; attempt++ {
		if freshPorts {
			if err := s.allocatePorts(c); err != nil {
				return fmt.Errorf("sandbox: %s: %w", c, err)
			}
		}
		spec, err := s.launchSpec(c)
		if err != nil {
			return fmt.Errorf("sandbox: %s: %w", c, err)
		}
		spec.bin = bin
		begin := time.Now()
		p, err := launch(ctx, s.spawner, spec)
		if err == nil {
			s.mu.Lock()
			s.procs[c] = p
			s.mu.Unlock()
			s.logf("sandbox: %s ready in %s (pid %d)", c, time.Since(begin).Round(time.Millisecond), p.pid())
			return nil
		}
		if !freshPorts || !errors.Is(err, errPortInUse) || attempt == startAttempts {
			return fmt.Errorf("sandbox: %w", err)
		}
		s.logf("sandbox: %s lost a port race, retrying on fresh ports", c)
	}
}

func (s *Sandbox) allocatePorts(c Component) error {
	n := 1
	if c == Etcd {
		n = 2
	}
	ports, err := freePorts(n)
	if err != nil {
		return err
	}
	switch c {
	case Etcd:
		s.etcdPort, s.etcdPeerPort = ports[0], ports[1]
	case APIServer:
		s.apiPort = ports[0]
	case ControllerManager:
		s.cmPort = ports[0]
	case Scheduler:
		s.schedPort = ports[0]
	case Kwok:
		s.kwokPort = ports[0]
	}
	return nil
}

// launchSpec returns the command line and readiness probe of c.
func (s *Sandbox) launchSpec(c Component) (launchSpec, error) {
	spec := launchSpec{name: string(c), logPath: s.LogPath(c)}
	admin := s.kubeconfigPath(adminUser)
	switch c {
	case Etcd:
		client := "http://127.0.0.1:" + strconv.Itoa(s.etcdPort)
		peer := "http://127.0.0.1:" + strconv.Itoa(s.etcdPeerPort)
		spec.args = []string{
			"--name=sandbox",
			"--data-dir=" + s.path("etcd"),
			"--listen-client-urls=" + client,
			"--advertise-client-urls=" + client,
			"--listen-peer-urls=" + peer,
			"--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=sandbox=" + peer,
			// The data is thrown away with the sandbox; an fsync per write
			// only adds latency that a real etcd on SSD would not have.
			"--unsafe-no-fsync=true",
		}
		spec.ready = s.httpProbe(client+"/health", "", `"health":"true"`)
	case APIServer:
		spec.args = []string{
			"--etcd-servers=http://127.0.0.1:" + strconv.Itoa(s.etcdPort),
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(s.apiPort),
			// A loopback advertise address is rejected at start unless the
			// endpoint reconciler, which would publish it in the
			// "kubernetes" Service, is off.
			"--advertise-address=127.0.0.1",
			"--endpoint-reconciler-type=none",
			// Self-signed serving cert, valid for 127.0.0.1; kept across
			// restarts because the files stay.
			"--cert-dir=" + s.certDir(),
			"--service-account-key-file=" + s.saPubFile(),
			"--service-account-signing-key-file=" + s.saKeyFile(),
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--token-auth-file=" + s.tokenFile(),
			"--authorization-mode=RBAC",
			// Only allocated (ClusterIPs), never routed: nothing may send
			// traffic there.
			"--service-cluster-ip-range=10.96.0.0/16",
		}
		if s.opts.AuditLog {
			policy := s.path("audit-policy.yaml")
			if err := os.WriteFile(policy, []byte(auditPolicy(s.opts.AuditEveryRequestOf)), 0o644); err != nil {
				return spec, fmt.Errorf("writing audit policy: %w", err)
			}
			spec.args = append(spec.args, "--audit-policy-file="+policy, "--audit-log-path="+s.AuditLogPath(), "--audit-log-format=json",
				// Blocking: an event is on disk before the response is sent, so a test reads every write it saw answered.
				"--audit-log-mode=blocking", "--audit-log-maxbackup=0")
		}
		spec.args = append(spec.args, s.opts.APIServerFlags...)
		spec.ready = s.httpProbe(s.APIServerURL()+"/readyz", s.tokens[adminUser], "")
	case ControllerManager:
		spec.args = []string{
			"--kubeconfig=" + admin,
			"--authentication-kubeconfig=" + admin,
			"--authorization-kubeconfig=" + admin,
			"--leader-elect=false",
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(s.cmPort),
			"--service-account-private-key-file=" + s.saKeyFile(),
			"--root-ca-file=" + s.servingCert(),
			"--use-service-account-credentials=false",
			"--controllers=*",
		}
		spec.args = append(spec.args, s.opts.ControllerManagerFlags...)
		spec.ready = s.httpProbe("https://127.0.0.1:"+strconv.Itoa(s.cmPort)+"/healthz", "", "")
	case Scheduler:
		spec.args = []string{
			"--kubeconfig=" + admin,
			"--authentication-kubeconfig=" + admin,
			"--authorization-kubeconfig=" + admin,
			"--leader-elect=false",
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(s.schedPort),
		}
		spec.args = append(spec.args, s.opts.SchedulerFlags...)
		spec.ready = s.httpProbe("https://127.0.0.1:"+strconv.Itoa(s.schedPort)+"/healthz", "", "")
	case Kwok:
		cfg, err := stageConfig(s.opts.Stages, s.opts.ExtraStages)
		if err != nil {
			return spec, err
		}
		stages := s.path("kwok-stages.yaml")
		if err := os.WriteFile(stages, []byte(cfg), 0o644); err != nil {
			return spec, fmt.Errorf("writing kwok stages: %w", err)
		}
		home := s.path("kwok-home")
		if err := os.MkdirAll(home, 0o755); err != nil {
			return spec, fmt.Errorf("creating kwok home: %w", err)
		}
		spec.args = []string{
			"--kubeconfig=" + admin,
			"--manage-all-nodes=true",
			"--server-address=127.0.0.1:" + strconv.Itoa(s.kwokPort),
			"--config=" + stages,
			// kwok's default pod CIDR is a /24: 254 pod IPs for all fake
			// nodes together, too few for load tests with thousands of
			// pods. The addresses only appear in objects, never on the wire.
			"--cidr=10.0.0.0/16",
		}
		// kwok also loads ~/.kwok/kwok.yaml if it exists; an own HOME keeps
		// a developer's file out of the sandbox.
		spec.env = []string{"HOME=" + home}
		spec.ready = s.httpProbe("http://127.0.0.1:"+strconv.Itoa(s.kwokPort)+"/healthz", "", "")
	default:
		return spec, fmt.Errorf("unknown component %q", c)
	}
	return spec, nil
}

// httpProbe returns a readiness probe that wants 200 from url and, if
// contains is not empty, that text in the body.
func (s *Sandbox) httpProbe(url, token, contains string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := s.probe.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
		}
		if contains != "" && !strings.Contains(string(body), contains) {
			return fmt.Errorf("GET %s: body %q lacks %q", url, body, contains)
		}
		return nil
	}
}

// Stop stops every process the sandbox started (SIGTERM to its process
// group, SIGKILL after 10 s), closes its proxies and removes Dir if Start
// created it. Later calls return the first call's result.
func (s *Sandbox) Stop() error {
	s.lifecycle.Lock()
	defer s.lifecycle.Unlock()
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return s.stopErr
	}
	s.stopped = true
	proxies := s.proxies
	procs := s.procs
	s.mu.Unlock()

	var errs []error
	for _, p := range proxies {
		p.close()
	}
	// Reverse dependency order: clients first, so they do not log a storm of
	// connection errors, then the apiserver, then its storage.
	stop := func(cs ...Component) {
		var wg sync.WaitGroup
		errc := make([]error, len(cs))
		for i, c := range cs {
			if p := procs[c]; p != nil {
				wg.Go(func() { errc[i] = p.stop(stopGrace) })
			}
		}
		wg.Wait()
		errs = append(errs, errc...)
	}
	stop(Kwok, Scheduler, ControllerManager)
	stop(APIServer)
	stop(Etcd)
	if s.spawner != nil {
		s.spawner.close()
	}
	if s.ownDir {
		if err := os.RemoveAll(s.dir); err != nil {
			errs = append(errs, fmt.Errorf("removing %s: %w", s.dir, err))
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := errors.Join(errs...); err != nil {
		s.stopErr = fmt.Errorf("sandbox: stop: %w", err)
	}
	return s.stopErr
}

// RestartAPIServer stops kube-apiserver (SIGTERM, SIGKILL after 3 s: it
// would otherwise hold open watches for up to a minute) and starts it again
// with the same flags and port, and waits until it is ready. Clients keep
// their configs.
func (s *Sandbox) RestartAPIServer(ctx context.Context) error {
	return s.restart(ctx, APIServer)
}

// RestartEtcd stops etcd (SIGTERM, SIGKILL after 3 s) and starts it again
// on the same data and ports. The apiserver reconnects by itself; this waits
// only for etcd.
func (s *Sandbox) RestartEtcd(ctx context.Context) error {
	return s.restart(ctx, Etcd)
}

func (s *Sandbox) restart(ctx context.Context, c Component) error {
	s.lifecycle.Lock()
	defer s.lifecycle.Unlock()
	s.mu.Lock()
	p, stopped := s.procs[c], s.stopped
	s.mu.Unlock()
	if stopped {
		return fmt.Errorf("sandbox: restart %s: sandbox is stopped", c)
	}
	if p == nil {
		return fmt.Errorf("sandbox: restart %s: not running in this sandbox", c)
	}
	begin := time.Now()
	if err := p.stop(restartGrace); err != nil {
		return fmt.Errorf("sandbox: restart %s: %w", c, err)
	}
	s.logf("sandbox: %s stopped in %s", c, time.Since(begin).Round(time.Millisecond))
	return s.startComponent(ctx, c, false)
}

// Dir is the sandbox's scratch directory.
func (s *Sandbox) Dir() string { return s.dir }

// LogPath is the file that receives c's stdout and stderr (appended across
// restarts). It is removed with Dir.
func (s *Sandbox) LogPath(c Component) string { return s.path(string(c) + ".log") }

// auditPolicy logs writes at Metadata level (who, what, the response code;
// no bodies) and, before that, every request of the groups in every (reads
// too); nothing else: reads (list, watch, get) are most requests. The first
// matching rule decides.
func auditPolicy(every []string) string {
	var b strings.Builder
	b.WriteString("apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n")
	if len(every) > 0 {
		b.WriteString("- level: Metadata\n  userGroups: [" + strings.Join(quoted(every), ", ") + "]\n")
	}
	b.WriteString("- level: Metadata\n  verbs: [create, update, patch, delete, deletecollection]\n- level: None\n")
	return b.String()
}

func quoted(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

// AuditLogPath is the API server's audit log (Options.AuditLog).
func (s *Sandbox) AuditLogPath() string { return s.path("audit.log") }

// ControllerManagerAddr is kube-controller-manager's secure serving address
// (host:port, HTTPS with a self-signed certificate). Its /metrics accepts the
// admin token (AdminConfig().BearerToken), authorised through the API server.
func (s *Sandbox) ControllerManagerAddr() string { return "127.0.0.1:" + strconv.Itoa(s.cmPort) }

// APIServerURL is the apiserver's address, https://127.0.0.1:PORT.
func (s *Sandbox) APIServerURL() string { return "https://127.0.0.1:" + strconv.Itoa(s.apiPort) }

// EtcdURL is etcd's client URL, http://127.0.0.1:PORT.
func (s *Sandbox) EtcdURL() string { return "http://127.0.0.1:" + strconv.Itoa(s.etcdPort) }

// AdminConfig returns a new config for the system:masters token user,
// talking to the apiserver directly and verifying its self-signed
// certificate. It is nil if the sandbox runs no apiserver.
func (s *Sandbox) AdminConfig() *rest.Config {
	if !s.enabled[APIServer] {
		return nil
	}
	return s.config(adminUser)
}

// UserConfig returns a new config for one of Options.Users. It panics for
// any other name: that is a bug in the test, not a runtime condition.
func (s *Sandbox) UserConfig(name string) *rest.Config {
	if name == adminUser || s.tokens[name] == "" {
		panic(fmt.Sprintf("sandbox: unknown user %q; declare it in Options.Users", name))
	}
	return s.config(name)
}

func (s *Sandbox) config(user string) *rest.Config {
	return &rest.Config{
		Host:        s.APIServerURL(),
		BearerToken: s.tokens[user],
		TLSClientConfig: rest.TLSClientConfig{
			CAData: append([]byte(nil), s.caData...),
		},
		// client-go's default of 5 QPS (burst 10) makes a test that creates a
		// few hundred objects spend a minute in the client's rate limiter.
		QPS:   100,
		Burst: 200,
	}
}

// Kubeconfig returns the path of a kubeconfig file in Dir for user (one of
// Options.Users), or for the admin if user is "". It panics for an unknown
// user, like UserConfig.
func (s *Sandbox) Kubeconfig(user string) string {
	if user == "" {
		user = adminUser
	} else if user == adminUser || s.tokens[user] == "" {
		panic(fmt.Sprintf("sandbox: unknown user %q; declare it in Options.Users", user))
	}
	return s.kubeconfigPath(user)
}

func (s *Sandbox) kubeconfigPath(user string) string {
	return s.path("kubeconfig", url.PathEscape(user)+".kubeconfig")
}

// WriteKubeconfig writes a kubeconfig file for cfg, which must use a bearer
// token (as every config from this package does).
func (s *Sandbox) WriteKubeconfig(path string, cfg *rest.Config) error {
	if err := writeKubeconfig(path, cfg); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	return nil
}
