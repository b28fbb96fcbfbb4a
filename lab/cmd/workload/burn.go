package main

import (
	"runtime"
	"sort"
	"syscall"
	"time"

	"github.com/cfsim/cfsim/lab/internal/spin"
)

// rusageThread is RUSAGE_THREAD (linux/resource.h); the syscall package does not name it.
const rusageThread = 1

func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// calibrate measures spin rounds per CPU-millisecond in this thread's CPU time. Thread CPU time
// does not advance while the thread is throttled or preempted, so the result is the same under
// any quota; the median of several rounds rejects SMT/cache disturbances from other tenants.
func calibrate() float64 {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	n := int64(1 << 20)
	// grow the round until it takes >= 10 ms of CPU, so the 1 us (rusage) tick is negligible
	for {
		c0 := threadCPU()
		spin.Rounds(n)
		if d := threadCPU() - c0; d >= 10*time.Millisecond {
			break
		}
		n *= 2
	}
	rates := make([]float64, 0, 7)
	for i := 0; i < 7; i++ {
		c0 := threadCPU()
		spin.Rounds(n)
		d := threadCPU() - c0
		if d > 0 {
			rates = append(rates, float64(n)/(float64(d)/1e6))
		}
	}
	sort.Float64s(rates)
	return rates[len(rates)/2]
}

// burner turns CPU milliseconds into spin rounds using the start-up calibration.
type burner struct{ roundsPerCPUMs float64 }

func (b burner) burn(cpuMs float64) {
	if cpuMs > 0 {
		spin.Rounds(int64(cpuMs * b.roundsPerCPUMs))
	}
}
