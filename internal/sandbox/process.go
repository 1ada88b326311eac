package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	// stopGrace is how long a component gets between SIGTERM and SIGKILL.
	// kube-apiserver drains in about 1-2 s here; 10 s leaves room on a loaded
	// 2-core machine without letting a stuck process hold up a test run.
	stopGrace = 10 * time.Second
	// restartGrace is the shorter grace of RestartAPIServer and RestartEtcd.
	// Both stop listening at once on SIGTERM but then wait for open streams:
	// kube-apiserver for every watch it serves straight from etcd (up to its
	// 60 s shutdown timeout; 10 s until SIGKILL was seen here with
	// --watch-cache=false and one informer), etcd for the apiserver's gRPC
	// watch streams (7 s seen). Clients have noticed the restart within
	// 3 s; waiting longer only makes every restart test slower.
	restartGrace = 3 * time.Second
	// readyTimeout bounds the wait for one component to become ready when the
	// caller's context has no earlier deadline. The apiserver is ready in
	// about 2 s on an idle 2-core machine; a parallel Go build can make that
	// 20 s or more.
	readyTimeout = 2 * time.Minute
	// logTailLines is how much of a component's log an error carries.
	logTailLines = 30
	// startAttempts is how often a component is started on fresh ports after
	// losing a port race (FreePort closes its listener before the component
	// binds, so another process may take the port in between).
	startAttempts = 3
)

