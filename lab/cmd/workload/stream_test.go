package main

import (
	"testing"
	"time"

	"github.com/cfsim/cfsim/lab/internal/rate"
)

// The producer is a counter: record k's arrival time must follow from the schedule alone,
// so the lag of the oldest waiting record is exact for any backlog.
func TestStreamArrivalAndLag(t *testing.T) {
	sched, err := rate.Parse("[[0, 100], [1, 1000]]")
	if err != nil {
		t.Fatal(err)
	}
	s := newStream(sched, 5)
	s.t0 = time.Unix(1000, 0)
	if got := s.arrival(4); !got.Equal(s.t0) {
		t.Fatalf("initial backlog arrives at t0, got %v", got.Sub(s.t0))
	}
	// record 5 is the first scheduled one: count reaches 1 at 10 ms
	if got := s.arrival(5).Sub(s.t0); got != 10*time.Millisecond {
		t.Fatalf("arrival(5) = %v, want 10ms", got)
	}
	// 100 records by 1 s, then 1000/s: record 5+149 arrives when the count reaches 150 -> 1.05 s
	if got := s.arrival(154).Sub(s.t0); got != 1050*time.Millisecond {
		t.Fatalf("arrival(154) = %v, want 1.05s", got)
	}
	s.produced, s.consumed = 50, 20
	backlog, lag := s.backlogAndLag(s.t0.Add(2 * time.Second))
	if backlog != 30 || lag < 1.839 || lag > 1.841 { // record 20 arrived at 0.16 s
		t.Fatalf("backlog, lag = %d, %v; want 30, 1.84", backlog, lag)
	}
}
