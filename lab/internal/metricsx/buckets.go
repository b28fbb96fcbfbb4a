// Package metricsx holds the histogram buckets shared by the workload and the load generator,
// so server-side and client-side latencies can be compared bucket by bucket.
package metricsx

import "math"

// LatencyBuckets are 3 per doubling from 0.1 ms to >= 60 s (about 13 % quantile resolution),
// fine enough to see a 100 ms CFS period in a latency distribution.
func LatencyBuckets() []float64 {
	var b []float64
	for v := 1e-4; v < 60*1.26; v *= math.Cbrt(2) {
		b = append(b, math.Round(v*1e7)/1e7)
	}
	return b
}
