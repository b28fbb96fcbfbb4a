// packbench measures where this host's kernel puts a thread that a running thread wakes while
// another CPU is idle: on the idle CPU, as mainline Linux does (select_task_rq_fair ->
// select_idle_sibling in kernel/sched/fair.c), or on the waker's own, busy CPU. The lab's VM
// (kernel 6.18.44-fc, which carries a sysctl kernel.sched_vcpu_pack that mainline has not) packs
// the wakee beside its waker while the waker CPU's utilization plus the wakee's stays low, and
// spreads it to the idle CPU above that. The bound (pair_pack_util, src/cfsim/lab/wakepack.py,
// `cfsim lab wakepack`) is a measurement of the host, not a model parameter: the lab's service
// shows a woken thread mostly going back to the CPU it last ran on, so the bound decides which
// CPU a pair settles on (cfsim.lab.wakeplace).
//
// Two OS threads of this process (runtime.LockOSThread), neither pinned, so the kernel chooses:
//
//	waker  busy X us, note its CPU (getcpu) and the time, write one byte to a pipe, busy Z us,
//	       nanosleep S us, repeat;
//	wakee  read one byte from the pipe (it blocks there), note its CPU, busy Y us, repeat.
//
// A pipe write wakes its reader with a sync wake-up (pipe_write in fs/pipe.c calls
// wake_up_interruptible_sync_poll), the kind select_task_rq_fair weighs for wake_affine: the
// waker says it will go on running. The busy loops are rounds of lab/internal/spin calibrated to
// microseconds of this thread's CPU (as wakebench's), and every system call is made with
// syscall.RawSyscall, so the Go scheduler never sees a thread block (no P hand-off, no wake-up of
// another M that would be a wake-up of its own). Per point (X, Y, Z, S) and round, after the
// first 20 % of the wake-ups (PELT's average, kernel/sched/pelt.c, takes a few of its 32 ms
// half-lives to settle on the new pattern), one JSON line: the share of wake-ups on which the
// wakee ran on the CPU the waker wrote from, each thread's CPU time over the wall time (its
// utilization), their sum, how often the wakee ran on another CPU than at its wake-up before, the
// wake-to-run latency apart for the two placements (on the waker's CPU the wakee may wait for the
// waker's Z: EEVDF's check_preempt_wakeup_fair decides), the blocks per cycle of both threads
// (getrusage RUSAGE_THREAD voluntary switches: 1 when nothing but the pipe and the sleep blocked
// them) and the CPU the rest of the host used meanwhile (/proc/stat's idle time, less ours: a
// busy neighbour leaves no idle CPU to spread to, and every wake-up then stays beside its waker).
//
//	packbench [-rounds 2] [-dur 1.2] [-grid default|quick] [-points X:Y:Z:S,...]
//
// The program re-executes itself with GODEBUG=asyncpreemptoff=1 (as wakebench does): to the Go
// scheduler both threads run without a break, and sysmon's preemption signal (SIGURG) would
// interrupt them. The functions called inside a cycle are go:nosplit, so the preemption request
// sysmon still posts every 10 ms (retake in runtime/proc.go) is never acted on at a function's
// stack check, which would park the thread on a futex until another M hands its P back; and the
// collector is off (debug.SetGCPercent(-1)), whose stop-the-world would wait on them in a loop.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/cfsim/cfsim/lab/internal/noasyncpreempt"
	"github.com/cfsim/cfsim/lab/internal/spin"
	"golang.org/x/sys/unix"
)

const (
	clockMonotonic = 1 // CLOCK_MONOTONIC
	clockThreadCPU = 3 // CLOCK_THREAD_CPUTIME_ID
	rusageThread   = 1 // RUSAGE_THREAD
	// /proc/stat counts in USER_HZ ticks, 100 a second on x86 and arm64 (include/asm-generic/param.h)
	userHZ = 100
	// the share of each point's wake-ups left out while PELT settles
	warmupShare = 0.2
	// what a cycle costs beyond X+Z+S [us]: nanosleep's timer slack (50 us for a normal thread,
	// current->timer_slack_ns) and the wake-up; only used to size a point to about -dur seconds
	cycleExtraUs = 60
	quitByte     = 'q'
)

