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
//
// With -perf-script FILE it reads `perf script -F tid,time,ip,sym` text of a `perf record -g
// -e cpu-clock -F HZ` recording instead (the kernel's samples, kernel frames included, each worth
// 1/HZ s of CPU) and splits it by the same rules; a sample whose leaf is a kernel function and
// that no rule claims is detail "user_kernel" (the kernel's work for the program: system calls,
// page faults, the network stack's softirqs). -series OUT writes one CSV row per sample (its perf
// time in seconds and its group), so that CPU can be lined up with the GC's cycles.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
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

// categorize: the category of one sample's stack (the frame nearest the leaf within the highest
// priority wins; "user" when no rule claims a frame) and its leaf function
func categorize(s *profile.Sample) (cat, leaf string) {
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
			if cat == "" || priority(c) > priority(cat) {
				cat = c
			}
		}
	}
	if cat == "" {
		cat = "user"
		if len(s.Location) > 0 && s.Location[0].Address >= kernelAddress {
			cat = "user_kernel"
		}
	}
	return cat, leaf
}

// kernelAddress: x86-64 kernel text lies in the upper half of the address space
const kernelAddress = 0xffff800000000000

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
		cat, leaf := categorize(s)
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

var (
	perfHeader = regexp.MustCompile(`^\s*(\d+)\s+(\d+\.\d+):\s*$`)
	perfFrame  = regexp.MustCompile(`^\s+([0-9a-f]+)\s+(.*)$`)
	// the assembler's ABI wrappers and perf's "+0x1c" offsets are not part of a function's name
	perfSuffix = regexp.MustCompile(`(\.abi0|\.abiinternal)?(\+0x[0-9a-f]+)?$`)
)

// fromPerfScript: the samples of `perf script -F tid,time,ip,sym` (call chains from `perf record
// -g`) as a CPU profile of 1/hz s a sample, and each sample's perf time [s]. Errors name the line.
func fromPerfScript(r io.Reader, hz float64, source string) (*profile.Profile, []float64, error) {
	if hz <= 0 {
		return nil, nil, fmt.Errorf("-hz must be > 0, got %v", hz)
	}
	period := int64(1e9 / hz)
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		Period:     period, PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
	}
	funcs := map[string]*profile.Function{}
	var times []float64
	var cur *profile.Sample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	lineno := 0
	for sc.Scan() {
		lineno++
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			cur = nil
			continue
		}
		if m := perfHeader.FindStringSubmatch(line); m != nil {
			t, err := strconv.ParseFloat(m[2], 64)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: line %d: bad time %q", source, lineno, m[2])
			}
			cur = &profile.Sample{Value: []int64{1, period}}
			p.Sample = append(p.Sample, cur)
			times = append(times, t)
			continue
		}
		m := perfFrame.FindStringSubmatch(line)
		if m == nil || cur == nil {
			return nil, nil, fmt.Errorf("%s: line %d: expected a 'TID TIME:' header or a '\tADDRESS SYMBOL' frame, got %q",
				source, lineno, line)
		}
		addr, err := strconv.ParseUint(m[1], 16, 64)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: line %d: bad address %q", source, lineno, m[1])
		}
		name := perfSuffix.ReplaceAllString(strings.TrimSpace(m[2]), "")
		fn := funcs[name]
		if fn == nil {
			fn = &profile.Function{ID: uint64(len(funcs) + 1), Name: name}
			funcs[name] = fn
			p.Function = append(p.Function, fn)
		}
		loc := &profile.Location{ID: uint64(len(p.Location) + 1), Address: addr, Line: []profile.Line{{Function: fn}}}
		p.Location = append(p.Location, loc)
		cur.Location = append(cur.Location, loc)
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("%s: %v", source, err)
	}
	if len(times) > 1 {
		p.DurationNanos = int64((times[len(times)-1] - times[0]) * 1e9)
	}
	return p, times, nil
}

func writeSeries(path string, p *profile.Profile, times []float64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "t_s,group,category")
	for i, s := range p.Sample {
		cat, _ := categorize(s)
		fmt.Fprintf(w, "%.6f,%s,%s\n", times[i], group(cat), cat)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func main() {
	perfScript := flag.String("perf-script", "", "read `perf script -F tid,time,ip,sym` text (perf record -g) instead of a pprof profile")
	hz := flag.Float64("hz", 0, "with -perf-script: the recording's sampling frequency [Hz]")
	series := flag.String("series", "", "with -perf-script: write each sample's time and group to this CSV")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: profsplit PROFILE | profsplit -perf-script FILE -hz HZ [-series OUT.csv]")
	}
	flag.Parse()
	var (
		p     *profile.Profile
		times []float64
		name  string
		err   error
	)
	if *perfScript != "" {
		if flag.NArg() != 0 {
			flag.Usage()
			os.Exit(2)
		}
		name = *perfScript
		f, ferr := os.Open(name)
		if ferr != nil {
			fmt.Fprintln(os.Stderr, ferr)
			os.Exit(1)
		}
		p, times, err = fromPerfScript(f, *hz, name)
		f.Close()
	} else {
		if flag.NArg() != 1 || *series != "" {
			flag.Usage()
			os.Exit(2)
		}
		name = flag.Arg(0)
		f, ferr := os.Open(name)
		if ferr != nil {
			fmt.Fprintln(os.Stderr, ferr)
			os.Exit(1)
		}
		p, err = profile.Parse(f)
		f.Close()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
	r, err := split(p)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
	if *series != "" {
		if err := writeSeries(*series, p, times); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	enc.Encode(r)
}
