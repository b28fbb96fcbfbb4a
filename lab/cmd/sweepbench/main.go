// sweepbench measures what sweeping costs per GC cycle: the runtime sweeps every span in use
// once a cycle (runtime/mgcsweep.go: sweepone, mspan.sweep; paid by allocating goroutines through
// deductSweepCredit and mcentral.cacheSpan, or by bgsweep on an idle P), so its CPU follows the
// number of cycles times the heap's pages, not the bytes allocated. It keeps a live heap of the
// lab workload's shape (64-byte pointerful nodes and a slice of them), allocates short-lived
// 1 KiB objects under a CPU profile, and prints one JSON line: the CPU of the samples whose stack
// sweeps a span (runtime.sweepone, (*sweepLocked).sweep, bgsweep), the cycles and the heap goal,
// so sweep CPU per cycle and per page of the goal follow; and the process's minor page faults
// and system CPU (getrusage), the in-situ price of a page fault when GOMEMLIMIT makes the
// scavenger release what the next cycle's allocation touches again.
//
//	GOGC=25 GOMAXPROCS=1 sweepbench -live-mb 16 -kb 16 -calls 200000
//	GOGC=off GOMEMLIMIT=32MiB GOMAXPROCS=1 sweepbench -live-mb 16 -kb 64 -calls 60000
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/cfsim/cfsim/lab/internal/garbage"
	"github.com/google/pprof/profile"
)

type node struct {
	left, right *node
	vals        [6]uint64
}

var live []*node

func main() {
	liveMB := flag.Float64("live-mb", 16, "pointerful live heap [MiB]")
	kb := flag.Int("kb", 16, "KiB of 1 KiB objects per call")
	calls := flag.Int("calls", 200000, "measured calls")
	profPath := flag.String("profile", "", "also write the measured window's CPU profile here")
	flag.Parse()
	n := int(*liveMB * (1 << 20) / 72)
	live = make([]*node, n)
	for i := range live {
		live[i] = &node{}
		if i > 0 {
			live[(i-1)/2].left = live[i]
		}
	}
	runtime.GC()
	for i := 0; i < *calls/10; i++ {
		garbage.Churn(*kb)
	}
	names := []string{"/cpu/classes/user:cpu-seconds", "/cpu/classes/gc/total:cpu-seconds",
		"/gc/cycles/total:gc-cycles", "/gc/heap/goal:bytes", "/gc/heap/allocs:bytes"}
	s := make([]metrics.Sample, len(names))
	for i, name := range names {
		s[i].Name = name
	}
	val := func(i int) float64 {
		if s[i].Value.Kind() == metrics.KindUint64 {
			return float64(s[i].Value.Uint64())
		}
		return s[i].Value.Float64()
	}
	runtime.GC()
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	metrics.Read(s)
	u0, g0, c0, a0 := val(0), val(1), val(2), val(4)
	var prof bytes.Buffer
	if err := pprof.StartCPUProfile(&prof); err != nil {
		fmt.Fprintln(os.Stderr, "sweepbench:", err)
		os.Exit(2)
	}
	t0 := time.Now()
	for i := 0; i < *calls; i++ {
		garbage.Churn(*kb)
	}
	wall := time.Since(t0)
	pprof.StopCPUProfile()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	metrics.Read(s) // no runtime.GC(): its sweep would not belong to the window
	out := map[string]any{
		"live_mb": *liveMB, "kb": *kb, "calls": *calls, "gogc": os.Getenv("GOGC"),
		"user_s": val(0) - u0, "gc_s": val(1) - g0, "cycles": val(2) - c0, "goal_bytes": val(3),
		"alloc_bytes": val(4) - a0, "wall_s": wall.Seconds(), "minor_faults": ru1.Minflt - ru0.Minflt,
		"sys_s": float64(ru1.Stime.Nano()-ru0.Stime.Nano()) / 1e9, "cpu_s": float64(ru1.Utime.Nano()-ru0.Utime.Nano()+ru1.Stime.Nano()-ru0.Stime.Nano()) / 1e9,
	}
	if *profPath != "" {
		if err := os.WriteFile(*profPath, prof.Bytes(), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "sweepbench:", err)
			os.Exit(2)
		}
	}
	p, err := profile.Parse(&prof)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sweepbench: reading its own profile:", err)
		os.Exit(2)
	}
	out["profile_s"], out["sweep_s"] = sweepCPU(p)
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
}

// sweepCPU returns the profile's CPU seconds and those of the samples that sweep a span.
func sweepCPU(p *profile.Profile) (total, sweep float64) {
	idx := len(p.SampleType) - 1 // cpu/nanoseconds is the last sample type of a Go CPU profile
	for _, s := range p.Sample {
		sec := float64(s.Value[idx]) / 1e9
		total += sec
	samples:
		for _, loc := range s.Location {
			for _, line := range loc.Line {
				if line.Function == nil {
					continue
				}
				n := line.Function.Name
				if n == "runtime.sweepone" || n == "runtime.bgsweep" || strings.HasSuffix(n, "(*sweepLocked).sweep") {
					sweep += sec
					break samples
				}
			}
		}
	}
	return total, sweep
}
