package main

import (
	"math/rand/v2"
	"runtime"
	"time"
)

// runThreads starts cfg.threads OS threads (goroutines locked to threads), each burning
// burn_ms of CPU then sleeping sleep_ms, after a random start phase in [0, jitter_ms).
func runThreads(cfg *config, b burner, m *appMetrics, t0 time.Time, rng *rand.Rand) {
	warmupEnd := t0.Add(time.Duration(cfg.warmupS * float64(time.Second)))
	maxBurn := 0.0
	results := make(chan float64, 1024)
	for i := 0; i < cfg.threads; i++ {
		phase := time.Duration(rng.Float64() * cfg.jitterMs * float64(time.Millisecond))
		go func() {
			runtime.LockOSThread()
			time.Sleep(phase)
			for {
				start := time.Now()
				b.burn(cfg.burnMs)
				d := time.Since(start).Seconds()
				m.burnDuration.Observe(d)
				m.burns.Inc()
				if start.After(warmupEnd) {
					results <- d
				}
				if cfg.sleepMs > 0 {
					time.Sleep(time.Duration(cfg.sleepMs * float64(time.Millisecond)))
				}
			}
		}()
	}
	go func() {
		for d := range results {
			if d > maxBurn {
				maxBurn = d
				m.burnMax.Set(d)
			}
		}
	}()
}
