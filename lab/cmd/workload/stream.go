package main

import (
	"runtime"
	"sync"
	"time"

	"github.com/cfsim/cfsim/lab/internal/rate"
	"github.com/prometheus/client_golang/prometheus"
)

// stream is a record queue whose producer is a counter: arrivals follow the rate schedule
// exactly, so record k's arrival time is known without storing it, and the lag of the oldest
// waiting record is exact however large the backlog grows.
type stream struct {
	mu       sync.Mutex
	cond     *sync.Cond
	produced int64 // records arrived so far (next index to arrive)
	consumed int64 // next index a worker will take (FIFO)
	waiting  int
	initial  int64
	sched    *rate.Schedule
	t0       time.Time
}

func newStream(sched *rate.Schedule, initial int64) *stream {
	s := &stream{sched: sched, initial: initial}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// arrival is when record idx arrived: the initial backlog at t0, then the schedule.
func (s *stream) arrival(idx int64) time.Time {
	if idx < s.initial {
		return s.t0
	}
	sec := s.sched.ArrivalS(float64(idx - s.initial + 1))
	return s.t0.Add(time.Duration(sec * float64(time.Second)))
}

// produce advances the counter every millisecond and wakes only as many idle workers as
// there are new records (a broadcast would wake every worker each tick).
func (s *stream) produce(m *appMetrics) {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for now := range tick.C {
		n := s.initial + int64(s.sched.Count(now.Sub(s.t0).Seconds()))
		s.mu.Lock()
		if n > s.produced {
			m.produced.Add(float64(n - s.produced))
			s.produced = n
			wake := min(int(s.produced-s.consumed), s.waiting)
			for i := 0; i < wake; i++ {
				s.cond.Signal()
			}
		}
		s.mu.Unlock()
	}
}

func (s *stream) take() int64 {
	s.mu.Lock()
	for s.consumed >= s.produced {
		s.waiting++
		s.cond.Wait()
		s.waiting--
	}
	idx := s.consumed
	s.consumed++
	s.mu.Unlock()
	return idx
}

// backlogAndLag are read at scrape time so the gauges are exact at the scrape instant.
func (s *stream) backlogAndLag(now time.Time) (int64, float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	backlog := s.produced - s.consumed
	if backlog <= 0 || s.t0.IsZero() {
		return max(backlog, 0), 0
	}
	return backlog, now.Sub(s.arrival(s.consumed)).Seconds()
}

func (s *stream) worker(cfg *config, b burner, m *appMetrics, lockThread bool) {
	if lockThread {
		// kind=single-thread: one goroutine wired to one OS thread, like a cgo/JNI consumer
		runtime.LockOSThread()
	}
	for {
		idx := s.take()
		b.burn(cfg.cpuMsPerItem)
		churn(cfg.allocKBPerItem)
		done := time.Now()
		m.itemLatency.Observe(done.Sub(s.arrival(idx)).Seconds())
		m.consumed.Inc()
	}
}

func (s *stream) start(cfg *config, b burner, m *appMetrics, reg *labRegistry) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "cfsim_backlog_records", Help: "Records arrived and not yet taken by a worker."},
		func() float64 { n, _ := s.backlogAndLag(time.Now()); return float64(n) }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "cfsim_lag_seconds", Help: "Age of the oldest waiting record (0 when none waits)."},
		func() float64 { _, lag := s.backlogAndLag(time.Now()); return lag }))
	s.mu.Lock()
	s.t0 = time.Now()
	s.produced = s.initial
	s.mu.Unlock()
	m.produced.Add(float64(s.initial))
	workers, lock := cfg.workers, false
	if cfg.kind == "single-thread" {
		workers, lock = 1, true
	}
	for i := 0; i < workers; i++ {
		go s.worker(cfg, b, m, lock)
	}
	go s.produce(m)
}
