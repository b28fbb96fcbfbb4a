// Package metricsx holds the histogram buckets shared by the workload and the load generator,
// so server-side and client-side latencies can be compared bucket by bucket.
package metricsx

import "math"

// LatencyBuckets are 6 per doubling (12 % wide, so a quantile interpolated inside one is
// within ~6 %) from 50 us to >= 80 s: p50, p99 and p999 of 0.1-50 ms requests and the seconds
// of a stream's backlog both fall inside, and a 100 ms CFS period shows in a distribution.
func LatencyBuckets() []float64 {
	var b []float64
	step := math.Pow(2, 1.0/6)
	for v := 5e-5; v < 80*step; v *= step {
		b = append(b, math.Round(v*1e8)/1e8)
	}
	return b
}
