// Command loadgen runs outside the workload's cgroup and drives its /work endpoint:
// closed mode is k6-style virtual users (request, wait for the response, think, repeat);
// open mode sends at a rate (Poisson or fixed spacing) whatever the server's state.
// Client-side latency (which includes waiting while the server is throttled) is exported
// on its own /metrics.
package main

import (
	"context"
	"flag"
	"io"
	"log"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cfsim/cfsim/lab/internal/handlertimes"
	"github.com/cfsim/cfsim/lab/internal/metricsx"
	"github.com/cfsim/cfsim/lab/internal/rate"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

type loadMetrics struct {
	latency  prometheus.Histogram
	requests prometheus.Counter
	errors   prometheus.Counter
	dropped  prometheus.Counter
	inFlight prometheus.Gauge
	sendLag  prometheus.Histogram
	wayIn    prometheus.Histogram
	wayOut   prometheus.Histogram
	newConns prometheus.Counter
}

func newMetrics(reg *prometheus.Registry) *loadMetrics {
	m := &loadMetrics{
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "cfsim_loadgen_request_duration_seconds", Help: "Client-side request latency.",
			Buckets: metricsx.LatencyBuckets()}),
		requests: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cfsim_loadgen_requests_total", Help: "Requests completed successfully."}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cfsim_loadgen_errors_total", Help: "Requests that failed."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cfsim_loadgen_dropped_total", Help: "Open-loop arrivals not sent because max in-flight was reached."}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cfsim_loadgen_in_flight_requests", Help: "Requests sent and not yet answered."}),
		sendLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "cfsim_loadgen_send_lag_seconds",
			Help:    "Open loop: how late each request left against its scheduled arrival (the generator keeping up).",
			Buckets: metricsx.LatencyBuckets()}),
	}
	m.wayIn = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "cfsim_loadgen_way_in_seconds",
		Help: "From the request's start here to the server handler's entry (connection, socket, the server's netpoll " +
			"and scheduling); from the workload's handler-times header, same host, same clock.",
		Buckets: metricsx.LatencyBuckets()})
	m.wayOut = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "cfsim_loadgen_way_out_seconds",
		Help:    "From the server handler's exit to the end of this generator's read of the response.",
		Buckets: metricsx.LatencyBuckets()})
	m.newConns = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "cfsim_loadgen_new_connections_total", Help: "Requests that had to open a new TCP connection."})
	reg.MustRegister(m.latency, m.requests, m.errors, m.dropped, m.inFlight, m.sendLag, m.wayIn, m.wayOut, m.newConns)
	// the generator's own CPU (process_cpu_seconds_total): it runs in the harness cgroup, and
	// client-side latency is only the server's if the generator is not the bottleneck
	reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func do(ctx context.Context, client *http.Client, url string, m *loadMetrics) {
	m.inFlight.Inc()
	defer m.inFlight.Dec()
	start := time.Now()
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		if !info.Reused {
			m.newConns.Inc()
		}
	}}
	req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodGet, url, nil)
	resp, err := client.Do(req)
	handler := ""
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		handler = resp.Header.Get(handlertimes.Header)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = io.ErrUnexpectedEOF
		}
	}
	if err != nil {
		if ctx.Err() == nil {
			m.errors.Inc()
		}
		return
	}
	end := time.Now()
	m.latency.Observe(end.Sub(start).Seconds())
	m.requests.Inc()
	if entry, exit, ok := handlertimes.Parse(handler); ok {
		m.wayIn.Observe(max(0, float64(entry-start.UnixNano())/1e9))
		m.wayOut.Observe(max(0, float64(end.UnixNano()-exit)/1e9))
	}
}

func closedLoop(ctx context.Context, client *http.Client, url string, clients int, thinkMs float64, m *loadMetrics) {
	for i := 0; i < clients; i++ {
		go func() {
			for ctx.Err() == nil {
				do(ctx, client, url, m)
				if thinkMs > 0 {
					time.Sleep(time.Duration(thinkMs * float64(time.Millisecond)))
				}
			}
		}()
	}
}

