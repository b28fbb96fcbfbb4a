// Package spin is the lab's unit of pure CPU work: rounds of xorshift, with no memory traffic, so
// their CPU cost per round is stable; the workload burns request CPU with it and wakebench uses
// it as the busy loop between sleeps.
package spin

import "sync/atomic"

// sink publishes each result so the loop cannot be optimised away.
var sink atomic.Uint64

// Rounds runs n rounds of xorshift.
func Rounds(n int64) {
	x := uint64(88172645463325252)
	for i := int64(0); i < n; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	sink.Add(x & 1)
}
