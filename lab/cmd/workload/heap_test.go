package main

import (
	"math/rand/v2"
	"testing"
)

func TestHeapWalkTimesEveryHopAndNeedsAHeap(t *testing.T) {
	if got := heapWalkNs(nil, 1000, 3); got != 0 {
		t.Fatalf("no live heap: want 0, got %v", got)
	}
	nodes := make([]*node, 1<<14)
	for i := range nodes {
		nodes[i] = &node{vals: [6]uint64{uint64(i)}}
	}
	if got := heapWalkNs(nodes, 10_000, 3); !(got > 0 && got < 1e6) {
		t.Fatalf("a 1 MiB heap: want a positive time a hop, got %v ns", got)
	}
	saved := liveHeap
	defer func() { liveHeap = saved }()
	if n := buildLiveHeap(1, rand.New(rand.NewPCG(1, 2))); n == 0 || heapWalkNs(liveHeap, 1000, 1) <= 0 {
		t.Fatalf("the workload's own live heap: %d nodes, walk %v", n, heapWalkNs(liveHeap, 1000, 1))
	}
}
