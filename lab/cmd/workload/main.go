// Command workload runs inside the CPU cgroup and implements the scenario's workload kinds
// (threads, stream, single-thread, closed and open server side) with the scenario's knobs.
//
// Start-up: apply the GOMAXPROCS policy, build the live heap, calibrate the busy loop in CPU
// time, then serve /metrics and /ready; the harness POSTs /start to begin the measured run,
// so set-up time never counts as backlog or latency.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/cfsim/cfsim/lab/internal/rate"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/automaxprocs/maxprocs"
)

type config struct {
	listen             string
	kind               string
	automaxprocs       bool
	round              string
	automemlimit       bool
	automemlimitRatio  float64
	threads            int
	burnMs             float64
	sleepMs            float64
	jitterMs           float64
	rate               string
	workers            int
	cpuMsPerItem       float64
	allocKBPerItem     float64
	initialBacklog     int64
	fanout             int
	cpuMsPerRequest    float64
	allocKBPerRequest  float64
	liveHeapMB         float64
	warmupS            float64
	gcLimiterLog       string
	seed               uint64
	readHeaderTimeoutS float64
}

func parseFlags() *config {
	c := &config{}
	flag.StringVar(&c.listen, "listen", "127.0.0.1:0", "address for /metrics, /ready, /start and /work")
	flag.StringVar(&c.kind, "kind", "stream", "threads | stream | single-thread | closed | open")
	flag.BoolVar(&c.automaxprocs, "automaxprocs", false, "call go.uber.org/automaxprocs maxprocs.Set at start-up")
	flag.StringVar(&c.round, "round", "floor", "automaxprocs rounding of quota/period: floor | ceil")
	flag.BoolVar(&c.automemlimit, "automemlimit", false,
		"call github.com/KimMachineGun/automemlimit memlimit.Set at start-up: GOMEMLIMIT = ratio x the cgroup memory limit")
	flag.Float64Var(&c.automemlimitRatio, "automemlimit-ratio", 0.9, "automemlimit ratio in (0, 1] (the library's default 0.9)")
	flag.IntVar(&c.threads, "threads", 4, "OS threads (kind=threads)")
	flag.Float64Var(&c.burnMs, "burn-ms", 10, "CPU per burn [ms] (kind=threads)")
	flag.Float64Var(&c.sleepMs, "sleep-ms", 0, "sleep between burns [ms] (kind=threads)")
	flag.Float64Var(&c.jitterMs, "jitter-ms", 0, "random start phase of each thread [ms] (kind=threads)")
	flag.StringVar(&c.rate, "rate", "1000", "arrival rate [1/s]: number or JSON [[t_s, rate], ...] (stream, single-thread)")
	flag.IntVar(&c.workers, "workers", 8, "worker goroutines (kind=stream)")
	flag.Float64Var(&c.cpuMsPerItem, "cpu-ms-per-item", 0.3, "CPU per record [ms]")
	flag.Float64Var(&c.allocKBPerItem, "alloc-kb-per-item", 4, "heap allocation per record [KiB]")
	flag.Int64Var(&c.initialBacklog, "initial-backlog", 0, "records waiting at start")
	flag.IntVar(&c.fanout, "fanout", 1, "goroutines per request (closed, open)")
	flag.Float64Var(&c.cpuMsPerRequest, "cpu-ms-per-request", 10, "CPU per request [ms] (closed, open)")
	flag.Float64Var(&c.allocKBPerRequest, "alloc-kb-per-request", 16, "heap allocation per request [KiB]")
	flag.Float64Var(&c.liveHeapMB, "live-heap-mb", 16, "pointerful live heap kept reachable [MiB]")
	flag.StringVar(&c.gcLimiterLog, "gc-limiter-log", "", "file for the GC CPU limiter's last-enabled cycle, read after each GC cycle")
	flag.Float64Var(&c.warmupS, "warmup-s", 0, "burns starting before this are left out of cfsim_burn_max_seconds")
	flag.Uint64Var(&c.seed, "seed", 0, "random seed")
	flag.Float64Var(&c.readHeaderTimeoutS, "read-header-timeout-s", 30,
		"http.Server ReadHeaderTimeout [s]; with one, net/http sets a read deadline before each request's header (a runtime timer); 0 = none")
	flag.Parse()
	switch c.kind {
	case "threads", "stream", "single-thread", "closed", "open":
	default:
		log.Fatalf("unknown -kind %q", c.kind)
	}
	if c.fanout < 1 || c.workers < 1 || c.threads < 1 {
		log.Fatal("-fanout, -workers and -threads must be >= 1")
	}
	return c
}

