// scavbench measures what the Go runtime's own give-back-and-fault-again cycle costs near a
// memory limit, on this host (go.page_fault_us and go.page_release_us in
// src/cfsim/scenario/schema.py; `cfsim lab scav` turns its rounds into a parameter file).
//
// faultbench times the kernel's side alone (a page touched after MADV_DONTNEED, madvise in 64 KiB
// runs) in a loop of its own, where the freed pages come straight back from the CPU's page lists,
// hot in its cache. Near GOMEMLIMIT the runtime does it differently: the allocator returns free
// pages to the OS before it grows the heap (mheap.allocSpan -> pageAlloc.scavenge, and the
// background scavenger, src/runtime/mgcscavenge.go), in runs as long as it finds free, between GC
// cycles that sweep and reuse the spans, and the next allocation faults each page in again and the
// kernel zeroes it (do_anonymous_page -> clear_page). This bench runs that cycle itself:
// GOMAXPROCS=1, a live heap of pointerful 64-byte nodes (the lab workload's, lab/cmd/workload/heap.go),
// and a loop of records of short-lived 1 KiB buffers (lab/internal/garbage, the workload's garbage),
// in two modes each round:
//
//   - "reference": GOGC 100 and no memory limit; the heap settles and its pages are reused;
//   - "limit": GOGC off and GOMEMLIMIT = ratio x the live heap (the lab's grids use 1.1).
//
// Per mode it reports the records, the page faults (getrusage ru_minflt), the process's system and
// user CPU (ru_stime, ru_utime), the runtime's own /cpu/classes (user, GC, scavenge) and GC cycles.
// What a page costs is the difference between the modes over the pages the limit faults in again:
// the kernel's CPU beyond the reference's, less the scavenger's time (which holds the madvise
// calls), per extra fault; and the scavenger's time per extra fault (in steady state each page
// released is faulted in again once).
//
// Run: scavbench [-live-mib 16] [-ratio 1.1] [-record-kib 64] [-seconds 4] [-rounds 3];
// one JSON line per round and mode.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"syscall"
	"time"

	"github.com/cfsim/cfsim/lab/internal/garbage"
)

// node is the workload's live-heap object: pointerful, so the GC scans it.
type node struct {
	left, right *node
	vals        [6]uint64
}

var live []*node

func buildLive(mib float64) {
	n := int(mib * (1 << 20) / (64 + 8))
	live = make([]*node, n)
	for i := range live {
		live[i] = &node{vals: [6]uint64{uint64(i)}}
	}
	for i := range live {
		if l := 2*i + 1; l < n {
			live[i].left = live[l]
		}
		live[i].right = live[(i*7919)%n]
	}
}

var sampleNames = []string{
	"/cpu/classes/user:cpu-seconds", "/cpu/classes/gc/total:cpu-seconds",
	"/cpu/classes/scavenge/total:cpu-seconds", "/gc/cycles/total:gc-cycles",
}

type snap struct {
	utime, stime   float64 // s
	minflt         int64
	user, gc, scav float64 // s
	cycles         uint64
	wall           time.Time
}

func take() snap {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	s := make([]metrics.Sample, len(sampleNames))
	for i, n := range sampleNames {
		s[i].Name = n
	}
	metrics.Read(s)
	return snap{
		utime: float64(ru.Utime.Nano()) / 1e9, stime: float64(ru.Stime.Nano()) / 1e9, minflt: ru.Minflt,
		user: s[0].Value.Float64(), gc: s[1].Value.Float64(), scav: s[2].Value.Float64(),
		cycles: s[3].Value.Uint64(), wall: time.Now(),
	}
}

type result struct {
	Round          int     `json:"round"`
	Mode           string  `json:"mode"`
	Records        int     `json:"records"`
	WallS          float64 `json:"wall_s"`
	FaultsPerRec   float64 `json:"faults_per_record"`
	StimeUsPerRec  float64 `json:"stime_us_per_record"`
	UtimeUsPerRec  float64 `json:"utime_us_per_record"`
	UserUsPerRec   float64 `json:"user_us_per_record"`
	GCUsPerRec     float64 `json:"gc_us_per_record"`
	ScavUsPerRec   float64 `json:"scavenge_us_per_record"`
	CyclesPerKRec  float64 `json:"gc_cycles_per_1000_records"`
	GomemlimitByte int64   `json:"gomemlimit_bytes"`
}

// run churns records for about seconds (after a warm-up of a quarter of that) and reports.
func run(round int, mode string, recordKiB int, seconds float64) result {
	warm := time.Now().Add(time.Duration(seconds / 4 * float64(time.Second)))
	for time.Now().Before(warm) {
		garbage.Churn(recordKiB)
	}
	a := take()
	end := a.wall.Add(time.Duration(seconds * float64(time.Second)))
	n := 0
	for {
		for i := 0; i < 64; i++ {
			garbage.Churn(recordKiB)
		}
		n += 64
		if !time.Now().Before(end) {
			break
		}
	}
	b := take()
	per := func(x float64) float64 { return x / float64(n) * 1e6 }
	return result{
		Round: round, Mode: mode, Records: n, WallS: b.wall.Sub(a.wall).Seconds(),
		FaultsPerRec:  float64(b.minflt-a.minflt) / float64(n),
		StimeUsPerRec: per(b.stime - a.stime), UtimeUsPerRec: per(b.utime - a.utime),
		UserUsPerRec: per(b.user - a.user), GCUsPerRec: per(b.gc - a.gc), ScavUsPerRec: per(b.scav - a.scav),
		CyclesPerKRec:  float64(b.cycles-a.cycles) / float64(n) * 1000,
		GomemlimitByte: debug.SetMemoryLimit(-1),
	}
}

func main() {
	liveMiB := flag.Float64("live-mib", 16, "live heap [MiB]")
	ratio := flag.Float64("ratio", 1.1, "GOMEMLIMIT over the live heap in the limit mode")
	recordKiB := flag.Int("record-kib", 64, "garbage a record [KiB], in 1 KiB buffers")
	seconds := flag.Float64("seconds", 4, "measured seconds a mode (after a quarter of that to warm up)")
	rounds := flag.Int("rounds", 3, "rounds, each both modes")
	flag.Parse()
	if *liveMiB <= 0 || *ratio <= 1 || *recordKiB <= 0 || *seconds <= 0 || *rounds <= 0 {
		fmt.Fprintln(os.Stderr, "scavbench: -live-mib, -record-kib, -seconds, -rounds must be > 0 and -ratio > 1")
		os.Exit(2)
	}
	runtime.GOMAXPROCS(1)
	buildLive(*liveMiB)
	runtime.GC()
	enc := json.NewEncoder(os.Stdout)
	limit := int64(*ratio * *liveMiB * (1 << 20))
	for r := 0; r < *rounds; r++ {
		debug.SetMemoryLimit(1<<63 - 1)
		debug.SetGCPercent(100)
		runtime.GC()
		if err := enc.Encode(run(r, "reference", *recordKiB, *seconds)); err != nil {
			panic(err)
		}
		debug.SetGCPercent(-1)
		debug.SetMemoryLimit(limit)
		if err := enc.Encode(run(r, "limit", *recordKiB, *seconds)); err != nil {
			panic(err)
		}
	}
	runtime.KeepAlive(live)
}
