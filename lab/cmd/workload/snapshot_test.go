package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestSnapshotIsCapturedAtTheBookedInstant(t *testing.T) {
	reg := newLabRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "cfsim_test_total", Help: "x"})
	reg.MustRegister(c)
	srv := httptest.NewServer(http.HandlerFunc(newSnapshots(reg).handle))
	defer srv.Close()
	at := time.Now().Add(50 * time.Millisecond)
	resp, err := http.Post(fmt.Sprintf("%s/?name=end&at_unix_ns=%d", srv.URL, at.UnixNano()), "text/plain", nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("booking: %v %v", err, resp)
	}
	c.Add(3)                                                    // before the instant: in the capture
	time.AfterFunc(200*time.Millisecond, func() { c.Add(100) }) // after it: not in the capture
	resp, err = http.Get(srv.URL + "/?name=end")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	text := string(body)
	if !strings.Contains(text, "cfsim_test_total 3\n") || !strings.HasPrefix(text, "# cfsim_snapshot booked_unix_ns=") {
		t.Fatalf("capture:\n%s", text)
	}
	var booked, captured int64
	fmt.Sscanf(strings.SplitN(text, "\n", 2)[0], "# cfsim_snapshot booked_unix_ns=%d captured_unix_ns=%d", &booked, &captured)
	if booked != at.UnixNano() || captured < booked || captured-booked > int64(40*time.Millisecond) {
		t.Fatalf("booked %d captured %d", booked, captured)
	}
	// the synchronous collection gives what Gather gives
	want, _ := reg.Gather()
	got, err := reg.collectSync()
	if err != nil || len(got) != len(want) || got[0].String() != want[0].String() {
		t.Fatalf("collectSync %v:\n%v\nwant\n%v", err, got, want)
	}
	if r, _ := http.Get(srv.URL + "/"); r.StatusCode != http.StatusBadRequest {
		t.Fatalf("a snapshot without a name must be refused, got %d", r.StatusCode)
	}
}

func TestCollectSyncCoversTheWholeWorkloadRegistry(t *testing.T) {
	reg, _ := newRegistry()
	want, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got, err := reg.collectSync()
	if err != nil {
		t.Fatal(err)
	}
	names := func(fs []*dto.MetricFamily) map[string]int {
		m := map[string]int{}
		for _, f := range fs {
			m[f.GetName()+" "+f.GetType().String()] = len(f.Metric)
		}
		return m
	}
	g, w := names(got), names(want)
	if len(g) != len(w) || len(g) < 50 {
		t.Fatalf("collectSync gave %d families, Gather %d", len(g), len(w))
	}
	for k, n := range w {
		if g[k] != n {
			t.Errorf("%s: %d metrics, Gather %d", k, g[k], n)
		}
	}
}
