// switchbench measures what the kernel charges for a context switch between two threads of the
// same process on one CPU, and between two different processes on one CPU. Between threads of one
// process the address space stays: the kernel's __schedule -> context_switch (kernel/sched/core.c)
// calls switch_mm_irqs_off, which on x86 (arch/x86/mm/tlb.c) sees the same mm and skips the
// page-table (CR3) change; between processes it must load the other's page tables. The model's
// host.thread_switch_us comes from it (src/cfsim/lab/threadswitch.py, `cfsim lab switch`): the CPU
// charged to a Go M switched in directly after another M of its own process.
//
// Every yielding thread is locked to its OS thread (runtime.LockOSThread), pinned to one CPU
// (sched_setaffinity) and calls sched_yield with syscall.RawSyscall in a loop, so the Go
// scheduler sees none of it. Three modes per round, one JSON line each:
//
//	alone      one thread yields: nothing else of ours is runnable on the CPU, so yield_task_fair
//	           (kernel/sched/fair.c) returns at once and __schedule picks the same task: the cost of
//	           the system call and of a schedule() that does not switch;
//	threads    two threads of this process yield on the same CPU: under EEVDF yield_task_fair moves
//	           the yielder's deadline (and vruntime) on, so the other is picked: one switch per yield;
//	processes  this binary re-executes itself (-child) and the two processes yield on the same CPU.
//
// A yield that switches is counted by the kernel as an involuntary switch of the thread that
// yielded (it is still runnable), a block as a voluntary one; each line sums both over the
// yielding threads (getrusage RUSAGE_THREAD, before and after) with their CPU
// (CLOCK_THREAD_CPUTIME_ID), so the switches per yield can be checked. All yielders start on a
// common CLOCK_MONOTONIC instant after every one of them is pinned (a barrier) and stop at a
// common deadline, so they overlap the whole time.
//
//	switchbench [-rounds 3] [-dur 1.0] [-cpu N]
//
// The program re-executes itself with GODEBUG=asyncpreemptoff=1 (as wakebench does): to the Go
// scheduler each yielder runs without a break, and after 10 ms sysmon would send it a preemption
// signal (SIGURG), whose handling would be charged to the switch.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/cfsim/cfsim/lab/internal/noasyncpreempt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"time"
	"unsafe"
)

const (
	clockMonotonic  = 1 // CLOCK_MONOTONIC
	clockThreadCPU  = 3 // CLOCK_THREAD_CPUTIME_ID
	timerAbstime    = 1 // TIMER_ABSTIME
	rusageThread    = 1 // RUSAGE_THREAD
	checkEvery      = 16
	startDelay      = 20 * time.Millisecond // from the barrier to the common start
	childReadyLimit = 10 * time.Second
)

func clockNs(clock uintptr) int64 {
	var ts syscall.Timespec
	syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clock, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}

// sleepUntil blocks the thread until the CLOCK_MONOTONIC instant ns, without telling the Go
// scheduler; a signal (EINTR) resumes the sleep.
func sleepUntil(ns int64) {
	ts := syscall.NsecToTimespec(ns)
	for {
		_, _, errno := syscall.RawSyscall6(syscall.SYS_CLOCK_NANOSLEEP, clockMonotonic, timerAbstime,
			uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
		if errno != syscall.EINTR {
			return
		}
	}
}

// allowedCPUs lists the CPUs of this thread's affinity mask, lowest first.
func allowedCPUs() ([]int, error) {
	var mask [16]uint64
	_, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_GETAFFINITY, 0, uintptr(len(mask)*8),
		uintptr(unsafe.Pointer(&mask[0])))
	if errno != 0 {
		return nil, fmt.Errorf("sched_getaffinity: %v", errno)
	}
	var cpus []int
	for i := 0; i < len(mask)*64; i++ {
		if mask[i/64]&(1<<(i%64)) != 0 {
			cpus = append(cpus, i)
		}
	}
	return cpus, nil
}

// pin puts the calling (locked) thread on one CPU; the kernel moves it there before returning.
func pin(cpu int) error {
	if cpu < 0 || cpu >= 16*64 {
		return fmt.Errorf("cpu %d out of range", cpu)
	}
	var mask [16]uint64
	mask[cpu/64] |= 1 << (cpu % 64)
	_, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_SETAFFINITY, 0, uintptr(len(mask)*8),
		uintptr(unsafe.Pointer(&mask[0])))
	if errno != 0 {
		return fmt.Errorf("sched_setaffinity to CPU %d: %v", cpu, errno)
	}
	return nil
}

