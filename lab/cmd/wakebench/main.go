// wakebench measures the kernel's CPU for one block-and-wake cycle of a thread: the blocking
// system call, the switch out to another task or the idle loop, the timer that ends the sleep,
// the switch back in and the return to user space. All of it is charged to the thread (its
// CLOCK_THREAD_CPUTIME_ID, the cgroup's usage), none of it is the program's own work, and on a
// virtual machine it is large (timer and halt exits). The model's host.wakeup_us comes from it
// (src/cfsim/scenario/schema.py).
//
// One OS thread (runtime.LockOSThread) alternates a fixed busy loop with a nanosleep made with
// syscall.RawSyscall, so the Go scheduler never sees the sleep (no P hand-off, no sysmon wake):
// the thread's CPU outside the busy loop, per cycle, is the kernel's cost of the cycle. It is
// measured for sleeps from 50 us (sysmon's polls) to 50 ms (an idle service between requests)
// and reported as JSON lines, one per sleep length and round. Then two locked threads on
// different CPUs measure how long a thread blocked in futex_wait takes to run after another
// thread's futex_wake while its CPU was idle (the wake-up latency: an inter-processor interrupt
// and the idle CPU's exit from halt; on a virtual machine both exit to the hypervisor), one JSON
// line per round with "kind": "futex_wake":
//
//	wakebench [-rounds 3] [-busy-us 400]
//
// The program re-executes itself with GODEBUG=asyncpreemptoff=1: to the Go scheduler the
// sleeping goroutine is running, and after 10 ms sysmon would interrupt the sleep with a
// preemption signal (SIGURG), cutting it short and adding the signal's own cost.
package main

import (
	"encoding/json"
	"flag"
	"os"
	"runtime"
	"sort"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/cfsim/cfsim/lab/internal/noasyncpreempt"
	"github.com/cfsim/cfsim/lab/internal/spin"
)

// threadCPUns is this thread's CPU time (CLOCK_THREAD_CPUTIME_ID = 3), read with a raw call.
func threadCPUns() int64 {
	var ts syscall.Timespec
	syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, 3, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}

// rawSleep blocks the thread in the kernel without telling the Go scheduler.
func rawSleep(d time.Duration) {
	ts := syscall.NsecToTimespec(d.Nanoseconds())
	syscall.RawSyscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
}

type latency struct {
	Kind      string  `json:"kind"`
	Round     int     `json:"round"`
	Wakes     int     `json:"wakes"`
	P10Us     float64 `json:"latency_us_p10"`
	MedianUs  float64 `json:"latency_us_median"`
	P90Us     float64 `json:"latency_us_p90"`
	WakerCPU  int     `json:"waker_cpu"`
	WakeeCPU  int     `json:"wakee_cpu"`
	IdleGapUs float64 `json:"idle_gap_us"`
}

// pin puts the calling (locked) thread on one CPU.
func pin(cpu int) error {
	var mask [16]uint64
	mask[cpu/64] |= 1 << (cpu % 64)
	_, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_SETAFFINITY, 0, uintptr(len(mask)*8),
		uintptr(unsafe.Pointer(&mask[0])))
	if errno != 0 {
		return errno
	}
	return nil
}

const futexWaitPrivate, futexWakePrivate = 128, 129 // FUTEX_WAIT|FUTEX_PRIVATE_FLAG, FUTEX_WAKE|...

func monoNs() int64 {
	var ts syscall.Timespec
	syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, 1, uintptr(unsafe.Pointer(&ts)), 0) // CLOCK_MONOTONIC
	return ts.Nano()
}

