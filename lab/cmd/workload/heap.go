package main

import (
	"math/rand/v2"
	"sort"
	"time"

	"github.com/cfsim/cfsim/lab/internal/garbage"
)

// node is a 64-byte pointerful object: the GC must scan it, so live heap costs mark work.
type node struct {
	left, right *node
	vals        [6]uint64
}

// liveHeap keeps liveMB of nodes reachable: a slice of all nodes (scanned in parallel oblets)
// whose entries also form a random binary tree, so marking has parallel work, not one long list.
var liveHeap []*node

func buildLiveHeap(liveMB float64, rng *rand.Rand) int {
	const perNodeBytes = 64 + 8 // node plus its slice slot
	n := int(liveMB * (1 << 20) / perNodeBytes)
	if n <= 0 {
		return 0
	}
	nodes := make([]*node, n)
	for i := range nodes {
		nodes[i] = &node{vals: [6]uint64{uint64(i)}}
	}
	for i := range nodes {
		if l := 2*i + 1; l < n {
			nodes[i].left = nodes[l]
		}
		nodes[i].right = nodes[rng.IntN(n)]
	}
	liveHeap = nodes
	return n
}

// churn allocates kb KiB (rounded) of short-lived 1 KiB objects (typical message buffers).
func churn(kb float64) {
	garbage.Churn(int(kb + 0.5))
}

// heapWalkNs times a walk through the live heap that the caches cannot help: each hop reads a node
// whose slice index is computed from the value the hop before read (so no two hops overlap), the
// indices following a full-period generator over the next power of two (indices beyond the heap
// skipped), so the walk covers the whole heap rather than settling into a cycle the cache holds.
// The slice's entry and the node are each a likely miss for a heap beyond the L3, as the GC's own
// mark meets them. It returns the median over rounds of ns a hop, 0 with no live heap. Measured at
// start-up beside the CPU loop's calibration: a big heap's mark runs at a speed that moves from run
// to run on the lab's VM where the CPU loop's does not (data/README.md, gc-spiral-state), so each run
// records what its own heap's loads cost before its load starts.
func heapWalkNs(nodes []*node, hops, rounds int) float64 {
	n := uint64(len(nodes))
	if n < 2 || hops < 1 || rounds < 1 {
		return 0
	}
	m := uint64(1)
	for m < n {
		m <<= 1
	}
	// an LCG modulo a power of two with a = 1 mod 4 and c odd visits every residue once a period
	next := func(x uint64) uint64 { return (x*6364136223846793005 + 1442695040888963407) & (m - 1) }
	x, sink := uint64(0), uint64(0)
	walk := func(k int) {
		for ; k > 0; k-- {
			v := nodes[x].vals[0] // the node's own index (buildLiveHeap), known only once loaded
			sink += v
			for x = next(v); x >= n; x = next(x) {
			}
		}
	}
	walk(hops / 4) // the loop and the upper page tables warm
	per := make([]float64, 0, rounds)
	for r := 0; r < rounds; r++ {
		t0 := time.Now()
		walk(hops)
		per = append(per, float64(time.Since(t0).Nanoseconds())/float64(hops))
	}
	if sink == 1<<63 { // never true: keeps the walk's loads live
		println(sink)
	}
	sort.Float64s(per)
	return per[len(per)/2]
}
