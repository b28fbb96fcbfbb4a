// faultbench measures the kernel's CPU for a page fault on anonymous memory (first touch and
// after MADV_DONTNEED) and for releasing pages with madvise in 64 KiB runs as the Go scavenger
// does. The model's priors go.page_fault_us and go.page_release_us come from it
// (src/cfsim/scenario/schema.py). Run: faultbench (no arguments; maps 256 MiB).
package main

import (
	"fmt"
	"syscall"
	"time"
)

func main() {
	const size = 256 << 20
	const page = 4096
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
		for i := 0; i < size; i += 64 << 10 {
			syscall.Madvise(b[i:i+64<<10], 4)
		}
		t5 := time.Now()
		n := float64(size / page)
		fmt.Printf("fault %.2f us/page, touch %.3f, madvise-all %.3f us/page, refault %.2f, madvise-64K %.3f us/page\n",
			float64(t1.Sub(t0).Nanoseconds())/n/1e3, float64(t2.Sub(t1).Nanoseconds())/n/1e3,
			float64(t3.Sub(t2).Nanoseconds())/n/1e3, float64(t4.Sub(t3).Nanoseconds())/n/1e3, float64(t5.Sub(t4).Nanoseconds())/n/1e3)
	}
}
