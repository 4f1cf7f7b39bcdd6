// Prometheus' memcached_exporter (github.com/prometheus/memcached_exporter, its
// collector package pinned in go.mod) scraping memcached and memcrab after a
// workload of small, large, expired and evicted items: /metrics must answer HTTP
// 200 with `memcached_up 1`, as its own binary serves it (default registry
// options: any collection error is a 500). crates/server/tests/monitoring.rs
// spells out the rules behind this; docs/operations.md ("Monitoring") shows the
// same check with the exporter's binary.
package memcachetest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/memcached_exporter/pkg/exporter"
)

func TestMemcachedExporter(t *testing.T) {
	for _, kind := range []string{"memcached", "memcrab"} {
		bin := binaries(t)[kind]
		t.Run(kind, func(t *testing.T) {
			addr := start(t, bin, "-m", "8")
			exporterWorkload(t, addr)
			reg := prometheus.NewRegistry()
			reg.MustRegister(exporter.New(addr, 5*time.Second, log.NewNopLogger(), nil))
			srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
			t.Cleanup(srv.Close)
			resp, err := http.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			text := string(body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("/metrics answered %d:\n%s", resp.StatusCode, text)
			}
			for _, want := range []string{
				"memcached_up 1",
				`memcached_slab_commands_total{command="set",slab="1",status="hit"}`,
				`memcached_slab_mem_requested_bytes{slab="1"}`,
				`memcached_slab_items_evicted_total{slab="`,
			} {
				if !strings.Contains(text, want) {
					t.Errorf("no %q in /metrics:\n%s", want, text)
				}
			}
			if !regexp.MustCompile(`(?m)^memcached_items_evicted_total [1-9]`).MatchString(text) {
				t.Errorf("the workload evicted nothing:\n%s", text)
			}
		})
	}
}

// exporterWorkload stores small and large items, items that are already expired
// (a negative expiration) and 16 MB of 4 KB values through -m 8 (evictions), and
// reads some back.
func exporterWorkload(t *testing.T, addr string) {
	c := memcache.New(addr)
	c.Timeout = 5 * time.Second
	defer c.Close()
	set := func(key string, value []byte, exp int32) {
		t.Helper()
		if err := c.Set(&memcache.Item{Key: key, Value: value, Expiration: exp}); err != nil {
			t.Fatalf("set %s: %v", key, err)
		}
	}
	for i := 0; i < 200; i++ {
		set(fmt.Sprintf("small%d", i), []byte("0123456789"), 0)
	}
	large := []byte(strings.Repeat("L", 300_000))
	for i := 0; i < 3; i++ {
		set(fmt.Sprintf("large%d", i), large, 0)
	}
	for i := 0; i < 20; i++ {
		set(fmt.Sprintf("expired%d", i), []byte("x"), -1)
	}
	filler := []byte(strings.Repeat("f", 4000))
	for i := 0; i < 4000; i++ {
		set(fmt.Sprintf("fill%d", i), filler, 0)
	}
	if _, err := c.GetMulti([]string{"small1", "large1", "expired1", "fill3999"}); err != nil {
		t.Fatal(err)
	}
}
