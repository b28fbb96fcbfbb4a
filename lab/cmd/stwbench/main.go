// stwbench measures how long the Go runtime's stop-the-world pauses for the GC take on this host,
// split as the runtime itself splits them: the time to stop every P (/sched/pauses/stopping/gc)
// and the whole pause, from deciding to stop until the world runs again
// (/sched/pauses/total/gc), plus the pause time per cycle that debug.ReadGCStats and client_golang's
// go_gc_duration_seconds report (runtime.MemStats.PauseTotalNs over NumGC) -- the lab's
// gc_pause_total_s. The runtime's rules behind the split (src/runtime/proc.go,
// stopTheWorldWithSema and startTheWorldWithSema; src/runtime/mgc.go, gcStart and
// gcMarkTermination): idle Ps and Ps in a system call stop at once; a P running a goroutine is
// asked to stop (preemptall: an asynchronous preemption signal) and the coordinator sleeps on
// sched.stopnote (notetsleep, re-preempting every 100 us) until the last P to stop wakes it; the
// sweep-termination pause then also holds startTheWorldWithSema, which wakes an M (notewakeup) for
// every P with goroutines queued; the mark-termination pause ends before the world starts.
//
// The load: -workers goroutines that each allocate 1 KiB slices for about 200 us at a time and,
// with -busy below 1, sleep between bursts so that each runs that fraction of the time; a fixed
// live heap (-live-mb) keeps the GC's cycles alike. Set GOMAXPROCS in the environment. One JSON
// line:
//
//	GOMAXPROCS=8 stwbench [-workers 8] [-busy 1.0] [-dur 5s] [-live-mb 16] [-trace FILE]
//
// -trace writes the run's execution trace (runtime/trace), whose stop-the-world ranges
// cfsim.io.gotrace.StwPhases splits into stopping and restart and whose Ms that ran before the
// coordinator recorded the end show a coordinator that lost its CPU inside the pause.
//
// GODEBUG=gctrace=1 prints each cycle's two pauses apart (the first and last "clock" figures).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/trace"
	"sync"
	"sync/atomic"
	"time"
)

// keep makes some allocations escape and survive briefly, as a service's garbage does.
var keep atomic.Pointer[[]byte]

type result struct {
	Gomaxprocs      int     `json:"gomaxprocs"`
	CPUs            int     `json:"cpus"`
	Workers         int     `json:"workers"`
	Busy            float64 `json:"busy"`
	DurS            float64 `json:"dur_s"`
	Cycles          uint64  `json:"gc_cycles"`
	PausePerCycleUs float64 `json:"pause_per_cycle_us"`
	StoppingP50Us   float64 `json:"stopping_p50_us"`
	StoppingP90Us   float64 `json:"stopping_p90_us"`
	TotalP50Us      float64 `json:"total_p50_us"`
	TotalP90Us      float64 `json:"total_p90_us"`
	StoppingMeanUs  float64 `json:"stopping_mean_us"`
	TotalMeanUs     float64 `json:"total_mean_us"`
	StopTheWorldsGC uint64  `json:"stw_pauses"`
}

// quantile of a runtime/metrics histogram: the upper edge of the bucket the quantile falls in.
func quantile(h *metrics.Float64Histogram, q float64) float64 {
	var n uint64
	for _, c := range h.Counts {
		n += c
	}
	if n == 0 {
		return 0
	}
	var acc uint64
	for i, c := range h.Counts {
		acc += c
		if float64(acc) >= q*float64(n) {
			return h.Buckets[i+1]
		}
	}
	return h.Buckets[len(h.Buckets)-1]
}

// mean of a histogram from its buckets' midpoints (the open-ended ones at their finite edge).
func mean(h *metrics.Float64Histogram) (float64, uint64) {
	var n uint64
	var s float64
	for i, c := range h.Counts {
		lo, hi := h.Buckets[i], h.Buckets[i+1]
		mid := (lo + hi) / 2
		switch {
		case lo < -1e300:
			mid = hi
		case hi > 1e300:
			mid = lo
		}
		s += float64(c) * mid
		n += c
	}
	if n == 0 {
		return 0, 0
	}
	return s / float64(n), n
}