//go:nosplit
func clockNs(clock uintptr) int64 {
	var ts syscall.Timespec
	syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clock, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Sec*1e9 + ts.Nsec
}

// getcpu is the CPU the calling thread runs on (getcpu(2); sched_getcpu in libc). The standard
// library's syscall package has no number for it on amd64; golang.org/x/sys/unix has.
//
//go:nosplit
func getcpu() int32 {
	var cpu uint32
	syscall.RawSyscall(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&cpu)), 0, 0)
	return int32(cpu)
}

// voluntarySwitches is the calling thread's count of blocks so far (ru_nvcsw).
//
//go:nosplit
func voluntarySwitches(ru *syscall.Rusage) int64 {
	syscall.RawSyscall(syscall.SYS_GETRUSAGE, rusageThread, uintptr(unsafe.Pointer(ru)), 0)
	return ru.Nvcsw
}

//go:nosplit
func rawSleepUs(us int64) {
	ts := syscall.Timespec{Sec: us / 1e6, Nsec: (us % 1e6) * 1e3}
	syscall.RawSyscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// atFdcwd is AT_FDCWD (-100) as the system call's unsigned argument.
var atFdcwd = -100

// statPath and statBuf are allocated once: hostIdleTicks runs inside a point and must not
// allocate. /proc/stat lists every CPU's line before the long interrupt lines; 64 KiB holds them
// for a few hundred CPUs.
var (
	statPath = append([]byte("/proc/stat"), 0)
	statBuf  [64 << 10]byte
)

// hostIdleTicks is the whole host's idle time so far from /proc/stat's first line ("cpu  user
// nice system idle iowait irq softirq steal ..."): idle + iowait, in USER_HZ ticks, and the number
// of CPUs it sums over (the "cpuN" lines); -1, 0 when it cannot be read. With a tickless idle
// (NO_HZ) the kernel counts idle time exactly (get_idle_time in fs/proc/stat.c reads
// get_cpu_idle_time_us), while user and system time are sampled at the tick, which a pattern of
// 100 us bursts aliases by as much as 0.2 of a CPU: so the host's busy time is the wall time
// less the idle time.
//
//go:nosplit
func hostIdleTicks() (int64, int) {
	fd, _, errno := syscall.RawSyscall6(syscall.SYS_OPENAT, uintptr(atFdcwd), uintptr(unsafe.Pointer(&statPath[0])),
		uintptr(syscall.O_RDONLY), 0, 0, 0)
	if errno != 0 {
		return -1, 0
	}
	n, _, errno := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&statBuf[0])), uintptr(len(statBuf)))
	syscall.RawSyscall(syscall.SYS_CLOSE, fd, 0, 0)
	if errno != 0 || n < 5 {
		return -1, 0
	}
	var idle, v int64
	field, inNum, line, cpus := 0, false, 0, 0 // field: 0 = user, 1 = nice, 2 = system, 3 = idle, 4 = iowait
	for i := uintptr(0); i < n; i++ {
		c := statBuf[i]
		if line == 0 {
			if c >= '0' && c <= '9' {
				v, inNum = v*10+int64(c-'0'), true
				continue
			}
			if inNum {
				if field == 3 || field == 4 {
					idle += v
				}
				field, v, inNum = field+1, 0, false
			}
		} else if i+3 < n && statBuf[i-1] == '\n' && statBuf[i] == 'c' && statBuf[i+1] == 'p' &&
			statBuf[i+2] == 'u' && statBuf[i+3] >= '0' && statBuf[i+3] <= '9' {
			cpus++
		}
		if c == '\n' {
			line++
		}
	}
	if field < 5 || cpus == 0 {
		return -1, 0
	}
	return idle, cpus
}

// point is one setting: the waker's busy time before (X) and after (Z) its write, the wakee's busy
// time per wake-up (Y) and the waker's sleep (S), all in microseconds.
type point struct{ X, Y, Z, S int64 }

