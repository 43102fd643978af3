package redis_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goredis.SetLogger(quiet{}) // the tests stop Redis on purpose
	goleak.VerifyTestMain(m)
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// server is a redis-server started by a test on a free loopback port, with
// its working directory in the test's temporary directory and persistence
// off. It can be stopped and started again on the same port.
type server struct {
	t      testing.TB
	bin    string
	dir    string
	port   int
	cmd    *exec.Cmd
	waited chan error
	extra  []string // more arguments of redis-server
}

// startServer starts a redis-server for t. When the binary is not
// installed it skips t, and fails it on CI (CI=true), where every test
// must run.
func startServer(t testing.TB, extra ...string) *server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		const msg = "redis-server not found on PATH; install it (scripts/setup.sh, or apt-get install -y redis-server) to run the Redis tests"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + " (CI=true: a Redis test may not be skipped)")
		}
		t.Skip(msg)
	}
	s := &server{t: t, bin: bin, dir: t.TempDir(), extra: extra}
	for range 5 {
		s.port = freePort(t)
		if err = s.tryStart(); err == nil {
			t.Cleanup(s.stop)
			return s
		}
	}
	t.Fatalf("redis-server: %v", err)
	return nil
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Addr is the server's loopback address.
func (s *server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

func (s *server) tryStart() error {
	cmd := exec.Command(s.bin, append([]string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--logfile", filepath.Join(s.dir, "redis.log"),
		"--daemonize", "no",
		"--enable-debug-command", "local",
	}, s.extra...)...)
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			return fmt.Errorf("exited (%v): %s", err, log)
		default:
		}
		if c, err := net.DialTimeout("tcp", s.Addr(), 50*time.Millisecond); err == nil {
			ok := ping(c)
			c.Close()
			if ok {
				s.cmd = cmd
				s.waited = done
				return nil
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	cmd.Process.Kill()
	<-done
	return fmt.Errorf("not answering on %s", s.Addr())
}

func ping(c net.Conn) bool {
	c.SetDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	buf := make([]byte, 7)
	n, _ := c.Read(buf)
	return string(buf[:n]) == "+PONG\r\n"
}

// Start starts the server again on its port after Stop.
func (s *server) Start() {
	s.t.Helper()
	if err := s.tryStart(); err != nil {
		s.t.Fatalf("redis-server restart: %v", err)
	}
}

// Stop kills the server, as a crash would.
func (s *server) Stop() { s.stop() }

func (s *server) stop() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	<-s.waited
	s.cmd = nil
}

// Client returns a new client of the server, closed when the test ends:
// no retries, commands cut at their context's deadline, and dial, read and
// write timeouts of 1 s. go-redis cuts a read at the earlier of the
// context's deadline and ReadTimeout, so a short ReadTimeout would cut
// every component's round trip below its Options.Timeout; the timeouts are
// long enough for a loaded machine's stall not to pass for a Redis
// failure. A stopped server refuses connections at once, and a slow or cut
// off Redis is the proxy's (startProxy) or the latency hook's, so no test
// needs them shorter.
func (s *server) Client() *goredis.Client { return s.ClientWith(nil) }

// ClientWith is Client with options changed by set.
func (s *server) ClientWith(set func(*goredis.Options)) *goredis.Client {
	o := &goredis.Options{
		Addr:                  s.Addr(),
		DialTimeout:           time.Second,
		ReadTimeout:           time.Second,
		WriteTimeout:          time.Second,
		MaxRetries:            -1,
		DialerRetries:         1,
		ContextTimeoutEnabled: true,
	}
	if set != nil {
		set(o)
	}
	c := goredis.NewClient(o)
	s.t.Cleanup(func() { c.Close() })
	return c
}

func TestHarness(t *testing.T) {
	s := startServer(t)
	c := s.Client()
	ctx := context.Background()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s.Stop()
	if err := c.Get(ctx, "k").Err(); err == nil {
		t.Fatal("GET answered with the server stopped")
	}
	s.Start()
	// No persistence: the restarted server is empty.
	if err := c.Get(ctx, "k").Err(); err != goredis.Nil {
		t.Fatalf("GET after restart: %v, want redis.Nil", err)
	}
}

// TestMissingServer: without redis-server a Redis test is skipped, with
// its reason, and on CI (CI=true) it fails instead. It runs TestHarness in
// a child process whose PATH has no redis-server.
func TestMissingServer(t *testing.T) {
	tests := []struct {
		name   string
		ci     string
		failed bool
		want   string
	}{
		{name: "local run: skipped", want: "--- SKIP: TestHarness"},
		{name: "CI: failed", ci: "true", failed: true, want: "--- FAIL: TestHarness"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run", "^TestHarness$", "-test.v", "-test.count", "1")
			cmd.Env = append(os.Environ(), "PATH="+t.TempDir(), "CI="+tt.ci)
			out, err := cmd.CombinedOutput()
			if failed := err != nil; failed != tt.failed {
				t.Errorf("failed %v (%v), want %v:\n%s", failed, err, tt.failed, out)
			}
			for _, w := range []string{tt.want, "redis-server not found on PATH"} {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// latency is a client hook that holds every command, and every pipeline,
// for its duration before sending it, or until the command's context ends:
// a Redis that answers, slowly.
type latency time.Duration

func (latency) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (l latency) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		if err := l.wait(ctx); err != nil {
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

func (l latency) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		if err := l.wait(ctx); err != nil {
			return err
		}
		return next(ctx, cmds)
	}
}

func (l latency) wait(ctx context.Context) error {
	t := time.NewTimer(time.Duration(l))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// startCluster starts a Redis Cluster of three masters on loopback ports,
// each a redis-server started as startServer does, joined by redis-cli
// --cluster create, and returns a cluster client of it, closed when the
// test ends.
func startCluster(t testing.TB) *goredis.ClusterClient {
	t.Helper()
	cc, _ := startClusterServers(t)
	return cc
}

// startClusterServers is startCluster, and returns the masters too. Each
// keeps its cluster configuration (nodes.conf) in its directory, so that a
// master stopped and started again rejoins with its slots, empty.
func startClusterServers(t testing.TB) (*goredis.ClusterClient, []*server) {
	t.Helper()
	var addrs []string
	var masters []*server
	for range 3 {
		s := startServer(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000")
		addrs = append(addrs, s.Addr())
		masters = append(masters, s)
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatal("redis-cli not found on PATH; it comes with redis-server")
	}
	out, err := exec.Command(cli, append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", "0", "--cluster-yes")...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	clusterReady(t, addrs)
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{
		Addrs:                 addrs,
		DialTimeout:           200 * time.Millisecond,
		ReadTimeout:           200 * time.Millisecond,
		WriteTimeout:          200 * time.Millisecond,
		ContextTimeoutEnabled: true,
	})
	t.Cleanup(func() { cc.Close() })
	if err := cc.ForEachMaster(context.Background(), func(ctx context.Context, c *goredis.Client) error { return c.Ping(ctx).Err() }); err != nil {
		t.Fatal(err)
	}
	return cc, masters
}

// clusterReady waits until every node at addrs reports cluster_state:ok.
func clusterReady(t testing.TB, addrs []string) {
	t.Helper()
	ctx := context.Background()
	for _, a := range addrs {
		c := goredis.NewClient(&goredis.Options{Addr: a})
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			info, _ := c.ClusterInfo(ctx).Result()
			if strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				c.Close()
				t.Fatalf("cluster at %s not ready: %s", a, info)
			}
		}
		c.Close()
	}
}
