// mallocbench measures the mutator's own CPU per KiB of short-lived 1 KiB allocations
// (mallocgc: allocation, zeroing, span refill, proportional sweeping) beside a live heap of
// pointerful nodes, the shape of the lab workload's garbage. The model's prior
// go.alloc_ns_per_kb comes from it (src/cfsim/scenario/schema.py).
//
//	GOMAXPROCS=1 mallocbench <live MiB> <KiB per call>
//
// It reads runtime/metrics' /cpu/classes/user (P-time outside the GC): on a shared host the
// P-time includes time the thread waited for a CPU, so take the minimum of repeated runs.
package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"time"

	"github.com/cfsim/cfsim/lab/internal/garbage"
)

type node struct {
	next *node
	pad  [120]byte
}

var live *node

func main() {
	liveMB, _ := strconv.Atoi(os.Args[1])
	kb, _ := strconv.Atoi(os.Args[2])
	for i := 0; i < liveMB<<20/128; i++ {
		live = &node{next: live}
	}
	runtime.GC()
	s := []metrics.Sample{{Name: "/cpu/classes/user:cpu-seconds"}, {Name: "/cpu/classes/gc/total:cpu-seconds"},
		{Name: "/cpu/classes/total:cpu-seconds"}, {Name: "/gc/cycles/total:gc-cycles"}}
	for i := 0; i < 20000; i++ {
		garbage.Churn(kb)
	}
	runtime.GC() // flush cpu classes
	metrics.Read(s)
	u0, g0, c0 := s[0].Value.Float64(), s[1].Value.Float64(), s[3].Value.Uint64()
	t0 := time.Now()
	n := 200000
	for i := 0; i < n; i++ {
		garbage.Churn(kb)
	}
	el := time.Since(t0)
	runtime.GC()
	metrics.Read(s)
	u1, g1, c1 := s[0].Value.Float64(), s[1].Value.Float64(), s[3].Value.Uint64()
	fmt.Printf("live %d MiB kb %d: user %.2f us/call (%.3f us/KiB), gc %.2f us/call, wall %.2f us/call, cycles %d\n",
		liveMB, kb, (u1-u0)/float64(n)*1e6, (u1-u0)/float64(n)*1e6/float64(kb), (g1-g0)/float64(n)*1e6,
		float64(el.Nanoseconds())/float64(n)/1e3, c1-c0)
}