// grids: small wakees of a busy waker (X=Z=150, Y=20, S from 1200 down to 20 us: utilization sums
// from about 0.2 to 0.85) and big wakees of a light waker (Y up to 1200 us), so that the bound is
// seen to follow the sum and not either thread's share alone. The quick grid is for the test.
var grids = map[string][]point{
	"default": {
		{150, 20, 150, 1200}, {150, 20, 150, 500}, {150, 20, 150, 350}, {150, 20, 150, 250},
		{150, 20, 150, 200}, {150, 20, 150, 160}, {150, 20, 150, 140}, {150, 20, 150, 120},
		{150, 20, 150, 100}, {150, 20, 150, 60}, {150, 20, 150, 20},
		{150, 100, 150, 500}, {150, 250, 150, 500}, {150, 300, 150, 500}, {150, 400, 150, 500},
		{150, 500, 150, 900}, {150, 700, 150, 900},
		{100, 300, 100, 1500}, {100, 600, 100, 1500}, {100, 900, 100, 1500}, {100, 1200, 100, 1500},
	},
	"quick": {{150, 20, 150, 1000}, {150, 20, 150, 300}, {150, 20, 150, 10}},
}

func parsePoints(s string) ([]point, error) {
	var out []point
	for _, item := range strings.Split(s, ",") {
		parts := strings.Split(strings.TrimSpace(item), ":")
		if len(parts) != 4 {
			return nil, fmt.Errorf("-points: %q is not X:Y:Z:S", item)
		}
		var v [4]int64
		for i, p := range parts {
			n, err := strconv.ParseInt(p, 10, 64)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("-points: %q: %q is not a whole number of microseconds >= 0", item, p)
			}
			v[i] = n
		}
		out = append(out, point{v[0], v[1], v[2], v[3]})
	}
	return out, nil
}

type result struct {
	Round             int      `json:"round"`
	Point             int      `json:"point"`
	WakerBusyUs       int64    `json:"waker_busy_us"`
	WakerBeforeUs     int64    `json:"waker_busy_before_write_us"`
	WakeeBusyUs       int64    `json:"wakee_busy_us"`
	SleepUs           int64    `json:"sleep_us"`
	Wakes             int      `json:"wakes"`
	WallS             float64  `json:"wall_s"`
	WakerUtil         float64  `json:"waker_util"`
	WakeeUtil         float64  `json:"wakee_util"`
	UtilSum           float64  `json:"util_sum"`
	SameCPUShare      float64  `json:"same_cpu_share"`
	WakeeCPUChanges   int      `json:"wakee_cpu_changes"`
	WakerCPUChanges   int      `json:"waker_cpu_changes"`
	LatencySameUs     *float64 `json:"wake_latency_us_same_median"`
	LatencyOtherUs    *float64 `json:"wake_latency_us_other_median"`
	WakerBlocksPerCyc float64  `json:"waker_blocks_per_cycle"`
	WakeeBlocksPerWk  float64  `json:"wakee_blocks_per_wake"`
	OtherUtil         *float64 `json:"other_util"`
	CPUs              int      `json:"cpus"`
}

// wakeeState is what the wakee thread reports after the quit byte.
type wakeeState struct {
	cpuNs, blocks int64
	n             int // wake-ups read (quit byte not counted)
	err           string
}

