package main

import (
	"math"
	"runtime/metrics"
	"testing"
)

func TestFoldHistogramCumulatesAndCuts(t *testing.T) {
	rh := &metrics.Float64Histogram{
		Counts:  []uint64{1, 2, 3, 4},
		Buckets: []float64{math.Inf(-1), 1e-6, 2e-6, 300, math.Inf(1)},
	}
	count, sum, b := foldHistogram(rh)
	if count != 10 {
		t.Fatalf("count = %d, want 10", count)
	}
	// bounds kept: 1e-6 (cum 1), 2e-6 (cum 3); 300 s is above the cut and goes to +Inf
	if len(b) != 2 || b[1e-6] != 1 || b[2e-6] != 3 {
		t.Fatalf("buckets = %v", b)
	}
	// (-inf, 1us): upper bound; [1, 2) us: 1.5 us; [2 us, 300 s): midpoint; [300, inf): 300
	want := 1*1e-6 + 2*1.5e-6 + 3*(2e-6+300)/2 + 4*300.0
	if math.Abs(sum-want) > 1e-9 {
		t.Fatalf("sum = %v, want %v", sum, want)
	}
}

func TestRuntimeHistogramsReadTheRuntime(t *testing.T) {
	h := newRuntimeHistograms()
	metrics.Read(h.samples)
	for _, s := range h.samples {
		if s.Value.Kind() != metrics.KindFloat64Histogram {
			t.Fatalf("%s is not a histogram in this Go release", s.Name)
		}
	}
}