// counts is what one yielding thread did between the start and the deadline.
type counts struct {
	Yields    int64  `json:"yields"`
	CPUns     int64  `json:"cpu_ns"`
	Voluntary int64  `json:"switches_voluntary"`
	Involunt  int64  `json:"switches_involuntary"`
	LateNs    int64  `json:"late_ns"` // how long after the common start it began
	Err       string `json:"error,omitempty"`
}

func (c *counts) add(o counts) {
	c.Yields += o.Yields
	c.CPUns += o.CPUns
	c.Voluntary += o.Voluntary
	c.Involunt += o.Involunt
	if o.LateNs > c.LateNs {
		c.LateNs = o.LateNs
	}
}

// yieldLoop runs on a locked, pinned thread: it waits for start, then calls sched_yield until
// deadline (checked every checkEvery yields) and returns its counts.
func yieldLoop(start, deadline int64) counts {
	sleepUntil(start)
	var r0, r1 syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &r0); err != nil {
		return counts{Err: "getrusage: " + err.Error()}
	}
	began := clockNs(clockMonotonic)
	c0 := clockNs(clockThreadCPU)
	var n int64
	for {
		syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
		n++
		if n%checkEvery == 0 && clockNs(clockMonotonic) >= deadline {
			break
		}
	}
	c1 := clockNs(clockThreadCPU)
	if err := syscall.Getrusage(rusageThread, &r1); err != nil {
		return counts{Err: "getrusage: " + err.Error()}
	}
	return counts{Yields: n, CPUns: c1 - c0, Voluntary: r1.Nvcsw - r0.Nvcsw, Involunt: r1.Nivcsw - r0.Nivcsw,
		LateNs: began - start}
}

// yielder starts a goroutine on its own locked OS thread pinned to cpu; it reports on ready once
// pinned, waits for [start, deadline] on its channel and sends its counts to out. The goroutine
// ends still locked, so the runtime ends its (pinned) thread instead of reusing it.
func yielder(cpu int, ready chan<- error, out chan<- counts) chan<- [2]int64 {
	when := make(chan [2]int64, 1)
	go func() {
		runtime.LockOSThread()
		if err := pin(cpu); err != nil {
			ready <- err
			return
		}
		ready <- nil
		w := <-when
		out <- yieldLoop(w[0], w[1])
	}()
	return when
}

type result struct {
	Round            int     `json:"round"`
	Mode             string  `json:"mode"`
	CPU              int     `json:"cpu"`
	Yielders         int     `json:"yielders"`
	DurS             float64 `json:"dur_s"`
	Yields           int64   `json:"yields"`
	CPUns            int64   `json:"cpu_ns"`
	Voluntary        int64   `json:"switches_voluntary"`
	Involunt         int64   `json:"switches_involuntary"`
	UsPerYield       float64 `json:"us_per_yield"`
	SwitchesPerYield float64 `json:"switches_per_yield"`
	StartLateUs      float64 `json:"start_late_us"`
}

func summarise(round int, mode string, cpu, yielders int, dur float64, c counts) result {
	r := result{Round: round, Mode: mode, CPU: cpu, Yielders: yielders, DurS: dur, Yields: c.Yields,
		CPUns: c.CPUns, Voluntary: c.Voluntary, Involunt: c.Involunt, StartLateUs: float64(c.LateNs) / 1e3}
	if c.Yields > 0 {
		r.UsPerYield = float64(c.CPUns) / float64(c.Yields) / 1e3
		r.SwitchesPerYield = float64(c.Voluntary+c.Involunt) / float64(c.Yields)
	}
	return r
}

// inProcess runs n yielders as threads of this process on cpu for dur.
func inProcess(n, cpu int, dur time.Duration) (counts, error) {
	ready, out := make(chan error, n), make(chan counts, n)
	whens := make([]chan<- [2]int64, n)
	for i := range whens {
		whens[i] = yielder(cpu, ready, out)
	}
	for range whens {
		if err := <-ready; err != nil {
			return counts{}, err
		}
	}
	start := clockNs(clockMonotonic) + startDelay.Nanoseconds()
	for _, w := range whens {
		w <- [2]int64{start, start + dur.Nanoseconds()}
	}
	var total counts
	for range whens {
		c := <-out
		if c.Err != "" {
			return counts{}, fmt.Errorf("%s", c.Err)
		}
		total.add(c)
	}
	return total, nil
}

