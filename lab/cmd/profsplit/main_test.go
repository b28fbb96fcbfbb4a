package main

import (
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
