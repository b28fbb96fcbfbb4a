package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
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
//
// The capture collects synchronously, in the timer's goroutine (collectSync): Registry.Gather
// runs each collector in a goroutine of its own, and in a saturated process those wait in the
// run queue, so a capture's values could be read seconds after its instant (in a GOGC-off death
// spiral the window's start was read after its end). The capture records when it began and when
// its last value was read.
type snapshots struct {
	reg  *labRegistry
	mu   sync.Mutex
	cond *sync.Cond
	done map[string][]byte
}

// labRegistry is a Registry that remembers its collectors, so a capture can collect them
// synchronously.
type labRegistry struct {
	*prometheus.Registry
	mu sync.Mutex
	cs []prometheus.Collector
}

func newLabRegistry() *labRegistry { return &labRegistry{Registry: prometheus.NewRegistry()} }

func (r *labRegistry) MustRegister(cs ...prometheus.Collector) {
	r.Registry.MustRegister(cs...)
	r.mu.Lock()
	r.cs = append(r.cs, cs...)
	r.mu.Unlock()
}

var descRe = regexp.MustCompile(`^Desc\{fqName: ("(?:[^"\\]|\\.)*"), help: ("(?:[^"\\]|\\.)*")`)

// collectSync is Registry.Gather without goroutines: every collector of this process sends its
// metrics without starting any (the Go, process and const collectors, counters, histograms).
func (r *labRegistry) collectSync() ([]*dto.MetricFamily, error) {
	r.mu.Lock()
	cs := append([]prometheus.Collector(nil), r.cs...)
	r.mu.Unlock()
	fams := map[string]*dto.MetricFamily{}
	for _, c := range cs {
		ch := make(chan prometheus.Metric, 1<<14)
		c.Collect(ch)
		close(ch)
		for m := range ch {
			parts := descRe.FindStringSubmatch(m.Desc().String())
			if parts == nil {
				return nil, fmt.Errorf("cannot read %s", m.Desc())
			}
			name, _ := strconv.Unquote(parts[1])
			help, _ := strconv.Unquote(parts[2])
			pb := &dto.Metric{}
			if err := m.Write(pb); err != nil {
				return nil, err
			}
			var typ dto.MetricType
			switch {
			case pb.Counter != nil:
				typ = dto.MetricType_COUNTER
			case pb.Gauge != nil:
				typ = dto.MetricType_GAUGE
			case pb.Histogram != nil:
				typ = dto.MetricType_HISTOGRAM
			case pb.Summary != nil:
				typ = dto.MetricType_SUMMARY
			default:
				typ = dto.MetricType_UNTYPED
			}
			f := fams[name]
			if f == nil {
				f = &dto.MetricFamily{Name: &name, Help: &help, Type: &typ}
				fams[name] = f
			}
			f.Metric = append(f.Metric, pb)
		}
	}
	out := make([]*dto.MetricFamily, 0, len(fams))
	for _, f := range fams {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
	return out, nil
}

func newSnapshots(reg *labRegistry) *snapshots {
	s := &snapshots{reg: reg, done: map[string][]byte{}}
	s.cond = sync.NewCond(&s.mu)
	return s
}

func (s *snapshots) capture(name string, booked time.Time) {
	t := time.Now()
	mfs, err := s.reg.collectSync()
	t1 := time.Now()
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# cfsim_snapshot booked_unix_ns=%d captured_unix_ns=%d collected_unix_ns=%d\n",
		booked.UnixNano(), t.UnixNano(), t1.UnixNano())
	if err != nil {
		fmt.Fprintf(&buf, "# collect error: %v\n", err)
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
