// faultbench measures the kernel's CPU for a page fault on anonymous memory (first touch and
// after MADV_DONTNEED) and for releasing pages with madvise in 64 KiB runs as the Go scavenger
// does (go.page_fault_us, go.page_release_us in src/cfsim/scenario/schema.py).
//
// Each round runs twice: alone, and with a second thread of the process spinning on another CPU
// ("busy"). In the busy run the address space is live on two CPUs, so each release must flush the
// other CPU's TLB with an inter-processor interrupt (arch/x86/mm/tlb.c: flush_tlb_mm_range ->
// native_flush_tlb_multi; a CPU that runs no thread of the process is skipped), as when the Go
// scavenger releases memory while other Ms run. The flushes are counted on every CPU ("TLB" in
// /proc/interrupts) and the spinner's progress tells what the interrupts cost the CPU they hit.
// `cfsim lab tlb` runs it and turns the rounds into host.tlb_shootdown_us (src/cfsim/lab/tlb.py).
//
// Run: faultbench [-rounds 3] [-mib 256]; one JSON line per round and mode.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cfsim/cfsim/lab/internal/spin"
)

const (
	page = 4096
	run  = 64 << 10 // the scavenger's quantum (mgcscavenge.go scavengeQuantum)
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

// pin binds the calling OS thread to one CPU, so the releasing thread and the spinner never share
// a CPU (the kernel may otherwise place a new thread beside the other, and no flush is needed).
func pin(cpu int) {
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		fmt.Fprintln(os.Stderr, "faultbench: sched_setaffinity:", err)
		os.Exit(1)
	}
}

// spinner keeps one locked OS thread busy and counts its batches of work.
type spinner struct {
	stop    atomic.Bool
	batches atomic.Int64
	done    chan struct{}
}

func startSpinner() *spinner {
	s := &spinner{done: make(chan struct{})}
	go func() {
		runtime.LockOSThread()
		pin(1)
		for !s.stop.Load() {
			spin.Rounds(10000)
			s.batches.Add(1)
		}
		close(s.done)
	}()
	time.Sleep(10 * time.Millisecond)
	return s
}

// rate is the spinner's batches per second over d while the main thread sleeps.
func (s *spinner) rate(d time.Duration) float64 {
	b0, t0 := s.batches.Load(), time.Now()
	time.Sleep(d)
	return float64(s.batches.Load()-b0) / time.Since(t0).Seconds()
}

type result struct {
	Round                 int     `json:"round"`
	Busy                  bool    `json:"busy"`
	FaultUsPerPage        float64 `json:"fault_us_per_page"`
	RefaultUsPerPage      float64 `json:"refault_us_per_page"`
	ReleaseUsPerPage      float64 `json:"release_us_per_page"`
	ReleaseUs             float64 `json:"release_us"`
	FlushesPerRelease     float64 `json:"flushes_per_release"`
	OtherLostUsPerRelease float64 `json:"other_lost_us_per_release"`
}

func measure(b []byte, round int, busy bool) result {
	var sp *spinner
	if busy {
		sp = startSpinner()
		defer func() { sp.stop.Store(true); <-sp.done }()
	}
	size := len(b)
	syscall.Madvise(b, 4) // start from released memory: the first touch below faults every page
	t0 := time.Now()
	for i := 0; i < size; i += page {
		b[i] = 1
	}
	t1 := time.Now()
	syscall.Madvise(b, 4)
	t2 := time.Now()
	for i := 0; i < size; i += page {
		b[i] = 2
	}
	t3 := time.Now()
	var b0, b1 int64
	if sp != nil {
		b0 = sp.batches.Load()
	}
	s0, t4 := tlbShootdowns(), time.Now()
	for i := 0; i < size; i += run {
		syscall.Madvise(b[i:i+run], 4)
	}
	t5, s1 := time.Now(), tlbShootdowns()
	if sp != nil {
		b1 = sp.batches.Load()
	}
	pages := float64(size / page)
	releases := float64(size / run)
	r := result{Round: round, Busy: busy,
		FaultUsPerPage:    float64(t1.Sub(t0).Nanoseconds()) / pages / 1e3,
		RefaultUsPerPage:  float64(t3.Sub(t2).Nanoseconds()) / pages / 1e3,
		ReleaseUsPerPage:  float64(t5.Sub(t4).Nanoseconds()) / pages / 1e3,
		ReleaseUs:         float64(t5.Sub(t4).Nanoseconds()) / releases / 1e3,
		FlushesPerRelease: float64(s1-s0) / releases}
	if sp != nil {
		// the spinner's rate during the releases against its rate alone just after
		alone := sp.rate(t5.Sub(t4))
		during := float64(b1-b0) / t5.Sub(t4).Seconds()
		r.OtherLostUsPerRelease = (1 - during/alone) * t5.Sub(t4).Seconds() * 1e6 / releases
	}
	return r
}

func main() {
	rounds := flag.Int("rounds", 3, "rounds; each measures alone and with a second thread busy")
	mib := flag.Int("mib", 256, "memory mapped, faulted and released per measurement [MiB]")
	flag.Parse()
	if *rounds < 1 || *mib < 1 {
		fmt.Fprintln(os.Stderr, "faultbench: -rounds and -mib must be >= 1")
		os.Exit(2)
	}
	if runtime.NumCPU() < 2 {
		fmt.Fprintln(os.Stderr, "faultbench: needs 2 CPUs (the releasing thread on one, the busy one on another)")
		os.Exit(2)
	}
	runtime.LockOSThread()
	pin(0)
	size := *mib << 20
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		fmt.Fprintln(os.Stderr, "faultbench: mmap:", err)
		os.Exit(1)
	}
	syscall.Madvise(b, 14) // MADV_NOHUGEPAGE: the Go heap's default on Linux for small chunks
	enc := json.NewEncoder(os.Stdout)
	for round := 0; round < *rounds; round++ {
		for _, busy := range []bool{false, true} {
			if err := enc.Encode(measure(b, round, busy)); err != nil {
				fmt.Fprintln(os.Stderr, "faultbench:", err)
				os.Exit(1)
			}
		}
	}
}
