package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// Proxy is a loopback TCP proxy in front of the apiserver, for tests that
// break the network between a client and the apiserver: Cut drops every
// connection (a client sees resets and reconnects into refusals), Pause
// stalls them (a client sees a hung peer). TLS passes through untouched, so
// clients still verify the apiserver's certificate, which is valid for
// 127.0.0.1 whatever the port.
type Proxy struct {
	ln     net.Listener
	target string
	dir    string
	users  []string

	mu     sync.Mutex
	cut    bool
	paused bool
	resume chan struct{} // closed by Restore to release paused copies
	conns  map[*proxyConn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// proxyConn is one client connection and its upstream.
type proxyConn struct {
	client, upstream net.Conn
	once             sync.Once
	done             chan struct{} // closed when the pair is closed
}

func (c *proxyConn) close() {
	c.once.Do(func() {
		close(c.done)
		// Linger 0 sends RST instead of FIN, so a client sees "connection
		// reset", as it would if the network path had gone.
		if tc, ok := c.client.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		c.client.Close()
		if c.upstream != nil {
			c.upstream.Close()
		}
	})
}

// NewProxy starts a proxy to the apiserver on a free loopback port. It
// writes a kubeconfig per user (see Proxy.Kubeconfig) and is closed by Stop.
func (s *Sandbox) NewProxy() (*Proxy, error) {
	if !s.enabled[APIServer] {
		return nil, errors.New("sandbox: new proxy: kube-apiserver is not running in this sandbox")
	}
	s.mu.Lock()
	stopped, n := s.stopped, len(s.proxies)
	s.mu.Unlock()
	if stopped {
		return nil, errors.New("sandbox: new proxy: sandbox is stopped")
	}
	ln, err := listenLoopback()
	if err != nil {
		return nil, fmt.Errorf("sandbox: new proxy: %w", err)
	}
	p := &Proxy{
		ln:     ln,
		target: "127.0.0.1:" + strconv.Itoa(s.apiPort),
		dir:    s.path("proxy-" + strconv.Itoa(n)),
		resume: make(chan struct{}),
		conns:  map[*proxyConn]struct{}{},
	}
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		ln.Close()
		return nil, fmt.Errorf("sandbox: new proxy: %w", err)
	}
	for u := range s.tokens {
		path := filepath.Join(p.dir, url.PathEscape(u)+".kubeconfig")
		if err := writeKubeconfig(path, p.Config(s.config(u))); err != nil {
			ln.Close()
			return nil, fmt.Errorf("sandbox: new proxy: %w", err)
		}
		p.users = append(p.users, u)
	}
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		ln.Close()
		return nil, errors.New("sandbox: new proxy: sandbox is stopped")
	}
	s.proxies = append(s.proxies, p)
	s.mu.Unlock()
	p.wg.Go(p.accept)
	return p, nil
}

// Addr is the proxy's listening address, 127.0.0.1:PORT.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Config returns a copy of base that talks to the apiserver through the
// proxy. TLS settings stay as they are: the serving certificate is valid for
// 127.0.0.1 on any port.
func (p *Proxy) Config(base *rest.Config) *rest.Config {
	c := rest.CopyConfig(base)
	c.Host = "https://" + p.Addr()
	return c
}

// Kubeconfig returns the path of a kubeconfig that reaches the apiserver
// through the proxy, for user (one of Options.Users) or the admin if user
// is "". It panics for an unknown user.
func (p *Proxy) Kubeconfig(user string) string {
	switch user {
	case "":
		user = adminUser
	case adminUser:
		panic(fmt.Sprintf("sandbox: unknown user %q; declare it in Options.Users", user))
	}
	for _, u := range p.users {
		if u == user {
			return filepath.Join(p.dir, url.PathEscape(u)+".kubeconfig")
		}
	}
	panic(fmt.Sprintf("sandbox: unknown user %q; declare it in Options.Users", user))
}

// Cut closes every current connection and refuses new ones (accepts and
// resets them at once) until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	conns := p.takeConns()
	p.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
}

// Pause keeps connections open but stops forwarding bytes in both
// directions until Restore. New connections are accepted and stall too.
func (p *Proxy) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused = true
}

// Restore ends a Cut or a Pause; paused connections resume where they
// stopped.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
	if p.paused {
		p.paused = false
		close(p.resume)
		p.resume = make(chan struct{})
	}
}

// takeConns empties the connection set; p.mu must be held.
func (p *Proxy) takeConns() []*proxyConn {
	conns := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	clear(p.conns)
	return conns
}

// close stops the listener and every connection and waits for the copy
// goroutines. Called by Sandbox.Stop.
func (p *Proxy) close() {
	p.mu.Lock()
	p.closed = true
	conns := p.takeConns()
	p.mu.Unlock()
	p.ln.Close()
	for _, c := range conns {
		c.close()
	}
	p.Restore() // release paused copies so they see their closed conns
	p.wg.Wait()
}

func (p *Proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // listener closed
		}
		c := &proxyConn{client: client, done: make(chan struct{})}
		p.mu.Lock()
		if p.cut || p.closed {
			p.mu.Unlock()
			c.close()
			continue
		}
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() { p.serve(c) })
	}
}

func (p *Proxy) serve(c *proxyConn) {
	defer func() {
		c.close()
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
	}()
	// A loopback connect succeeds or is refused at once; 5 s only bounds a
	// pathological hang.
	d := net.Dialer{Timeout: 5 * time.Second}
	up, err := d.DialContext(context.Background(), "tcp", p.target)
	if err != nil {
		return // the apiserver is down (a restart): the client sees a reset
	}
	p.mu.Lock()
	if _, live := p.conns[c]; !live {
		// Cut or closed while dialling.
		p.mu.Unlock()
		up.Close()
		return
	}
	c.upstream = up
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() { p.copy(c, up, c.client) })
	wg.Go(func() { p.copy(c, c.client, up) })
	wg.Wait()
}

// copy forwards src to dst until either side fails, holding every chunk
// while the proxy is paused. Either direction ending ends the pair: the
// apiserver speaks HTTP/2 and TLS, where a half-closed connection is of no
// use.
func (p *Proxy) copy(c *proxyConn, dst, src net.Conn) {
	defer c.close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.waitRunning(c) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or a closed connection alike end the pair
		}
	}
}

// waitRunning blocks while the proxy is paused; false means the connection
// was closed meanwhile.
func (p *Proxy) waitRunning(c *proxyConn) bool {
	for {
		p.mu.Lock()
		paused, resume := p.paused, p.resume
		p.mu.Unlock()
		if !paused {
			select {
			case <-c.done:
				return false
			default:
				return true
			}
		}
		select {
		case <-resume:
		case <-c.done:
			return false
		}
	}
}
