// Package rate turns the scenario's arrival rate (a constant or [[t_s, rate_per_s], ...] steps)
// into cumulative arrival counts and exact arrival times, so a producer can be a counter:
// record k of a deterministic stream arrives when the cumulative count first reaches k+1.
package rate

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
)

// Step is one piece of a piecewise-constant rate: RatePerS applies from TS until the next step.
type Step struct {
	TS       float64
	RatePerS float64
}

// Schedule is a piecewise-constant arrival rate; before the first step the rate is 0.
type Schedule struct {
	steps []Step
	cum   []float64 // cumulative arrivals at each step start
}

// Parse reads "1000" or "[[0, 1000], [10, 2000]]" (JSON, as the harness passes it).
func Parse(text string) (*Schedule, error) {
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		return nil, fmt.Errorf("rate %q: not a number or a JSON list of [t_s, rate] steps: %w", text, err)
	}
	switch x := v.(type) {
	case float64:
		return New([]Step{{0, x}})
	case []any:
		steps := make([]Step, 0, len(x))
		for i, item := range x {
			pair, ok := item.([]any)
			if !ok || len(pair) != 2 {
				return nil, fmt.Errorf("rate step %d: want [t_s, rate_per_s], got %v", i, item)
			}
			t, ok1 := pair[0].(float64)
			r, ok2 := pair[1].(float64)
			if !ok1 || !ok2 {
				return nil, fmt.Errorf("rate step %d: want two numbers, got %v", i, item)
			}
			steps = append(steps, Step{t, r})
		}
		return New(steps)
	}
	return nil, fmt.Errorf("rate %q: not a number or a list of steps", text)
}

// New validates steps (times increasing, rates >= 0) and precomputes cumulative counts.
func New(steps []Step) (*Schedule, error) {
	if len(steps) == 0 {
		return nil, fmt.Errorf("rate: no steps")
	}
	s := &Schedule{steps: steps, cum: make([]float64, len(steps))}
	for i, st := range steps {
		if st.RatePerS < 0 || st.TS < 0 || math.IsNaN(st.RatePerS) {
			return nil, fmt.Errorf("rate step %d: t_s and rate must be >= 0", i)
		}
		if i > 0 {
			if st.TS <= steps[i-1].TS {
				return nil, fmt.Errorf("rate step %d: times must increase", i)
			}
			s.cum[i] = s.cum[i-1] + steps[i-1].RatePerS*(st.TS-steps[i-1].TS)
		}
	}
	return s, nil
}

// At is the rate [1/s] at time t [s].
func (s *Schedule) At(tS float64) float64 {
	i := sort.Search(len(s.steps), func(i int) bool { return s.steps[i].TS > tS }) - 1
	if i < 0 {
		return 0
	}
	return s.steps[i].RatePerS
}

// Count is the expected number of arrivals in [0, t].
func (s *Schedule) Count(tS float64) float64 {
	i := sort.Search(len(s.steps), func(i int) bool { return s.steps[i].TS > tS }) - 1
	if i < 0 {
		return 0
	}
	return s.cum[i] + s.steps[i].RatePerS*(tS-s.steps[i].TS)
}

// ArrivalS is when the cumulative count reaches n (the arrival time of record n-1);
// +Inf if the rate ends at 0 before that.
func (s *Schedule) ArrivalS(n float64) float64 {
	i := sort.Search(len(s.cum), func(i int) bool { return s.cum[i] >= n }) - 1
	if i < 0 {
		return s.steps[0].TS
	}
	r := s.steps[i].RatePerS
	if r <= 0 {
		return math.Inf(1)
	}
	return s.steps[i].TS + (n-s.cum[i])/r
}
