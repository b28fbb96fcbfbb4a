// Command profsplit reads a Go CPU profile (pprof protobuf, gzip or not) and splits its CPU
// time into user, scheduler and GC work by the runtime functions on each sample's stack, for
// the lab's manifest (lab.profile_s). Output: one JSON object on stdout.
//
// A sample is GC if any frame is a GC function (mark workers, assists, mark roots, sweep,
// STW phases), else scheduler if any frame is a scheduler function (schedule, findRunnable,
// stealWork, futex sleep/wake, stopm/startm/wakep, sysmon, netpoll, asynchronous preemption),
// else user (detail "user_alloc" when it is inside the allocator). Function names follow
// src/runtime/{proc.go,preempt.go,mgc.go,mgcmark.go,mgcsweep.go,mgcscavenge.go,malloc.go}.
//
// Samples whose leaf is runtime.asyncPreempt mostly carry the kernel time of delivering the
// preemption signal (a CPU-time profiling signal is delivered on the way back to user space, at
// the injected call): they count as scheduler.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/google/pprof/profile"
)

// category rules, checked in order; a frame matches by exact name or by prefix ("runtime.gcDrain"
// covers gcDrainN, gcDrainMarkWorkerDedicated, ...).
var rules = []struct {
	category string
	names    []string
}{
	{"gc_assist", []string{"runtime.gcAssistAlloc"}},
	{"gc_mark_worker", []string{"runtime.gcBgMarkWorker"}},
	{"gc_mark", []string{"runtime.gcDrain", "runtime.markroot", "runtime.scanobject", "runtime.scanstack",
		"runtime.scanblock", "runtime.greyobject", "runtime.gcMarkDone", "runtime.gcMarkTermination",
		"runtime.gcStart", "runtime.gcFlushBgCredit", "runtime.gcMark", "runtime.wbBufFlush", "runtime.bulkBarrierPreWrite"}},
	{"gc_sweep", []string{"runtime.bgsweep", "runtime.sweepone", "runtime.(*sweepLocked).sweep", "runtime.(*mspan).sweep",
		"runtime.deductSweepCredit", "runtime.(*sweepLocker)"}},
	{"gc_scavenge", []string{"runtime.bgscavenge", "runtime.(*scavengerState)", "runtime.(*pageAlloc).scavenge",
		"runtime.sysUnused"}},
	{"user_alloc", []string{"runtime.mallocgc", "runtime.newobject", "runtime.makeslice", "runtime.growslice",
		"runtime.(*mcache).refill", "runtime.(*mcentral)", "runtime.(*mheap).alloc", "runtime.memclrNoHeapPointers"}},
	{"scheduler", []string{"runtime.schedule", "runtime.findRunnable", "runtime.findrunnable", "runtime.stealWork",
		"runtime.runqsteal", "runtime.runqgrab", "runtime.futex", "runtime.futexsleep", "runtime.futexwakeup",
		"runtime.stopm", "runtime.startm", "runtime.wakep", "runtime.mPark", "runtime.notesleep",
		"runtime.notetsleep", "runtime.notewakeup", "runtime.park_m", "runtime.goschedImpl", "runtime.gopreempt_m",
		"runtime.handoffp", "runtime.sysmon", "runtime.retake", "runtime.netpoll", "runtime.injectglist",
		"runtime.resetspinning", "runtime.checkTimers", "runtime.execute", "runtime.ready", "runtime.goready",
		"runtime.mcall", "runtime.gogo", "runtime.usleep", "runtime.osyield", "runtime.goexit0",
		"runtime.exitsyscall", "runtime.entersyscall", "runtime.preemptone", "runtime.preemptM",
		"runtime.doSigPreempt", "runtime.asyncPreempt", "runtime.gosched_m", "runtime.newproc", "runtime.stopTheWorld",
		"runtime.startTheWorld", "runtime.forEachP", "runtime.procresize", "runtime.(*timers)"}},
}

