// gomemcache (github.com/bradfitz/gomemcache) over the text protocol, run against
// memcached (the oracle) and memcrab: every Client method, flags, large values,
// expiry and error paths. Each test runs once per server; each server is a real
// process started on a free loopback port and killed when the test ends.
//
// Binaries: MEMCACHED_BIN (default: memcached on PATH) and MEMCRAB_BIN (default:
// ../../target/release/memcrab). MEMCRAB_BIN=/usr/bin/memcached checks the suite
// against memcached itself.
package memcachetest

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
)

func binaries(t *testing.T) map[string]string {
	mc := os.Getenv("MEMCACHED_BIN")
	if mc == "" {
		p, err := exec.LookPath("memcached")
		if err != nil {
			t.Fatalf("memcached (the oracle) not found: set MEMCACHED_BIN")
		}
		mc = p
	}
	mr := os.Getenv("MEMCRAB_BIN")
	if mr == "" {
		mr = "../../target/release/memcrab"
	}
	return map[string]string{"memcached": mc, "memcrab": mr}
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// start runs bin on a free port, with extra flags if given, and returns its
// address; the process is killed on test cleanup.
func start(t *testing.T, bin string, extra ...string) string {
	port := freePort(t)
	args := []string{"-U", "0", "-l", "127.0.0.1", "-p", fmt.Sprint(port)}
	args = append(args, extra...)
	if os.Geteuid() == 0 {
		args = append(args, "-u", "root")
	}
	cmd := exec.Command(bin, args...)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not accept on %s: %s", bin, addr, log.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// each runs f as a subtest against a fresh server of every kind.
func each(t *testing.T, f func(t *testing.T, c *memcache.Client)) {
	for _, kind := range []string{"memcached", "memcrab"} {
		bin := binaries(t)[kind]
		t.Run(kind, func(t *testing.T) {
			c := memcache.New(start(t, bin))
			c.Timeout = 5 * time.Second
			t.Cleanup(func() { _ = c.Close() })
			f(t, c)
		})
	}
}

func mustGet(t *testing.T, c *memcache.Client, key string) *memcache.Item {
	t.Helper()
	it, err := c.Get(key)
	if err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	return it
}

func wantErr(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("got error %v, want %v", err, want)
	}
}

func TestSetGetFlags(t *testing.T) {
	each(t, func(t *testing.T, c *memcache.Client) {
		_, err := c.Get("missing")
		wantErr(t, err, memcache.ErrCacheMiss)
		if err := c.Set(&memcache.Item{Key: "k", Value: []byte("v"), Flags: 0xdeadbeef}); err != nil {
			t.Fatal(err)
		}
		it := mustGet(t, c, "k")
		if string(it.Value) != "v" || it.Flags != 0xdeadbeef || it.CasID == 0 {
			t.Fatalf("got %+v", it)
		}
		if err := c.Set(&memcache.Item{Key: "empty", Value: []byte{}}); err != nil {
			t.Fatal(err)
		}
		if it := mustGet(t, c, "empty"); len(it.Value) != 0 {
			t.Fatalf("got %q", it.Value)
		}
	})
}

func TestAddReplace(t *testing.T) {
	each(t, func(t *testing.T, c *memcache.Client) {
		wantErr(t, c.Replace(&memcache.Item{Key: "k", Value: []byte("1")}), memcache.ErrNotStored)
		if err := c.Add(&memcache.Item{Key: "k", Value: []byte("1")}); err != nil {
			t.Fatal(err)
		}
		wantErr(t, c.Add(&memcache.Item{Key: "k", Value: []byte("2")}), memcache.ErrNotStored)
		if err := c.Replace(&memcache.Item{Key: "k", Value: []byte("3")}); err != nil {
			t.Fatal(err)
		}
		if v := string(mustGet(t, c, "k").Value); v != "3" {
			t.Fatalf("got %q", v)
		}
	})
}

func TestAppendPrepend(t *testing.T) {
	each(t, func(t *testing.T, c *memcache.Client) {
		wantErr(t, c.Append(&memcache.Item{Key: "k", Value: []byte("x")}), memcache.ErrNotStored)
		wantErr(t, c.Prepend(&memcache.Item{Key: "k", Value: []byte("x")}), memcache.ErrNotStored)
		_ = c.Set(&memcache.Item{Key: "k", Value: []byte("mid"), Flags: 7})
		if err := c.Append(&memcache.Item{Key: "k", Value: []byte(">"), Flags: 99}); err != nil {
			t.Fatal(err)
		}
		if err := c.Prepend(&memcache.Item{Key: "k", Value: []byte("<")}); err != nil {
			t.Fatal(err)
		}
		it := mustGet(t, c, "k")
		if string(it.Value) != "<mid>" || it.Flags != 7 { // append keeps the old flags
			t.Fatalf("got %q flags %d", it.Value, it.Flags)
		}
	})
}

func TestCompareAndSwap(t *testing.T) {
	each(t, func(t *testing.T, c *memcache.Client) {
		_ = c.Set(&memcache.Item{Key: "k", Value: []byte("a")})
		it := mustGet(t, c, "k")
		stale := *it
		it.Value = []byte("b")
		if err := c.CompareAndSwap(it); err != nil {
			t.Fatal(err)
		}
		stale.Value = []byte("c")
		wantErr(t, c.CompareAndSwap(&stale), memcache.ErrCASConflict)
		_ = c.Delete("k")
		wantErr(t, c.CompareAndSwap(&stale), memcache.ErrCacheMiss)
	})
}

func TestGetMulti(t *testing.T) {
	each(t, func(t *testing.T, c *memcache.Client) {
		for i := 0; i < 100; i++ {
			_ = c.Set(&memcache.Item{Key: fmt.Sprint("m", i), Value: []byte(fmt.Sprint(i)), Flags: uint32(i)})
		}
		keys := []string{"absent"}
		for i := 0; i < 100; i++ {
			keys = append(keys, fmt.Sprint("m", i))
		}
		got, err := c.GetMulti(keys)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 100 {
			t.Fatalf("got %d items", len(got))
		}
		for i := 0; i < 100; i++ {
			it := got[fmt.Sprint("m", i)]
			if it == nil || string(it.Value) != fmt.Sprint(i) || it.Flags != uint32(i) {
				t.Fatalf("item %d: %+v", i, it)
			}
		}
	})
}

func TestDelete(t *testing.T) {
	each(t, func(t *testing.T, c *memcache.Client) {
		wantErr(t, c.Delete("k"), memcache.ErrCacheMiss)
		_ = c.Set(&memcache.Item{Key: "k", Value: []byte("v")})
		if err := c.Delete("k"); err != nil {
			t.Fatal(err)
		}
		_, err := c.Get("k")
		wantErr(t, err, memcache.ErrCacheMiss)
	})
}

func TestIncrDecr(t *testing.T) {
	each(t, func(t *testing.T, c *memcache.Client) {
		_, err := c.Increment("n", 1)
		wantErr(t, err, memcache.ErrCacheMiss)
		_, err = c.Decrement("n", 1)
		wantErr(t, err, memcache.ErrCacheMiss)
		_ = c.Set(&memcache.Item{Key: "n", Value: []byte("10")})
		if v, err := c.Increment("n", 5); err != nil || v != 15 {
			t.Fatalf("incr: %d %v", v, err)
		}
		if v, err := c.Decrement("n", 100); err != nil || v != 0 {
			t.Fatalf("decr floors at 0: %d %v", v, err)
		}
		_ = c.Set(&memcache.Item{Key: "n", Value: []byte("18446744073709551615")})
		if v, err := c.Increment("n", 2); err != nil || v != 1 {
			t.Fatalf("incr wraps: %d %v", v, err)
		}
		_ = c.Set(&memcache.Item{Key: "s", Value: []byte("abc")})
		_, err = c.Increment("s", 1)
		if err == nil || !strings.Contains(err.Error(), "cannot increment or decrement non-numeric value") {
			t.Fatalf("non-numeric: %v", err)
		}
	})
}

func TestTouchGetAndTouchExpiry(t *testing.T) {
	each(t, func(t *testing.T, c *memcache.Client) {
		wantErr(t, c.Touch("k", 10), memcache.ErrCacheMiss)
		_, err := c.GetAndTouch("k", 10)
		wantErr(t, err, memcache.ErrCacheMiss)
		// A TTL of 2: the servers' clocks count whole seconds, so an item set with
		// a TTL of 1 can expire before the next request, and one of 2 lives 1-2 s.
		_ = c.Set(&memcache.Item{Key: "k", Value: []byte("v"), Expiration: 2})
		_ = c.Set(&memcache.Item{Key: "g", Value: []byte("v"), Expiration: 2})
		_ = c.Set(&memcache.Item{Key: "gone", Value: []byte("v"), Expiration: 2})
		if err := c.Touch("k", 100); err != nil {
			t.Fatal(err)
		}
		if it, err := c.GetAndTouch("g", 100); err != nil || string(it.Value) != "v" {
			t.Fatalf("gat: %+v %v", it, err)
		}
		// Gone within 2 s; polled for up to 10 s on a loaded machine.
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, err = c.Get("gone")
			if err == memcache.ErrCacheMiss || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		wantErr(t, err, memcache.ErrCacheMiss)
		mustGet(t, c, "k")
		mustGet(t, c, "g")
	})
}

func TestLargeValues(t *testing.T) {
	each(t, func(t *testing.T, c *memcache.Client) {
		big := make([]byte, 1024*1024-512)
		_, _ = rand.Read(big)
		if err := c.Set(&memcache.Item{Key: "big", Value: big}); err != nil {
			t.Fatal(err)
		}
		if it := mustGet(t, c, "big"); !bytes.Equal(it.Value, big) {
			t.Fatal("large value differs")
		}
		huge := make([]byte, 1024*1024+1)
		err := c.Set(&memcache.Item{Key: "huge", Value: huge})
		if err == nil || !strings.Contains(err.Error(), "object too large for cache") {
			t.Fatalf("too large: %v", err)
		}
		_, err = c.Get("huge")
		wantErr(t, err, memcache.ErrCacheMiss)
		mustGet(t, c, "big") // the connection pool still works
	})
}

func TestMalformedKeys(t *testing.T) {
	each(t, func(t *testing.T, c *memcache.Client) {
		wantErr(t, c.Set(&memcache.Item{Key: strings.Repeat("k", 251), Value: []byte("v")}), memcache.ErrMalformedKey)
		if err := c.Set(&memcache.Item{Key: strings.Repeat("k", 250), Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
		mustGet(t, c, strings.Repeat("k", 250))
	})
}

func TestFlushPing(t *testing.T) {
	each(t, func(t *testing.T, c *memcache.Client) {
		if err := c.Ping(); err != nil {
			t.Fatal(err)
		}
		_ = c.Set(&memcache.Item{Key: "a", Value: []byte("1")})
		if err := c.FlushAll(); err != nil {
			t.Fatal(err)
		}
		_, err := c.Get("a")
		wantErr(t, err, memcache.ErrCacheMiss)
		_ = c.Set(&memcache.Item{Key: "b", Value: []byte("1")})
		if err := c.DeleteAll(); err != nil {
			t.Fatal(err)
		}
		_, err = c.Get("b")
		wantErr(t, err, memcache.ErrCacheMiss)
	})
}