// runPoint runs one point of n cycles on the calling (locked, unpinned) thread as the waker and a
// new locked thread as the wakee.
func runPoint(round, index int, p point, n int, perUs float64, cpus int) (result, error) {
	var fds [2]int
	if err := syscall.Pipe(fds[:]); err != nil { // blocking ends: a read blocks in pipe_read
		return result{}, fmt.Errorf("pipe: %v", err)
	}
	defer syscall.Close(fds[0])
	defer syscall.Close(fds[1])
	rfd, wfd := uintptr(fds[0]), uintptr(fds[1])
	k0 := int(float64(n) * warmupShare)
	wakerCPU := make([]int32, n)
	writeNs := make([]int64, n)
	wakeeCPU := make([]int32, n)
	latNs := make([]int64, n)
	x, z, y := int64(float64(p.X)*perUs), int64(float64(p.Z)*perUs), int64(float64(p.Y)*perUs)

	ready, done := make(chan struct{}), make(chan wakeeState, 1)
	go func() {
		// ends still locked: the runtime ends the thread, each point starts a fresh one
		runtime.LockOSThread()
		close(ready)
		var ru syscall.Rusage
		var c0, b0 int64
		var buf [1]byte
		k := 0
		for {
			r, _, errno := syscall.RawSyscall(syscall.SYS_READ, rfd, uintptr(unsafe.Pointer(&buf[0])), 1)
			if errno != 0 || r != 1 {
				done <- wakeeState{err: fmt.Sprintf("wakee read: %v (%d bytes)", errno, r)}
				return
			}
			if buf[0] == quitByte {
				break
			}
			if k >= n {
				done <- wakeeState{err: "wakee: more bytes than cycles"}
				return
			}
			cpu, now := getcpu(), clockNs(clockMonotonic)
			if k == k0 {
				c0, b0 = clockNs(clockThreadCPU), voluntarySwitches(&ru)
			}
			wakeeCPU[k] = cpu
			latNs[k] = now - atomic.LoadInt64(&writeNs[k])
			k++
			spin.Rounds(y)
		}
		done <- wakeeState{cpuNs: clockNs(clockThreadCPU) - c0, blocks: voluntarySwitches(&ru) - b0, n: k}
	}()
	<-ready

	var ru syscall.Rusage
	var t0, c0, b0, h0 int64
	var hostCPUs int
	one := [1]byte{'x'}
	for i := 0; i < n; i++ {
		if i == k0 {
			h0, hostCPUs = hostIdleTicks()
			t0, c0, b0 = clockNs(clockMonotonic), clockNs(clockThreadCPU), voluntarySwitches(&ru)
		}
		spin.Rounds(x)
		wakerCPU[i] = getcpu()
		// the wakee reads this only after the write below has woken it: the pipe orders the two
		atomic.StoreInt64(&writeNs[i], clockNs(clockMonotonic))
		if _, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, wfd, uintptr(unsafe.Pointer(&one[0])), 1); errno != 0 {
			return result{}, fmt.Errorf("waker write: %v", errno)
		}
		spin.Rounds(z)
		if p.S > 0 {
			rawSleepUs(p.S)
		}
	}
	t1, c1, b1 := clockNs(clockMonotonic), clockNs(clockThreadCPU), voluntarySwitches(&ru)
	h1, hostCPUs1 := hostIdleTicks()
	q := [1]byte{quitByte}
	syscall.RawSyscall(syscall.SYS_WRITE, wfd, uintptr(unsafe.Pointer(&q[0])), 1)
	w := <-done
	if w.err != "" {
		return result{}, fmt.Errorf("%s", w.err)
	}
	if w.n != n {
		return result{}, fmt.Errorf("the wakee read %d wake-ups of %d", w.n, n)
	}

	wall := float64(t1 - t0)
	cycles := n - k0
	r := result{Round: round, Point: index, WakerBusyUs: p.X + p.Z, WakerBeforeUs: p.X, WakeeBusyUs: p.Y,
		SleepUs: p.S, Wakes: cycles, WallS: round6(wall / 1e9), CPUs: cpus}
	r.WakerUtil = round6(float64(c1-c0) / wall)
	r.WakeeUtil = round6(float64(w.cpuNs) / wall)
	r.UtilSum = round6(r.WakerUtil + r.WakeeUtil)
	r.WakerBlocksPerCyc = round6(float64(b1-b0) / float64(cycles))
	r.WakeeBlocksPerWk = round6(float64(w.blocks) / float64(cycles))
	if h0 >= 0 && h1 >= 0 && hostCPUs == hostCPUs1 {
		// the host's busy time (its CPUs' wall time less their idle time) less our two threads', as
		// a share of one CPU; /proc/stat's 10 ms ticks make it about +-0.03 over a second
		other := round6(float64(hostCPUs) - float64(h1-h0)/userHZ/(wall/1e9) - r.UtilSum)
		r.OtherUtil = &other
	}
	var same int
	var latSame, latOther []float64
	for k := k0; k < n; k++ {
		if wakeeCPU[k] == wakerCPU[k] {
			same++
			latSame = append(latSame, float64(latNs[k])/1e3)
		} else {
			latOther = append(latOther, float64(latNs[k])/1e3)
		}
		if k > k0 && wakeeCPU[k] != wakeeCPU[k-1] {
			r.WakeeCPUChanges++
		}
		if k > k0 && wakerCPU[k] != wakerCPU[k-1] {
			r.WakerCPUChanges++
		}
	}
	r.SameCPUShare = round6(float64(same) / float64(cycles))
	r.LatencySameUs, r.LatencyOtherUs = median(latSame), median(latOther)
	return r, nil
}

