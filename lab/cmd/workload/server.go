package main

import (
	"net/http"
	"strconv"
	"sync"
	"time"
)

// handlerTimesHeader carries the handler's entry and exit (Unix ns, the host's one clock) back
// to the load generator on the same host, which splits its latency into the way in (its send to
// the handler's entry: connection, socket, netpoll, scheduling) and the way out (the handler's
// exit to its own read of the response).
const handlerTimesHeader = "X-Cfsim-Handler-Unix-Ns"

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
		w.Header().Set(handlerTimesHeader, strconv.FormatInt(start.UnixNano(), 10)+" "+strconv.FormatInt(end.UnixNano(), 10))
		w.Write([]byte("ok\n"))
	}
}
