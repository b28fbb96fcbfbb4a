package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"sync"
)

// watchGCLimiter writes, each time the finalizer goroutine runs after a GC cycle, the number of
// cycles the runtime has completed and the last cycle the GC CPU limiter was turned on in
// (/gc/limiter/last-enabled:gc-cycle: mgclimit.go stores numgc+1 when the limiter turns on, so
// the cycle under way, or the next one between cycles). gctrace says how each cycle ran but not
// whether the limiter was on (and with it the assists off, mgcmark.go gcAssistAlloc); reading
// the limiter once a cycle tells in which cycles it turned on and in which it cannot have
// (cfsim.io.gctrace.limiter_turned_on). A finalizer on a sentinel re-armed each time runs once
// the sweep after a cycle frees the sentinel: no timer and no extra wake-ups. The lines go to
// their own file, not stderr, where they could split a gctrace line the runtime writes in pieces.
func watchGCLimiter(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 64<<10)
	var mu sync.Mutex
	samples := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/gc/limiter/last-enabled:gc-cycle"}}
	var arm func()
	arm = func() {
		// 64 bytes: above the tiny allocator's 16, whose shared blocks may never be freed
		sentinel := new([64]byte)
		runtime.SetFinalizer(sentinel, func(*[64]byte) {
			metrics.Read(samples)
			mu.Lock()
			fmt.Fprintf(w, "gcs=%d last-enabled=%d\n", samples[0].Value.Uint64(), samples[1].Value.Uint64())
			w.Flush()
			mu.Unlock()
			arm()
		})
	}
	arm()
	return nil
}
