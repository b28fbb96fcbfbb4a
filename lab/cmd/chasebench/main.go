// chasebench measures how long a load takes that misses every cache of this machine: one thread
// follows a random cycle of pointers through a buffer eight times the lab host's 32 MiB L3, one
// pointer per 64-byte line, each load's address the value the load before it read, so no two loads
// overlap and each pays a DRAM access and, mostly, a TLB miss. On a virtual machine the TLB miss
// walks the guest's page tables and the host's (nested paging), so the figure says how dear the
// memory beyond the cache is on this VM at this moment.
//
// Why the lab records it before every run: marking a Go heap far beyond the L3 is bound by such
// misses, and the lab's 256 MiB marks ran at 0.77-1.66 MB of scan work a ms of CPU from one run to
// the next, minutes apart, with the CPU's own speed (the workload's start-up loop) not ordering them
// (data/README.md, gc-spiral-state).
//
//	chasebench [-mb 256] [-loads 1000000] [-rounds 5] [-seed 1]
//
// One JSON line per round:
//
//	{"round": 0, "mb": 256, "loads": 1000000, "ns_per_load": 112.4}
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"time"
)

// words per 64-byte cache line: the chase uses the first word of each line
const lineWords = 8

type result struct {
	Round     int     `json:"round"`
	MB        int     `json:"mb"`
	Loads     int     `json:"loads"`
	NsPerLoad float64 `json:"ns_per_load"`
}

// cycle fills buf so that following buf[i*lineWords] from line 0 visits every line once before it
// returns (Sattolo's shuffle: a uniformly random permutation with a single cycle).
func cycle(buf []uint64, seed uint64) {
	n := len(buf) / lineWords
	for i := 0; i < n; i++ {
		buf[i*lineWords] = uint64(i)
	}
	rng := rand.New(rand.NewPCG(seed, 0x2545f4914f6cdd1d))
	for i := n - 1; i > 0; i-- {
		j := rng.IntN(i)
		buf[i*lineWords], buf[j*lineWords] = buf[j*lineWords], buf[i*lineWords]
	}
}

// chase follows the cycle for loads loads and returns where it ended (so the loop is not elided).
func chase(buf []uint64, loads int) uint64 {
	p := uint64(0)
	for k := 0; k < loads; k++ {
		p = buf[p*lineWords]
	}
	return p
}

func main() {
	mb := flag.Int("mb", 256, "buffer size [MiB]; far beyond the last-level cache")
	loads := flag.Int("loads", 1_000_000, "dependent loads a round")
	rounds := flag.Int("rounds", 5, "rounds")
	seed := flag.Uint64("seed", 1, "the shuffle's seed")
	flag.Parse()
	if *mb < 1 || *loads < 1 || *rounds < 1 {
		fmt.Fprintln(os.Stderr, "chasebench: -mb, -loads and -rounds must be >= 1")
		os.Exit(2)
	}
	runtime.LockOSThread()
	buf := make([]uint64, *mb<<20/8)
	cycle(buf, *seed)
	chase(buf, *loads/4) // warm the page tables' upper levels and the loop itself
	enc := json.NewEncoder(os.Stdout)
	var sink uint64
	for r := 0; r < *rounds; r++ {
		t0 := time.Now()
		sink += chase(buf, *loads)
		ns := float64(time.Since(t0).Nanoseconds()) / float64(*loads)
		if err := enc.Encode(result{Round: r, MB: *mb, Loads: *loads, NsPerLoad: ns}); err != nil {
			fmt.Fprintln(os.Stderr, "chasebench:", err)
			os.Exit(1)
		}
	}
	if sink == 1<<63 { // never true: keeps the chase's result live
		fmt.Fprintln(os.Stderr, sink)
	}
}
