// faultbench measures the kernel's CPU for a page fault on anonymous memory (first touch and
// after MADV_DONTNEED) and for releasing pages with madvise in 64 KiB runs as the Go scavenger
// does. The model's priors go.page_fault_us and go.page_release_us come from it
// (src/cfsim/scenario/schema.py).
//
// With -busy, a second thread of the process spins on another CPU meanwhile: the address space
// is then live on two CPUs, so each release must flush the other CPU's TLB with an
// inter-processor interrupt (arch/x86/mm/tlb.c: flush_tlb_mm_range -> native_flush_tlb_multi;
// a CPU that runs no thread of the process is skipped), as when the Go scavenger releases memory
// while other Ms run. The shootdowns counted on every CPU ("TLB" in /proc/interrupts) are printed
// per release. Run: faultbench [-busy] (maps 256 MiB).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cfsim/cfsim/lab/internal/spin"
)

// tlbShootdowns sums the "TLB" row of /proc/interrupts over the CPUs (-1 if absent).
func tlbShootdowns() int64 {
	f, err := os.Open("/proc/interrupts")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || fields[0] != "TLB:" {
			continue
		}
		var n int64
		for _, v := range fields[1:] {
			c, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				break
			}
			n += c
		}
		return n
	}
	return -1
}

func main() {
	busy := flag.Bool("busy", false, "keep a second thread of the process spinning on another CPU")
	flag.Parse()
	const size = 256 << 20
	const page = 4096
	const run = 64 << 10
	var stop atomic.Bool
	var batches atomic.Int64 // the spinner's progress: what the flush interrupts cost the CPU they hit
	if *busy {
		go func() {
			runtime.LockOSThread()
			for !stop.Load() {
				spin.Rounds(10000)
				batches.Add(1)
			}
		}()
		time.Sleep(10 * time.Millisecond)
	}
	// the spinner's batches per second over d, while the main thread sleeps
	spinRate := func(d time.Duration) float64 {
		b0, t0 := batches.Load(), time.Now()
		time.Sleep(d)
		return float64(batches.Load()-b0) / time.Since(t0).Seconds()
	}
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		panic(err)
	}
	syscall.Madvise(b, 14) // MADV_NOHUGEPAGE: the Go heap's default on Linux for small chunks
	for round := 0; round < 4; round++ {
		t0 := time.Now()
		for i := 0; i < size; i += page {
			b[i] = 1
		}
		t1 := time.Now()
		for i := 0; i < size; i += page {
			b[i] = 2
		}
		t2 := time.Now()
		syscall.Madvise(b, 4) // MADV_DONTNEED
		t3 := time.Now()
		// release in 64 KiB chunks like the scavenger
		for i := 0; i < size; i += page {
			b[i] = 3
		}
		t4 := time.Now()
		s0, b0 := tlbShootdowns(), batches.Load()
		for i := 0; i < size; i += run {
			syscall.Madvise(b[i:i+run], 4)
		}
		t5 := time.Now()
		s1, b1 := tlbShootdowns(), batches.Load()
		n := float64(size / page)
		releases := float64(size / run)
		// the spinner's loss while the releases ran: its rate then against its rate alone, as
		// microseconds of its CPU per release
		lostUs := 0.0
		if *busy {
			alone := spinRate(t5.Sub(t4))
			during := float64(b1-b0) / t5.Sub(t4).Seconds()
			lostUs = (1 - during/alone) * t5.Sub(t4).Seconds() * 1e6 / releases
		}
		fmt.Printf("busy %v: fault %.2f us/page, touch %.3f, madvise-all %.3f us/page, refault %.2f, "+
			"madvise-64K %.3f us/page (%.2f us per release, %.2f TLB shootdowns per release, "+
			"%.2f us lost by the other CPU's thread per release)\n",
			*busy, float64(t1.Sub(t0).Nanoseconds())/n/1e3, float64(t2.Sub(t1).Nanoseconds())/n/1e3,
			float64(t3.Sub(t2).Nanoseconds())/n/1e3, float64(t4.Sub(t3).Nanoseconds())/n/1e3,
			float64(t5.Sub(t4).Nanoseconds())/n/1e3, float64(t5.Sub(t4).Nanoseconds())/releases/1e3,
			float64(s1-s0)/releases, lostUs)
	}
	stop.Store(true)
}