func classify(fn string) string {
	for _, r := range rules {
		for _, n := range r.names {
			if fn == n || strings.HasPrefix(fn, n) {
				return r.category
			}
		}
	}
	return ""
}

func group(c string) string {
	switch {
	case strings.HasPrefix(c, "gc_"):
		return "gc"
	case strings.HasPrefix(c, "user"):
		return "user"
	}
	return c
}

// priority: GC work beats scheduler work beats allocation (a mark assist inside mallocgc is GC;
// a futex wake inside mallocgc is the scheduler's); within GC the frame that says who does the
// work (an assist, a mark worker, the sweeper, the scavenger) beats the mark loop it runs
func priority(c string) int {
	switch {
	case c == "gc_mark":
		return 3
	case group(c) == "gc":
		return 4
	case c == "scheduler":
		return 2
	}
	return 1
}

type result struct {
	DurationS    float64            `json:"duration_s"`
	Samples      int64              `json:"samples"`
	CPUSeconds   float64            `json:"cpu_s"`
	Split        map[string]float64 `json:"split_cpu_s"`
	Detail       map[string]float64 `json:"detail_cpu_s"`
	Fraction     map[string]float64 `json:"fraction"`
	TopScheduler []frameCPU         `json:"top_scheduler_leaf"`
	TopGC        []frameCPU         `json:"top_gc_leaf"`
	PeriodNs     int64              `json:"period_ns"`
	SampleType   string             `json:"sample_type"`
	Rules        string             `json:"rules"`
}

type frameCPU struct {
	Function string  `json:"function"`
	CPUS     float64 `json:"cpu_s"`
}

func top(m map[string]float64, n int) []frameCPU {
	out := make([]frameCPU, 0, len(m))
	for f, v := range m {
		out = append(out, frameCPU{f, v})
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].CPUS > out[j].CPUS || (out[i].CPUS == out[j].CPUS && out[i].Function < out[j].Function)
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}

func split(p *profile.Profile) (*result, error) {
	idx := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" && st.Unit == "nanoseconds" {
			idx = i
		}
	}
	if idx < 0 {
		return nil, fmt.Errorf("not a CPU profile: no cpu/nanoseconds sample type")
	}
	r := &result{Split: map[string]float64{"user": 0, "scheduler": 0, "gc": 0}, Detail: map[string]float64{},
		Fraction: map[string]float64{}, DurationS: float64(p.DurationNanos) / 1e9, PeriodNs: p.Period,
		SampleType: "cpu/nanoseconds",
		Rules:      "gc if any frame is a GC function, else scheduler if any frame is a scheduler function, else user"}
	schedLeaf, gcLeaf := map[string]float64{}, map[string]float64{}
	for _, s := range p.Sample {
		sec := float64(s.Value[idx]) / 1e9
		cat := ""
		leaf := ""
		for li, loc := range s.Location {
			for _, line := range loc.Line {
				if line.Function == nil {
					continue
				}
				if li == 0 && leaf == "" {
					leaf = line.Function.Name
				}
				c := classify(line.Function.Name)
				if c == "" {
					continue
				}
				// the category nearest the leaf within the highest priority wins
				if cat == "" || priority(c) > priority(cat) {
					cat = c
				}
			}
		}
		if cat == "" {
			cat = "user"
		}
		r.Samples += s.Value[0]
		r.CPUSeconds += sec
		r.Detail[cat] += sec
		r.Split[group(cat)] += sec
		switch group(cat) {
		case "scheduler":
			schedLeaf[leaf] += sec
		case "gc":
			gcLeaf[leaf] += sec
		}
	}
	for k, v := range r.Split {
		if r.CPUSeconds > 0 {
			r.Fraction[k] = v / r.CPUSeconds
		}
	}
	r.TopScheduler, r.TopGC = top(schedLeaf, 12), top(gcLeaf, 12)
	return r, nil
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: profsplit PROFILE")
		os.Exit(2)
	}
	f, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
	r, err := split(p)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	enc.Encode(r)
}