// futexLatency wakes a thread blocked in futex_wait on CPU 1 from CPU 0, after letting CPU 1
// idle for gap, n times; returns the wake-to-run latencies [us], sorted.
func futexLatency(n int, gap time.Duration) ([]float64, error) {
	var word, woke uint32
	var ranAt int64
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := pin(1); err != nil {
			ready <- err
			return
		}
		ready <- nil
		for i := 0; i < n; i++ {
			for atomic.LoadUint32(&word) == 0 {
				syscall.RawSyscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(&word)), futexWaitPrivate, 0, 0, 0, 0)
			}
			atomic.StoreInt64(&ranAt, monoNs())
			atomic.StoreUint32(&word, 0)
			atomic.StoreUint32(&woke, 1)
		}
	}()
	if err := <-ready; err != nil {
		return nil, err
	}
	if err := pin(0); err != nil {
		return nil, err
	}
	lat := make([]float64, 0, n)
	for i := 0; i < n; i++ {
		rawSleep(gap) // the wakee blocks meanwhile and its CPU goes idle
		atomic.StoreUint32(&woke, 0)
		t0 := monoNs()
		atomic.StoreUint32(&word, 1)
		syscall.RawSyscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(&word)), futexWakePrivate, 1, 0, 0, 0)
		for atomic.LoadUint32(&woke) == 0 {
		}
		lat = append(lat, float64(atomic.LoadInt64(&ranAt)-t0)/1e3)
	}
	sort.Float64s(lat)
	return lat, nil
}

type result struct {
	Round          int     `json:"round"`
	SleepUs        float64 `json:"sleep_us"`
	Cycles         int     `json:"cycles"`
	BusyUs         float64 `json:"busy_cpu_us_mean"`
	CycleUs        float64 `json:"cycle_cpu_us_mean"`
	CycleUsMedian  float64 `json:"cycle_cpu_us_median"`
	WallPerCycleUs float64 `json:"wall_us_per_cycle"`
}

func main() {
	rounds := flag.Int("rounds", 3, "rounds over all sleep lengths")
	busyUs := flag.Float64("busy-us", 400, "busy loop between sleeps [us of CPU, roughly]")
	flag.Parse()
	if err := noasyncpreempt.Ensure(); err != nil {
		panic(err)
	}
	runtime.LockOSThread()

	// rounds of spin per microsecond of this thread's CPU
	n := int64(1 << 20)
	c0 := threadCPUns()
	spin.Rounds(n)
	perUs := float64(n) / (float64(threadCPUns()-c0) / 1e3)
	busy := int64(*busyUs * perUs)

	sleeps := []float64{50, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000}
	enc := json.NewEncoder(os.Stdout)
	defer func() {
		if runtime.NumCPU() < 2 {
			return // one CPU: no idle CPU to wake a thread on
		}
		for r := 0; r < *rounds; r++ {
			const gap = 500 * time.Microsecond
			lat, err := futexLatency(1000, gap)
			if err != nil {
				panic(err)
			}
			n := len(lat)
			enc.Encode(latency{Kind: "futex_wake", Round: r, Wakes: n, P10Us: lat[n/10], MedianUs: lat[n/2],
				P90Us: lat[n*9/10], WakerCPU: 0, WakeeCPU: 1, IdleGapUs: float64(gap.Microseconds())})
		}
	}()
	for r := 0; r < *rounds; r++ {
		for _, s := range sleeps {
			cycles := int(2e6 / (s + *busyUs)) // about 2 s per length
			if cycles > 1000 {
				cycles = 1000
			}
			if cycles < 40 {
				cycles = 40
			}
			outside := make([]float64, cycles)
			var busySum float64
			w0 := time.Now()
			for i := 0; i < cycles; i++ {
				a := threadCPUns()
				rawSleep(time.Duration(s * 1e3))
				b := threadCPUns()
				spin.Rounds(busy)
				c := threadCPUns()
				outside[i] = float64(b-a) / 1e3
				busySum += float64(c-b) / 1e3
			}
			wall := time.Since(w0)
			var sum float64
			for _, v := range outside {
				sum += v
			}
			sort.Float64s(outside)
			enc.Encode(result{Round: r, SleepUs: s, Cycles: cycles, BusyUs: busySum / float64(cycles),
				CycleUs: sum / float64(cycles), CycleUsMedian: outside[cycles/2],
				WallPerCycleUs: float64(wall.Microseconds()) / float64(cycles)})
		}
	}
}