// twoProcesses runs one yielder in this process and one in a child process (this binary with
// -child), both on cpu for dur.
func twoProcesses(cpu int, dur time.Duration) (counts, error) {
	self, err := os.Executable()
	if err != nil {
		return counts{}, err
	}
	child := exec.Command(self, "-child", "-cpu", strconv.Itoa(cpu))
	child.Stderr = os.Stderr
	stdin, err := child.StdinPipe()
	if err != nil {
		return counts{}, err
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		return counts{}, err
	}
	if err := child.Start(); err != nil {
		return counts{}, fmt.Errorf("starting the child: %v", err)
	}
	defer child.Wait()
	defer child.Process.Kill()
	lines := make(chan string, 2)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func(what string) (string, error) {
		select {
		case l, ok := <-lines:
			if !ok {
				return "", fmt.Errorf("the child ended before %s", what)
			}
			return l, nil
		case <-time.After(childReadyLimit + dur):
			return "", fmt.Errorf("no %s from the child within %v", what, childReadyLimit+dur)
		}
	}

	ready, out := make(chan error, 1), make(chan counts, 1)
	when := yielder(cpu, ready, out)
	if err := <-ready; err != nil {
		return counts{}, err
	}
	if l, err := next("ready"); err != nil || l != "ready" {
		return counts{}, fmt.Errorf("child: expected ready, got %q (%v)", l, err)
	}
	start := clockNs(clockMonotonic) + startDelay.Nanoseconds()
	deadline := start + dur.Nanoseconds()
	if _, err := fmt.Fprintf(stdin, "%d %d\n", start, deadline); err != nil {
		return counts{}, fmt.Errorf("writing to the child: %v", err)
	}
	when <- [2]int64{start, deadline}
	total := <-out
	if total.Err != "" {
		return counts{}, fmt.Errorf("%s", total.Err)
	}
	l, err := next("counts")
	if err != nil {
		return counts{}, err
	}
	var c counts
	if err := json.Unmarshal([]byte(l), &c); err != nil {
		return counts{}, fmt.Errorf("child's counts %q: %v", l, err)
	}
	if c.Err != "" {
		return counts{}, fmt.Errorf("child: %s", c.Err)
	}
	total.add(c)
	return total, nil
}

// runChild is the other process of the processes mode: pin, say ready, read "start deadline"
// from stdin, yield, print the counts as one JSON line.
func runChild(cpu int) {
	runtime.LockOSThread()
	if err := pin(cpu); err != nil {
		fmt.Fprintln(os.Stderr, "switchbench -child:", err)
		os.Exit(1)
	}
	fmt.Println("ready")
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil {
		fmt.Fprintln(os.Stderr, "switchbench -child: reading the start:", err)
		os.Exit(1)
	}
	var start, deadline int64
	if _, err := fmt.Sscan(line, &start, &deadline); err != nil {
		fmt.Fprintf(os.Stderr, "switchbench -child: bad start line %q: %v\n", line, err)
		os.Exit(1)
	}
	b, _ := json.Marshal(yieldLoop(start, deadline))
	fmt.Println(string(b))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "switchbench:", err)
	os.Exit(1)
}

func main() {
	rounds := flag.Int("rounds", 3, "rounds, each alone, threads and processes")
	durS := flag.Float64("dur", 1.0, "seconds per mode")
	cpu := flag.Int("cpu", -1, "the CPU every yielder is pinned to (default: the last allowed one)")
	isChild := flag.Bool("child", false, "internal: the second process of the processes mode")
	flag.Parse()
	if err := noasyncpreempt.Ensure(); err != nil {
		fail(err)
	}
	if *isChild {
		runChild(*cpu)
		return
	}
	if *rounds < 1 || *durS <= 0 {
		fmt.Fprintln(os.Stderr, "switchbench: -rounds must be >= 1 and -dur > 0")
		os.Exit(2)
	}
	cpus, err := allowedCPUs()
	if err != nil {
		fail(err)
	}
	if *cpu < 0 {
		*cpu = cpus[len(cpus)-1]
	}
	dur := time.Duration(*durS * float64(time.Second))
	enc := json.NewEncoder(os.Stdout)
	for r := 0; r < *rounds; r++ {
		for _, mode := range []string{"alone", "threads", "processes"} {
			var c counts
			var n int
			switch mode {
			case "alone":
				n = 1
				c, err = inProcess(1, *cpu, dur)
			case "threads":
				n = 2
				c, err = inProcess(2, *cpu, dur)
			case "processes":
				n = 2
				c, err = twoProcesses(*cpu, dur)
			}
			if err != nil {
				fail(fmt.Errorf("round %d, %s: %v", r, mode, err))
			}
			if err := enc.Encode(summarise(r, mode, *cpu, n, *durS, c)); err != nil {
				fail(err)
			}
		}
	}
}