func main() {
	workers := flag.Int("workers", 8, "allocating goroutines")
	busy := flag.Float64("busy", 1.0, "fraction of the time each goroutine runs (0 < busy <= 1)")
	dur := flag.Duration("dur", 5*time.Second, "how long to run")
	liveMB := flag.Int("live-mb", 16, "live heap kept for the whole run [MiB]")
	traceFile := flag.String("trace", "", "write the run's execution trace to this file")
	flag.Parse()
	if *busy <= 0 || *busy > 1 || *workers < 1 || *dur <= 0 || *liveMB < 0 {
		fmt.Fprintln(os.Stderr, "stwbench: need 0 < -busy <= 1, -workers >= 1, -dur > 0, -live-mb >= 0")
		os.Exit(2)
	}
	if *traceFile != "" {
		f, err := os.Create(*traceFile)
		if err == nil {
			err = trace.Start(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "stwbench: -trace:", err)
			os.Exit(1)
		}
		defer func() { trace.Stop(); f.Close() }()
	}
	live := make([][]byte, 0, *liveMB*256)
	for i := 0; i < *liveMB*256; i++ {
		live = append(live, make([]byte, 4096))
	}
	const burst = 200 * time.Microsecond
	rest := time.Duration(float64(burst) * (1 / *busy - 1))
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := 0; w < *workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := 0
			for !stop.Load() {
				t0 := time.Now()
				for time.Since(t0) < burst {
					b := make([]byte, 1024)
					b[0] = byte(x)
					x++
					if x%64 == 0 {
						keep.Store(&b)
					}
				}
				if rest > 0 {
					time.Sleep(rest)
				}
			}
		}()
	}
	// the first cycles build the heap; measure from a settled start
	time.Sleep(200 * time.Millisecond)
	samples := []metrics.Sample{{Name: "/sched/pauses/stopping/gc:seconds"}, {Name: "/sched/pauses/total/gc:seconds"}}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	metrics.Read(samples)
	stop0 := samples[0].Value.Float64Histogram()
	total0 := samples[1].Value.Float64Histogram()
	time.Sleep(*dur)
	runtime.ReadMemStats(&m1)
	samples = []metrics.Sample{{Name: "/sched/pauses/stopping/gc:seconds"}, {Name: "/sched/pauses/total/gc:seconds"}}
	metrics.Read(samples)
	stop.Store(true)
	wg.Wait()
	stopping := diff(samples[0].Value.Float64Histogram(), stop0)
	total := diff(samples[1].Value.Float64Histogram(), total0)
	cycles := uint64(m1.NumGC - m0.NumGC)
	r := result{Gomaxprocs: runtime.GOMAXPROCS(0), CPUs: runtime.NumCPU(), Workers: *workers, Busy: *busy,
		DurS: dur.Seconds(), Cycles: cycles,
		StoppingP50Us: quantile(stopping, .5) * 1e6, StoppingP90Us: quantile(stopping, .9) * 1e6,
		TotalP50Us: quantile(total, .5) * 1e6, TotalP90Us: quantile(total, .9) * 1e6}
	if cycles > 0 {
		r.PausePerCycleUs = float64(m1.PauseTotalNs-m0.PauseTotalNs) / float64(cycles) / 1e3
	}
	sm, _ := mean(stopping)
	tm, n := mean(total)
	r.StoppingMeanUs, r.TotalMeanUs, r.StopTheWorldsGC = sm*1e6, tm*1e6, n
	_ = live
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		fmt.Fprintln(os.Stderr, "stwbench:", err)
		os.Exit(1)
	}
}

// diff returns the counts of b minus those of a (the same buckets: one process's histogram read twice).
func diff(b, a *metrics.Float64Histogram) *metrics.Float64Histogram {
	out := &metrics.Float64Histogram{Buckets: b.Buckets, Counts: make([]uint64, len(b.Counts))}
	for i := range b.Counts {
		out.Counts[i] = b.Counts[i] - a.Counts[i]
	}
	return out
}