// applyMaxprocs implements the automaxprocs policy; the other policies are environment
// variables set by the harness (GOMAXPROCS=n, or GODEBUG for "host", nothing for "go1.25").
func applyMaxprocs(c *config) {
	if !c.automaxprocs {
		return
	}
	round := func(v float64) int { return int(math.Floor(v)) }
	if c.round == "ceil" {
		round = func(v float64) int { return int(math.Ceil(v)) }
	}
	// Set once, like the library's init(): it never follows later quota changes.
	if _, err := maxprocs.Set(maxprocs.Logger(log.Printf), maxprocs.RoundQuotaFunc(round)); err != nil {
		log.Printf("automaxprocs: %v", err)
	}
}

// applyMemlimit implements the automemlimit policy: the real library reads the cgroup's memory
// limit once at start-up (no refresh, as its default) and sets GOMEMLIMIT = ratio x limit; with
// no limit it sets none. An explicit GOMEMLIMIT is an environment variable set by the harness.
func applyMemlimit(c *config) {
	if !c.automemlimit {
		return
	}
	limit, err := memlimit.Set(memlimit.WithRatio(c.automemlimitRatio), memlimit.WithProvider(memlimit.FromCgroup))
	if err != nil {
		log.Printf("automemlimit: %v", err)
	}
	log.Printf("automemlimit: GOMEMLIMIT=%d (ratio %g)", limit, c.automemlimitRatio)
}

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	cfg := parseFlags()
	if cfg.gcLimiterLog != "" {
		if err := watchGCLimiter(cfg.gcLimiterLog); err != nil {
			log.Fatal(err)
		}
	}
	applyMaxprocs(cfg)
	applyMemlimit(cfg)
	rng := rand.New(rand.NewPCG(cfg.seed, 0x9e3779b97f4a7c15))
	sched, err := rate.Parse(cfg.rate)
	if err != nil {
		log.Fatal(err)
	}

	reg, m := newRegistry()
	nodes := buildLiveHeap(cfg.liveHeapMB, rng)
	roundsPerCPUMs := calibrate()
	heapWalk := heapWalkNs(liveHeap, 200_000, 5)
	b := burner{roundsPerCPUMs: roundsPerCPUMs}
	calib := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "cfsim_burn_calibration_rounds_per_cpu_ms",
		Help: "Busy-loop rounds per CPU millisecond, measured at start-up in thread CPU time."})
	calib.Set(roundsPerCPUMs)
	reg.MustRegister(calib)

	var started atomic.Bool
	var startOnce sync.Once
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	// CPU profiles on demand (lab.profile_s): GET /debug/pprof/profile?seconds=N
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	// execution traces on demand (which Ps sit idle, and why): GET /debug/pprof/trace?seconds=N
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/ready", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ready") })
	mux.HandleFunc("/info", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{
			"kind": cfg.kind, "gomaxprocs": runtime.GOMAXPROCS(0), "num_cpu": runtime.NumCPU(),
			"go_version": runtime.Version(), "calibration_rounds_per_cpu_ms": roundsPerCPUMs,
			"heap_walk_ns_per_hop": heapWalk, "live_heap_nodes": nodes, "started": started.Load(),
			"gomemlimit_bytes": debug.SetMemoryLimit(-1), "pid": os.Getpid(),
		})
	})
	mux.HandleFunc("/work", handleWork(cfg, b, m))
	mux.HandleFunc("/snapshot", newSnapshots(reg).handle)
	mux.HandleFunc("/start", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		startOnce.Do(func() {
			started.Store(true)
			switch cfg.kind {
			case "stream", "single-thread":
				newStream(sched, cfg.initialBacklog).start(cfg, b, m, reg)
			case "threads":
				runThreads(cfg, b, m, time.Now(), rng)
			}
		})
		fmt.Fprintln(w, "started")
	})
	info, _ := json.Marshal(map[string]any{
		"event": "ready", "gomaxprocs": runtime.GOMAXPROCS(0), "num_cpu": runtime.NumCPU(),
		"calibration_rounds_per_cpu_ms": roundsPerCPUMs, "heap_walk_ns_per_hop": heapWalk, "live_heap_nodes": nodes,
		"go_version": runtime.Version(), "gomemlimit_bytes": debug.SetMemoryLimit(-1), "pid": os.Getpid(),
	})
	fmt.Fprintln(os.Stdout, string(info))
	srv := &http.Server{Addr: cfg.listen, Handler: mux,
		ReadHeaderTimeout: time.Duration(cfg.readHeaderTimeoutS * float64(time.Second))}
	log.Fatal(srv.ListenAndServe())
}
