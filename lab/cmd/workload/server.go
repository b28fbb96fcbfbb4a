package main

import (
	"net/http"
	"sync"
	"time"

	"github.com/cfsim/cfsim/lab/internal/handlertimes"
)

// handleWork serves one request: fanout goroutines each burn cpu_ms_per_request/fanout and
// allocate alloc_kb_per_request/fanout, and the response waits for all of them (scatter-gather).
func handleWork(cfg *config, b burner, m *appMetrics) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		var wg sync.WaitGroup
		cpuMs := cfg.cpuMsPerRequest / float64(cfg.fanout)
		allocKB := cfg.allocKBPerRequest / float64(cfg.fanout)
		for i := 0; i < cfg.fanout; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				b.burn(cpuMs)
				churn(allocKB)
			}()
		}
		wg.Wait()
		end := time.Now()
		m.requestLatency.Observe(end.Sub(start).Seconds())
		m.requests.Inc()
		// the load generator splits its latency around the handler (lab/internal/handlertimes)
		w.Header().Set(handlertimes.Header, handlertimes.Format(start, end))
		w.Write([]byte("ok\n"))
	}
}
