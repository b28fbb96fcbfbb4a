// Package garbage makes the lab's short-lived garbage: 1 KiB byte slices (typical message
// buffers), the shape the workload allocates and mallocbench measures.
package garbage

import "sync/atomic"

// sink keeps the most recent garbage barely reachable so the compiler cannot elide it.
var sink atomic.Pointer[[][]byte]

// Churn allocates n short-lived 1 KiB objects (nothing for n <= 0).
func Churn(n int) {
	if n <= 0 {
		return
	}
	bufs := make([][]byte, n)
	for i := range bufs {
		b := make([]byte, 1024)
		b[0], b[1023] = byte(i), byte(i)
		bufs[i] = b
	}
	sink.Store(&bufs)
}