// openLoop sends arrival k at the schedule's k-th arrival time (fixed) or after exponential
// gaps at the current rate (poisson); each request gets its own goroutine.
func openLoop(ctx context.Context, client *http.Client, url string, sched *rate.Schedule, poisson bool,
	maxInFlight int64, rng *rand.Rand, m *loadMetrics) {
	var inFlight atomic.Int64
	t0 := time.Now()
	next := 0.0
	for k := 1; ctx.Err() == nil; k++ {
		if poisson {
			r := sched.At(next)
			for r <= 0 { // idle step: jump to the next second and look again
				next = float64(int(next) + 1)
				r = sched.At(next)
				if next > 1e7 {
					return
				}
			}
			next += rng.ExpFloat64() / r
		} else {
			next = sched.ArrivalS(float64(k))
		}
		due := t0.Add(time.Duration(next * float64(time.Second)))
		time.Sleep(time.Until(due))
		if inFlight.Load() >= maxInFlight {
			m.dropped.Inc()
			continue
		}
		inFlight.Add(1)
		go func() {
			defer inFlight.Add(-1)
			m.sendLag.Observe(max(0, time.Since(due).Seconds()))
			do(ctx, client, url, m)
		}()
	}
}

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	url := flag.String("url", "http://127.0.0.1:8080/work", "workload endpoint")
	listen := flag.String("listen", "127.0.0.1:0", "address for this generator's /metrics")
	mode := flag.String("mode", "closed", "closed | open")
	clients := flag.Int("clients", 2, "virtual users (closed)")
	thinkMs := flag.Float64("think-ms", 0, "think time between a response and the next request [ms] (closed)")
	rateText := flag.String("rate", "100", "arrival rate [1/s]: number or JSON [[t_s, rate], ...] (open)")
	arrivals := flag.String("arrivals", "poisson", "poisson | fixed (open)")
	durationS := flag.Float64("duration-s", 0, "stop after this long; 0 = until killed")
	maxInFlight := flag.Int64("max-in-flight", 10000, "open mode: arrivals beyond this are dropped and counted")
	maxConns := flag.Int("max-conns", 1024, "TCP connections to the workload at most; further requests wait for one "+
		"(without a cap a stalled server made the generator open connections until it ran out of file descriptors)")
	seed := flag.Uint64("seed", 0, "random seed")
	flag.Parse()

	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	// the load starts on POST /start, so the harness can have Prometheus scrape this process
	// before t=0 and start the workload and the load at the same instant
	startCh := make(chan struct{})
	var startOnce sync.Once
	go func() {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("/start", func(w http.ResponseWriter, r *http.Request) {
			startOnce.Do(func() { close(startCh) })
			w.Write([]byte("started\n"))
		})
		log.Fatal(http.ListenAndServe(*listen, mux))
	}()
	<-startCh

	ctx := context.Background()
	if *durationS > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(*durationS*float64(time.Second)))
		defer cancel()
	}
	// every connection opened is kept (keep-alive): the server holds as many as the peak of
	// requests in flight, up to the cap; 0 = no cap (an idle limit of 0 would mean Go's default, 2)
	idle := *maxConns
	if idle <= 0 {
		idle = math.MaxInt32
	}
	client := &http.Client{
		Timeout: 120 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: idle, MaxIdleConns: idle, MaxConnsPerHost: max(*maxConns, 0),
			DisableCompression: true},
	}
	switch *mode {
	case "closed":
		closedLoop(ctx, client, *url, *clients, *thinkMs, m)
	case "open":
		sched, err := rate.Parse(*rateText)
		if err != nil {
			log.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(*seed, 0x5851f42d4c957f2d))
		go openLoop(ctx, client, *url, sched, *arrivals == "poisson", *maxInFlight, rng, m)
	default:
		log.Fatalf("unknown -mode %q", *mode)
	}
	<-ctx.Done()
}