func round6(v float64) float64 {
	return math.Round(v*1e6) / 1e6
}

func median(v []float64) *float64 {
	if len(v) == 0 {
		return nil
	}
	sort.Float64s(v)
	m := round6(v[len(v)/2])
	return &m
}

// allowedCPUs is the number of CPUs in this thread's affinity mask.
func allowedCPUs() (int, error) {
	var mask [16]uint64
	_, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_GETAFFINITY, 0, uintptr(len(mask)*8),
		uintptr(unsafe.Pointer(&mask[0])))
	if errno != 0 {
		return 0, fmt.Errorf("sched_getaffinity: %v", errno)
	}
	n := 0
	for _, m := range mask {
		for ; m != 0; m &= m - 1 {
			n++
		}
	}
	return n, nil
}

// spinPerUs is rounds of spin per microsecond of this thread's CPU: the fastest of three tries, so
// that a try the host interrupted does not shorten every busy loop.
func spinPerUs() float64 {
	best := 0.0
	for i := 0; i < 3; i++ {
		const rounds = 1 << 21
		c0 := clockNs(clockThreadCPU)
		spin.Rounds(rounds)
		if us := float64(clockNs(clockThreadCPU)-c0) / 1e3; us > 0 && rounds/us > best {
			best = rounds / us
		}
	}
	return best
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "packbench:", err)
	os.Exit(1)
}

func main() {
	rounds := flag.Int("rounds", 2, "rounds over the grid")
	durS := flag.Float64("dur", 1.2, "seconds per point, about (the first 20 % are warm-up)")
	gridName := flag.String("grid", "default", "default (21 points) or quick (3 points, for the test)")
	custom := flag.String("points", "", "instead of -grid: X:Y:Z:S,... in microseconds")
	flag.Parse()
	if err := noasyncpreempt.Ensure(); err != nil {
		fail(err)
	}
	if *rounds < 1 || *durS <= 0 {
		fmt.Fprintln(os.Stderr, "packbench: -rounds must be >= 1 and -dur > 0")
		os.Exit(2)
	}
	points, ok := grids[*gridName]
	if *custom != "" {
		var err error
		if points, err = parsePoints(*custom); err != nil {
			fmt.Fprintln(os.Stderr, "packbench:", err)
			os.Exit(2)
		}
	} else if !ok {
		fmt.Fprintf(os.Stderr, "packbench: -grid must be default or quick (got %q)\n", *gridName)
		os.Exit(2)
	}
	cpus, err := allowedCPUs()
	if err != nil {
		fail(err)
	}
	if cpus < 2 {
		fail(fmt.Errorf("%d CPU allowed: with one CPU there is no idle CPU to spread a wake-up to", cpus))
	}
	debug.SetGCPercent(-1)
	runtime.LockOSThread()
	perUs := spinPerUs()
	enc := json.NewEncoder(os.Stdout)
	for r := 0; r < *rounds; r++ {
		for i, p := range points {
			n := int(*durS * 1e6 / float64(p.X+p.Z+p.S+cycleExtraUs))
			if n < 50 {
				n = 50
			}
			res, err := runPoint(r, i, p, n, perUs, cpus)
			if err != nil {
				fail(fmt.Errorf("round %d, point %d (%d:%d:%d:%d): %v", r, i, p.X, p.Y, p.Z, p.S, err))
			}
			if err := enc.Encode(res); err != nil {
				fail(err)
			}
		}
	}
}
