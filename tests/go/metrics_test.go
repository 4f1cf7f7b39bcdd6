// memcrab's own /metrics (-o metrics_listen) against Prometheus' memcached_exporter
// collector scraping the same memcrab: every family the exporter makes must be
// served by memcrab with the same name, type and label names, and every sample with
// the same labels and, where nothing moves between the two reads (the workload is
// over), the same value. crates/server/tests/metrics.rs tests the endpoint itself.
package memcachetest

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/memcached_exporter/pkg/exporter"
)

// Families whose values change between the exporter's read and memcrab's: time,
// CPU, and the exporter's own connection and its bytes.
var moving = map[string]bool{
	"memcached_uptime_seconds":                   true,
	"memcached_time_seconds":                     true,
	"memcached_process_user_cpu_seconds_total":   true,
	"memcached_process_system_cpu_seconds_total": true,
	"memcached_read_bytes_total":                 true,
	"memcached_written_bytes_total":              true,
	"memcached_current_connections":              true,
	"memcached_connections_total":                true,
	"memcached_slab_items_age_seconds":           true,
}

func labelKey(m *dto.Metric) string {
	var parts []string
	for _, l := range m.GetLabel() {
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	default:
		return m.GetUntyped().GetValue()
	}
}

func TestMetricsEndpointMatchesTheExporter(t *testing.T) {
	mport := freePort(t)
	addr := start(t, binaries(t)["memcrab"], "-m", "8", "-o", fmt.Sprintf("metrics_listen=127.0.0.1:%d", mport))
	exporterWorkload(t, addr)
	reg := prometheus.NewRegistry()
	reg.MustRegister(exporter.New(addr, 5*time.Second, log.NewNopLogger(), nil))
	theirs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	client := http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", mport))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var parser expfmt.TextParser
	ours, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("memcrab's /metrics does not parse: %v", err)
	}
	compared := 0
	for _, mf := range theirs {
		name := mf.GetName()
		o, ok := ours[name]
		if !ok {
			t.Errorf("the exporter serves %s, memcrab does not", name)
			continue
		}
		if o.GetType() != mf.GetType() {
			t.Errorf("%s: exporter type %v, memcrab %v", name, mf.GetType(), o.GetType())
		}
		byLabels := map[string]*dto.Metric{}
		for _, m := range o.GetMetric() {
			byLabels[labelKey(m)] = m
		}
		for _, m := range mf.GetMetric() {
			k := labelKey(m)
			om, ok := byLabels[k]
			if !ok {
				t.Errorf("%s{%s}: served by the exporter, not by memcrab", name, k)
				continue
			}
			if !moving[name] && value(om) != value(m) {
				t.Errorf("%s{%s}: exporter %v, memcrab %v", name, k, value(m), value(om))
			}
			compared++
		}
	}
	if len(theirs) < 40 || compared < 60 {
		t.Errorf("only %d families, %d samples compared", len(theirs), compared)
	}
	t.Logf("%d exporter families, %d samples: same names, types, labels and values", len(theirs), compared)
}
