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
)

func TestSnapshotIsCapturedAtTheBookedInstant(t *testing.T) {
	reg := prometheus.NewRegistry()
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
	if r, _ := http.Get(srv.URL + "/"); r.StatusCode != http.StatusBadRequest {
		t.Fatalf("a snapshot without a name must be refused, got %d", r.StatusCode)
	}
}
