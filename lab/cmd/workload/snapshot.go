package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// snapshots captures the /metrics exposition at instants the harness books in advance
// (POST /snapshot?name=N&at_unix_ns=T) and hands it over later (GET /snapshot?name=N).
//
// A saturated or throttled process answers an HTTP read late: the handler goroutine waits in the
// scheduler's global run queue behind every runnable request goroutine (runtime/proc.go:
// netpoll-woken goroutines are injected there), so a direct read at the end of a run can measure
// the counters seconds after the instant the harness read the cgroup. A timer fires at its
// instant instead: time.AfterFunc's goroutine is made runnable by the timer's own P and runs next
// (runqput with next=true), so the capture lands within a scheduling slice (plus any CFS
// throttling) of the booked instant, and its real time is recorded with it.
type snapshots struct {
	reg  prometheus.Gatherer
	mu   sync.Mutex
	cond *sync.Cond
	done map[string][]byte
}

func newSnapshots(reg prometheus.Gatherer) *snapshots {
	s := &snapshots{reg: reg, done: map[string][]byte{}}
	s.cond = sync.NewCond(&s.mu)
	return s
}

func (s *snapshots) capture(name string, booked time.Time) {
	t := time.Now()
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# cfsim_snapshot booked_unix_ns=%d captured_unix_ns=%d\n", booked.UnixNano(), t.UnixNano())
	mfs, err := s.reg.Gather()
	if err != nil {
		fmt.Fprintf(&buf, "# gather error: %v\n", err)
	}
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			fmt.Fprintf(&buf, "# encode error: %v\n", err)
		}
	}
	s.mu.Lock()
	s.done[name] = buf.Bytes()
	s.cond.Broadcast()
	s.mu.Unlock()
}

func (s *snapshots) handle(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("name")
	if name == "" {
		http.Error(w, "name is required", http.StatusBadRequest)
		return
	}
	if r.Method == http.MethodPost {
		ns, err := strconv.ParseInt(r.URL.Query().Get("at_unix_ns"), 10, 64)
		if err != nil {
			http.Error(w, "at_unix_ns must be an integer", http.StatusBadRequest)
			return
		}
		at := time.Unix(0, ns)
		time.AfterFunc(time.Until(at), func() { s.capture(name, at) })
		fmt.Fprintln(w, "booked")
		return
	}
	// GET: wait for the capture (the client's timeout ends the wait)
	ctx := r.Context()
	stop := context.AfterFunc(ctx, func() { s.mu.Lock(); s.cond.Broadcast(); s.mu.Unlock() })
	defer stop()
	s.mu.Lock()
	for s.done[name] == nil && ctx.Err() == nil {
		s.cond.Wait()
	}
	body := s.done[name]
	s.mu.Unlock()
	if body == nil {
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	w.Write(body)
}
