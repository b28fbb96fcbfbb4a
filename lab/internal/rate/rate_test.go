package rate

import (
	"math"
	"testing"
)

func TestStepsCountAndArrival(t *testing.T) {
	s, err := Parse("[[0, 10], [2, 20]]")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Count(3); math.Abs(got-40) > 1e-9 {
		t.Fatalf("Count(3) = %v, want 40", got)
	}
	if got := s.ArrivalS(30); math.Abs(got-2.5) > 1e-9 {
		t.Fatalf("ArrivalS(30) = %v, want 2.5", got)
	}
	if got := s.ArrivalS(5); math.Abs(got-0.5) > 1e-9 {
		t.Fatalf("ArrivalS(5) = %v, want 0.5", got)
	}
	c, _ := Parse("1000")
	if got := c.ArrivalS(c.Count(7.25)); math.Abs(got-7.25) > 1e-9 {
		t.Fatalf("inverse: got %v", got)
	}
}