// errPortInUse marks a start attempt that failed because a port chosen by
// FreePort was taken before the component could bind it.
var errPortInUse = errors.New("port already in use")

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago. The
// kernel picks it from the ephemeral range, so concurrent sandboxes rarely
// collide; components started by this package retry on fresh ports if they do.
func FreePort() (int, error) {
	l, err := listenLoopback()
	if err != nil {
		return 0, fmt.Errorf("finding a free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// listenLoopback listens on a kernel-chosen port of 127.0.0.1. Listening
// is instant on loopback, so there is no context to honour.
func listenLoopback() (net.Listener, error) {
	var lc net.ListenConfig
	return lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
}

// freePorts returns n distinct free ports.
func freePorts(n int) ([]int, error) {
	// Hold all listeners open until every port is chosen, so the kernel
	// cannot hand the same port out twice.
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := listenLoopback()
		if err != nil {
			return nil, fmt.Errorf("finding a free loopback port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// spawner starts child processes from one goroutine locked to its OS thread.
//
// Every child gets Pdeathsig=SIGKILL so that it dies with the test binary,
// even when that binary is killed with SIGKILL and no cleanup runs. Linux
// delivers the parent-death signal when the *thread* that forked the child
// exits, not the process (prctl(2); golang/go#27505): a child forked from an
// arbitrary goroutine dies as soon as the Go runtime retires that thread,
// which happens whenever a goroutine exits while locked to it. Forking only
// from this goroutine, which holds its thread until close, makes the signal
// mean "the sandbox owner is gone" and nothing else. close is called after
// every child has been stopped; the thread then exits, which would also kill
// any child that survived Stop.
type spawner struct {
	reqs chan spawnRequest
	quit chan struct{}
	once sync.Once
}

type spawnRequest struct {
	cmd  *exec.Cmd
	errc chan error
}

func newSpawner() *spawner {
	sp := &spawner{reqs: make(chan spawnRequest), quit: make(chan struct{})}
	go func() {
		// Never unlocked: when this goroutine returns, the runtime terminates
		// the thread instead of reusing it.
		runtime.LockOSThread()
		for {
			select {
			case r := <-sp.reqs:
				r.errc <- r.cmd.Start()
			case <-sp.quit:
				return
			}
		}
	}()
	return sp
}

// start starts cmd from the spawner's thread.
func (sp *spawner) start(cmd *exec.Cmd) error {
	r := spawnRequest{cmd: cmd, errc: make(chan error, 1)}
	select {
	case sp.reqs <- r:
		return <-r.errc
	case <-sp.quit:
		return errors.New("sandbox is stopped")
	}
}

func (sp *spawner) close() { sp.once.Do(func() { close(sp.quit) }) }

var (
	lifetimeOnce    sync.Once
	lifetimeSpawner *spawner
)

// StartCmd starts cmd (which may set Pdeathsig) from a thread that lives as
// long as this process. A child with Pdeathsig that is started from an
// arbitrary goroutine is killed as soon as the thread that forked it exits,
// and that thread exits when a spawner of a sandbox, Prometheus or
// Alertmanager that happened to lock it is closed (golang/go#27505): the
// e2e tests' exporters died that way mid-run while other tests stopped
// their Prometheus servers.
func StartCmd(cmd *exec.Cmd) error {
	lifetimeOnce.Do(func() { lifetimeSpawner = newSpawner() })
	return lifetimeSpawner.start(cmd)
}

// process is one running child and its log file.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed when the child has exited and been reaped
	waitErr error         // valid after done is closed
}

// startProcess starts bin in its own process group with stdout and stderr
// appended to logPath.
func startProcess(sp *spawner, name, bin string, args, env []string, logPath string) (*process, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening log of %s: %w", name, err)
	}
	// The child gets its own copy of the descriptor; ours is not needed once
	// it has started.
	defer f.Close()
	fmt.Fprintf(f, "=== sandbox: %s starting %s %s\n", time.Now().Format(time.RFC3339Nano), bin, strings.Join(args, " "))

	// Not CommandContext: the child outlives the call that starts it and is
	// ended by pid in stop.
	cmd := exec.Command(bin, args...) //nolint:noctx // lifetime is managed by stop, not by a context
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout = f
	cmd.Stderr = f
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Own process group: Stop signals the group, which also reaches any
		// helper the component forks.
		Setpgid:   true,
		Pdeathsig: syscall.SIGKILL,
	}
	if err := sp.start(cmd); err != nil {
		return nil, fmt.Errorf("starting %s (%s): %w", name, bin, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process group, then SIGKILL after grace, and
// waits until the child is reaped. It is safe to call more than once.
func (p *process) stop(grace time.Duration) error {
	if p.exited() {
		return nil
	}
	// Signalling -pid reaches the whole group (Setpgid made pgid == pid).
	// ESRCH means it exited in between.
	if err := syscall.Kill(-p.pid(), syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("SIGTERM to %s (pid %d): %w", p.name, p.pid(), err)
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
	}
	if err := syscall.Kill(-p.pid(), syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("SIGKILL to %s (pid %d): %w", p.name, p.pid(), err)
	}
	<-p.done
	return nil
}

// logTail returns the last n lines of a log file, or a note why it cannot.
func logTail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer f.Close()
	// 64 KiB holds far more than 30 lines of any component's log, even
	// kube-apiserver's long flag dumps.
	const window = 64 << 10
	if st, err := f.Stat(); err == nil && st.Size() > window {
		if _, err := f.Seek(-window, io.SeekEnd); err != nil {
			return fmt.Sprintf("(reading log: %v)", err)
		}
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(reading log: %v)", err)
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// launchSpec is one start attempt of a component.
type launchSpec struct {
	name    string
	bin     string
	args    []string
	env     []string
	logPath string
	// ready reports nil once the component serves; it is polled.
	ready func(ctx context.Context) error
}

// launch starts the component and waits until it is ready, it exits, or the
// deadline passes. On failure the process is stopped and the error carries
// the tail of its log; it wraps errPortInUse when the log says a port was
// taken, so the caller can retry on fresh ports.
func launch(ctx context.Context, sp *spawner, spec launchSpec) (*process, error) {
	// The log is appended to across restarts and retries: remember where
	// this attempt's output begins.
	var offset int64
	if st, err := os.Stat(spec.logPath); err == nil {
		offset = st.Size()
	}
	p, err := startProcess(sp, spec.name, spec.bin, spec.args, spec.env, spec.logPath)
	if err != nil {
		return nil, err
	}
	if err := waitReady(ctx, p, spec.ready); err != nil {
		_ = p.stop(stopGrace)
		err = fmt.Errorf("%s: %w\n--- last %d lines of %s:\n%s", spec.name, err, logTailLines, spec.logPath, logTail(spec.logPath, logTailLines))
		if bytes.Contains(logSince(spec.logPath, offset), []byte("address already in use")) {
			err = fmt.Errorf("%w: %w", errPortInUse, err)
		}
		return nil, err
	}
	return p, nil
}

// logSince returns what a log file holds after offset (at most 1 MiB).
func logSince(path string, offset int64) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(f, 1<<20))
	return b
}

// waitReady polls ready every 100 ms. 100 ms is well below the 2 s an
// apiserver needs and costs nothing measurable on loopback.
func waitReady(ctx context.Context, p *process, ready func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	var last error
	for {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		last = ready(pctx)
		pcancel()
		if last == nil {
			return nil
		}
		select {
		case <-p.done:
			if p.waitErr == nil {
				return fmt.Errorf("exited with status 0 before it was ready; last probe: %w", last)
			}
			return fmt.Errorf("exited before it was ready (%w); last probe: %w", p.waitErr, last)
		case <-ctx.Done():
			return fmt.Errorf("not ready after %s: %w", time.Since(start).Round(time.Millisecond), last)
		case <-tick.C:
		}
	}
}
