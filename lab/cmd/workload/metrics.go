package main

import (
	"github.com/cfsim/cfsim/lab/internal/metricsx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// appMetrics are the workload's own series; names carry units (Prometheus conventions).
type appMetrics struct {
	consumed       prometheus.Counter
	produced       prometheus.Counter
	itemLatency    prometheus.Histogram
	requests       prometheus.Counter
	requestLatency prometheus.Histogram
	burns          prometheus.Counter
	burnDuration   prometheus.Histogram
	burnMax        prometheus.Gauge
}

func newRegistry() (*labRegistry, *appMetrics) {
	reg := newLabRegistry()
	// MetricsAll exports every runtime/metrics series, including /cpu/classes/... and
	// /sched/gomaxprocs:threads, which the default collector leaves out.
	reg.MustRegister(
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsAll)),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		newRuntimeHistograms(),
	)
	b := metricsx.LatencyBuckets()
	m := &appMetrics{
		consumed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cfsim_records_consumed_total", Help: "Records taken and fully processed by workers."}),
		produced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cfsim_records_produced_total", Help: "Records that have arrived (including the initial backlog)."}),
		itemLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "cfsim_item_latency_seconds", Help: "Record arrival to end of processing.", Buckets: b}),
		requests: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cfsim_requests_total", Help: "Requests completed by the server."}),
		requestLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "cfsim_request_duration_seconds", Help: "Server-side request duration (handler entry to response).", Buckets: b}),
		burns: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cfsim_burns_total", Help: "Completed CPU burns (kind=threads)."}),
		burnDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "cfsim_burn_duration_seconds", Help: "Wall time of one burn of burn_ms CPU (kind=threads).", Buckets: b}),
		burnMax: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cfsim_burn_max_seconds", Help: "Longest burn started after the warm-up (kind=threads)."}),
	}
	reg.MustRegister(m.consumed, m.produced, m.itemLatency, m.requests, m.requestLatency,
		m.burns, m.burnDuration, m.burnMax)
	return reg, m
}
