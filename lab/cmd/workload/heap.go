package main

import (
	"math/rand/v2"

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
