package main

import (
	"math"
	"runtime/metrics"

	"github.com/prometheus/client_golang/prometheus"
)

// runtimeHistograms exports runtime/metrics time histograms with the runtime's own buckets
// (4 per doubling from 512 ns, runtime/histogram.go timeHistogram), cut at maxBucketS, so p50
// and p99 of scheduling latency and GC pauses can be read to ~19 % (client_golang's Go collector
// re-buckets them to one bucket per ~11x, too coarse for a quantile).
//
// A runtime histogram has no sum: _sum is estimated from bucket midpoints (the +Inf bucket at
// its lower bound) and says so in its help text.
type runtimeHistograms struct {
	samples []metrics.Sample
	descs   []*prometheus.Desc
}

const maxBucketS = 200.0

// runtimeHistogramNames maps runtime/metrics names to the exported metric names.
var runtimeHistogramNames = [][2]string{
	{"/sched/latencies:seconds", "cfsim_go_sched_latencies_seconds"},
	{"/sched/pauses/total/gc:seconds", "cfsim_go_sched_pauses_total_gc_seconds"},
}

func newRuntimeHistograms() *runtimeHistograms {
	h := &runtimeHistograms{}
	for _, n := range runtimeHistogramNames {
		h.samples = append(h.samples, metrics.Sample{Name: n[0]})
		h.descs = append(h.descs, prometheus.NewDesc(n[1],
			"runtime/metrics "+n[0]+" with the runtime's buckets up to 200 s (sum estimated from bucket midpoints).",
			nil, nil))
	}
	return h
}

func (h *runtimeHistograms) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range h.descs {
		ch <- d
	}
}

func (h *runtimeHistograms) Collect(ch chan<- prometheus.Metric) {
	metrics.Read(h.samples)
	for i, s := range h.samples {
		if s.Value.Kind() != metrics.KindFloat64Histogram {
			continue
		}
		count, sum, buckets := foldHistogram(s.Value.Float64Histogram())
		ch <- prometheus.MustNewConstHistogram(h.descs[i], count, sum, buckets)
	}
}

// foldHistogram turns a runtime histogram (Counts[i] in [Buckets[i], Buckets[i+1])) into
// cumulative Prometheus buckets keyed by upper bound, keeping bounds in (0, maxBucketS].
func foldHistogram(rh *metrics.Float64Histogram) (uint64, float64, map[float64]uint64) {
	buckets := map[float64]uint64{}
	var cum uint64
	sum := 0.0
	for i, c := range rh.Counts {
		lo, hi := rh.Buckets[i], rh.Buckets[i+1]
		cum += c
		mid := hi
		switch {
		case math.IsInf(hi, 1):
			mid = lo
		case !math.IsInf(lo, -1):
			mid = (lo + hi) / 2
		}
		sum += float64(c) * mid
		if hi > 0 && hi <= maxBucketS {
			buckets[hi] = cum
		}
	}
	return cum, sum, buckets
}
