// c2cbench measures how long a cache line takes to travel between two CPUs of this machine and
// back: two OS threads, each pinned to one CPU (sched_setaffinity), take turns writing one
// counter that sits alone on its cache line, each spinning until it sees the other's value.
// Every turn moves the line, modified, from one CPU's cache to the other's (the coherence
// protocol's cross-core transfer); a round trip is two transfers.
//
// On a virtual machine the guest's topology does not say where its vCPUs run: the lab's 2-vCPU VM
// reports one shared 32 MiB L3, yet two vCPUs on different dies (chiplets) or sockets pay the
// interconnect's latency for every line the other one wrote. Two CPUs marking the Go heap at once
// pass mark bits, work buffers and heap lines between them, so this is a candidate for the GC's
// extra cost at GOMAXPROCS >= 2 (docs/model-notes.md, "The CPUs marking at once"; the round trip
// before a run did not predict that cost in the lab's first pairs), and the lab records it with
// every run.
//
//	c2cbench [-rounds 3] [-trips 200000]
//
// One JSON line per round and pair of CPUs of the process's affinity mask:
//
//	{"round": 0, "cpu_a": 0, "cpu_b": 1, "trips": 200000, "round_trip_ns": 398.4}
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// line is one counter with a cache line of padding on each side, so no other data shares it.
type line struct {
	_ [64]byte
	v atomic.Int64
	_ [64]byte
}

type result struct {
	Round       int     `json:"round"`
	CPUA        int     `json:"cpu_a"`
	CPUB        int     `json:"cpu_b"`
	Trips       int     `json:"trips"`
	RoundTripNs float64 `json:"round_trip_ns"`
}

func pin(cpu int) error {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu)
	return unix.SchedSetaffinity(0, &set)
}

// pingPong returns the mean round trip of the line between CPUs a and b over trips round trips.
func pingPong(a, b, trips int) (time.Duration, error) {
	var l line
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	ready := make(chan struct{})
	var elapsed time.Duration
	wg.Add(2)
	go func() { // the responder on b: answers each odd value with the next even one
		defer wg.Done()
		defer runtime.UnlockOSThread()
		if err := pin(b); err != nil {
			errs <- fmt.Errorf("pin to CPU %d: %w", b, err)
			close(ready)
			return
		}
		close(ready)
		for i := int64(1); i < int64(2*trips); i += 2 {
			for {
				v := l.v.Load()
				if v == i {
					break
				}
				if v < 0 { // the initiator could not start
					return
				}
			}
			l.v.Store(i + 1)
		}
	}()
	go func() { // the initiator on a: writes an odd value, waits for the answer
		defer wg.Done()
		defer runtime.UnlockOSThread()
		if err := pin(a); err != nil {
			errs <- fmt.Errorf("pin to CPU %d: %w", a, err)
			l.v.Store(-1) // the responder stops waiting
			return
		}
		<-ready
		if len(errs) > 0 {
			return
		}
		t0 := time.Now()
		for i := int64(0); i < int64(2*trips); i += 2 {
			l.v.Store(i + 1)
			for l.v.Load() != i+2 {
			}
		}
		elapsed = time.Since(t0)
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		return 0, err
	}
	return elapsed, nil
}

func main() {
	rounds := flag.Int("rounds", 3, "measurements per pair of CPUs")
	trips := flag.Int("trips", 200000, "round trips per measurement")
	flag.Parse()
	var mask unix.CPUSet
	if err := unix.SchedGetaffinity(0, &mask); err != nil {
		fmt.Fprintln(os.Stderr, "c2cbench: sched_getaffinity:", err)
		os.Exit(1)
	}
	var cpus []int
	for c := 0; c < 1024; c++ {
		if mask.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) < 2 {
		fmt.Fprintf(os.Stderr, "c2cbench: needs two CPUs in the affinity mask, has %v\n", cpus)
		os.Exit(1)
	}
	runtime.GOMAXPROCS(len(cpus) + 1)
	enc := json.NewEncoder(os.Stdout)
	for r := 0; r < *rounds; r++ {
		for i, a := range cpus {
			for _, b := range cpus[i+1:] {
				d, err := pingPong(a, b, *trips)
				if err != nil {
					fmt.Fprintln(os.Stderr, "c2cbench:", err)
					os.Exit(1)
				}
				_ = enc.Encode(result{r, a, b, *trips, float64(d.Nanoseconds()) / float64(*trips)})
			}
		}
	}
}
