package main

import (
	"strings"
	"testing"

	"github.com/google/pprof/profile"
)

func sample(ns int64, fns ...string) *profile.Sample {
	s := &profile.Sample{Value: []int64{1, ns}}
	for _, f := range fns {
		s.Location = append(s.Location, &profile.Location{Line: []profile.Line{{Function: &profile.Function{Name: f}}}})
	}
	return s
}

func TestSplitByStack(t *testing.T) {
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		Sample: []*profile.Sample{
			sample(10e6, "main.spin", "main.handleWork.func1"),
			sample(20e6, "runtime.scanobject", "runtime.gcDrain", "runtime.gcBgMarkWorker"),
			sample(30e6, "runtime.futex", "runtime.futexsleep", "runtime.stopm", "runtime.findRunnable", "runtime.schedule"),
			// an assist inside the allocator is GC, not allocation
			sample(40e6, "runtime.scanobject", "runtime.gcAssistAlloc", "runtime.mallocgc", "main.churn"),
			sample(50e6, "runtime.memclrNoHeapPointers", "runtime.mallocgc", "main.churn"),
			// a wake-up from user code is scheduler work
			sample(60e6, "runtime.futex", "runtime.futexwakeup", "runtime.wakep", "runtime.ready", "main.produce"),
		},
	}
	r, err := split(p)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"user": 0.06, "gc": 0.06, "scheduler": 0.09}
	for k, v := range want {
		if got := r.Split[k]; got < v-1e-9 || got > v+1e-9 {
			t.Errorf("%s = %v, want %v (split %v)", k, got, v, r.Split)
		}
	}
	if r.Detail["user_alloc"] != 0.05 || r.Detail["gc_assist"] != 0.04 {
		t.Errorf("detail %v", r.Detail)
	}
	if _, err := split(&profile.Profile{SampleType: []*profile.ValueType{{Type: "alloc_space", Unit: "bytes"}}}); err == nil {
		t.Error("a heap profile must be refused")
	}
}

func TestPerfScriptSplitsKernelSamplesByTheirStack(t *testing.T) {
	text := "30493 74080.389057: \n" +
		"\t          22a686 main.spin\n" +
		"\t          92c01 runtime.goexit.abi0\n" +
		"\n" +
		"30493 74080.390053: \n" +
		"\tffffffff81688025 memcg1_commit_charge\n" +
		"\tffffffff81000c82 asm_exc_page_fault\n" +
		"\t          22a686 main.churn\n" +
		"\n" +
		"30494 74080.391050: \n" +
		"\tffffffff8143ed5a futex_wake\n" +
		"\t           94763 runtime.futex.abi0\n" +
		"\t           20ae5 runtime.notewakeup\n" +
		"\n" +
		"30495 74080.392049: \n" +
		"\t          3ab100 runtime.tryDeferToSpanScan+0x1c\n" +
		"\t          3ab200 runtime.gcDrain\n" +
		"\t          3ab300 runtime.gcBgMarkWorker\n"
	p, times, err := fromPerfScript(strings.NewReader(text), 1000, "test")
	if err != nil {
		t.Fatal(err)
	}
	if len(times) != 4 || times[3] != 74080.392049 {
		t.Fatalf("times %v", times)
	}
	r, err := split(p)
	if err != nil {
		t.Fatal(err)
	}
	if r.Split["user"] != 0.002 || r.Split["scheduler"] != 0.001 || r.Split["gc"] != 0.001 {
		t.Errorf("split %v", r.Split)
	}
	if r.Detail["user_kernel"] != 0.001 || r.Detail["gc_mark_worker"] != 0.001 {
		t.Errorf("detail %v", r.Detail)
	}
	if _, _, err := fromPerfScript(strings.NewReader("garbage\n"), 1000, "bad.txt"); err == nil ||
		!strings.Contains(err.Error(), "bad.txt: line 1") {
		t.Errorf("a malformed line must be named, got %v", err)
	}
	if _, _, err := fromPerfScript(strings.NewReader(text), 0, "x"); err == nil {
		t.Error("hz 0 must be refused")
	}
}
