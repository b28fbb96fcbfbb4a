"""The host's CPU per sleep and wake-up of a thread (host.wakeup_*) and its timer latency: the
curve and its fit, the wakebench reader, and what they do to a Go service that idles between
requests. A naive model (CPU = requests x CPU per request) gives the same CPU per request at
every rate; the mechanism makes a request at a low rate cost more than one at a high rate, and
costs a saturated process nothing."""

import math

import pytest

from cfsim.kernel.wakeup import WakeupCost, fit_wakeup_curve, timer_latency_us
from cfsim.lab.wakeup import WakebenchError, params_toml, read_wakebench, wakeup_params
from cfsim.scenario import ScenarioError, load_scenario
from cfsim.simulation import simulate

HOST = ["host.wakeup_us=20", "host.wakeup_cold_us=60", "host.wakeup_cold_ms=10", "host.timer_latency_us=40"]


def test_cycle_cost_grows_with_the_sleep_and_saturates():
    w = WakeupCost(base_ns=20_000, cold_ns=60_000, cold_tau_ns=10_000_000)
    costs = [w.cycle_ns(s) for s in (0, 50_000, 1_000_000, 10_000_000, 100_000_000, 10**12)]
    assert costs == sorted(costs)
    assert costs[0] == 20_000 and costs[-1] == 80_000
    assert abs(costs[3] - (20_000 + 60_000 * (1 - math.exp(-1)))) <= 1


def test_the_fit_recovers_a_noisy_curve():
    pts = [(s, 25 + 55 * -math.expm1(-s / 6000) + (1.5 if i % 2 else -1.5))
           for i, s in enumerate((50, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000))]
    base, cold, tau = fit_wakeup_curve(pts)
    assert base == pytest.approx(25, abs=3) and cold == pytest.approx(55, abs=5) and tau == pytest.approx(6, rel=0.3)
    with pytest.raises(ValueError, match="at least 3"):
        fit_wakeup_curve([(50, 20), (100, 21)])
    assert timer_latency_us([(50, 30.0), (200, 20.0)]) == 0.0   # never below 0


def _bench_line(round_, sleep_us, cpu_us, late_us=90.0, busy=400.0):
    wall = busy + sleep_us + late_us
    return (f'{{"round": {round_}, "sleep_us": {sleep_us}, "cycles": 100, "busy_cpu_us_mean": {busy}, '
            f'"cycle_cpu_us_mean": {cpu_us}, "cycle_cpu_us_median": {cpu_us}, "wall_us_per_cycle": {wall}}}')


def test_wakebench_output_to_params_and_a_params_file(tmp_path):
    sleeps = (50, 200, 1000, 5000, 10000, 20000, 50000)
    text = "\n".join(_bench_line(r, s, round(20 + 60 * -math.expm1(-s / 10_000) + r, 3))
                     for r in range(3) for s in sleeps)
    text += "".join(f'\n{{"kind": "futex_wake", "round": {r}, "latency_us_median": {m}}}' for r, m in enumerate((30, 25, 40)))
    rows, meta = read_wakebench(text, "bench.jsonl")
    assert meta["source"] == "bench.jsonl" and meta["rounds"] == 3 and len(rows) == 21
    params = wakeup_params(rows, meta["futex_wake"])
    assert params["host.wakeup_latency_us"] == 30.0
    assert params["host.wakeup_us"] == pytest.approx(21, abs=0.5)          # the median round
    assert params["host.wakeup_cold_us"] == pytest.approx(60, abs=1)
    assert params["host.timer_latency_us"] == pytest.approx(40)
    toml = params_toml(params, rows, "python -m cfsim lab wakeup", meta["futex_wake"])
    f = tmp_path / "host.toml"
    f.write_text(toml)
    from cfsim.validation.calibrate import read_params

    assert read_params(f) == params
    # the parameters are valid scenario keys
    sc = load_scenario("cpu-bound-threads", [f"{k}={v}" for k, v in params.items()])
    assert sc["host.wakeup_cold_ms"] == params["host.wakeup_cold_ms"]


def test_malformed_wakebench_output_names_the_line():
    good = _bench_line(0, 50, 20.0)
    with pytest.raises(WakebenchError, match=r"out.jsonl line 2: not JSON"):
        read_wakebench(good + "\n{oops\n", "out.jsonl")
    with pytest.raises(WakebenchError, match=r"line 1: missing cycle_cpu_us_mean"):
        read_wakebench('{"round": 0, "sleep_us": 50, "cycles": 1, "busy_cpu_us_mean": 1, "wall_us_per_cycle": 2}')
    with pytest.raises(WakebenchError, match="line 2: futex_wake without a numeric latency_us_median"):
        read_wakebench(good + '\n{"kind": "futex_wake", "latency_us_median": "fast"}')
    with pytest.raises(WakebenchError, match="no measurements"):
        read_wakebench("\n\n", "empty.jsonl")


def test_bad_host_wakeup_values_name_the_key():
    with pytest.raises(ScenarioError, match="host.wakeup_us"):
        load_scenario("cpu-bound-threads", ["host.wakeup_us=-1"])
    with pytest.raises(ScenarioError, match="host.wakeup_cold_ms"):
        load_scenario("cpu-bound-threads", ["host.wakeup_cold_ms=0"])


def _open_service(rate_per_s, extra=()):
    over = ["host.cpus=2", "cgroup.cpu_limit=1.5", "go.gomaxprocs=1", "workload.kind=open",
            "workload.arrivals=fixed", f"workload.rate_per_s={rate_per_s}", "workload.cpu_ms_per_request=0.4",
            "workload.alloc_kb_per_request=2", "go.live_heap_mb=16", "run.duration_s=4", "run.warmup_s=1", *extra]
    s = simulate(load_scenario("cpu-bound-threads", over)).summary
    return s["cpu_usage_cores"] / s["throughput_per_s"] * 1e6   # CPU per request [us]


def test_a_service_idle_between_requests_pays_per_request_and_more_at_low_rates():
    # without the host's wake-up cost a request costs about the same at 200/s and at 2,000/s
    base_low, base_high = _open_service(200), _open_service(2000)
    low, high = _open_service(200, HOST), _open_service(2000, HOST)
    assert abs(base_low - base_high) < 0.1 * base_high
    # with it: every request wakes an M (and sysmon) from a sleep; at 200/s the sleeps are
    # ~4.5 ms long and colder, at 2,000/s ~0.1 ms
    assert low - base_low > 40
    assert (low - base_low) > 1.5 * (high - base_high)
    assert low > 1.1 * high


def test_a_saturated_process_never_sleeps_and_pays_nothing():
    over = ["host.cpus=2", "cgroup.cpu_limit=1", "go.gomaxprocs=1", "workload.kind=closed", "workload.clients=8",
            "workload.cpu_ms_per_request=0.2", "run.duration_s=2", "run.warmup_s=0.5"]
    a = simulate(load_scenario("cpu-bound-threads", over)).summary
    b = simulate(load_scenario("cpu-bound-threads", over + HOST)).summary
    assert b["throughput_per_s"] == pytest.approx(a["throughput_per_s"], rel=0.01)


def test_os_threads_that_sleep_pay_each_wake_up():
    over = ["host.cpus=2", "workload.kind=threads", "workload.threads=1", "workload.burn_ms=0.4",
            "workload.sleep_ms=5", "run.duration_s=2", "run.warmup_s=0"]
    a = simulate(load_scenario("cpu-bound-threads", over)).summary
    b = simulate(load_scenario("cpu-bound-threads", over + HOST)).summary
    per_burn_us = (b["cpu_usage_cores"] / b["throughput_per_s"] - a["cpu_usage_cores"] / a["throughput_per_s"]) * 1e6
    # a 5 ms sleep: 20 + 60 x (1 - exp(-0.5)) = 43.6 us per wake-up
    assert per_burn_us == pytest.approx(43.6, rel=0.05)


def test_defaults_are_off():
    sc = load_scenario("cpu-bound-threads")
    assert not WakeupCost.from_scenario(sc).enabled


def test_lab_wakeup_cli_fits_a_saved_output_and_validate_takes_two_params_files(tmp_path, capsys):
    from cfsim.cli import main

    sleeps = (50, 200, 1000, 5000, 10000, 20000, 50000)
    saved = tmp_path / "bench.jsonl"
    saved.write_text("\n".join(_bench_line(0, s, round(22 + 50 * -math.expm1(-s / 8000), 3)) for s in sleeps))
    out = tmp_path / "host.toml"
    assert main(["lab", "wakeup", "--from", str(saved), "--out", str(out)]) == 0
    assert "host.wakeup_us = 22.0" in capsys.readouterr().out
    assert main(["lab", "wakeup", "--from", str(tmp_path / "missing.jsonl")]) == 2
    assert "no such file" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text(_bench_line(0, 50, 20.0) + "\nnot json\n")
    assert main(["lab", "wakeup", "--from", str(bad)]) == 2
    assert "bad.jsonl line 2" in capsys.readouterr().err
    # two --params files that disagree on a key: a clear error, nothing run
    other = tmp_path / "other.toml"
    other.write_text('[params]\n"host.wakeup_us" = 5.0\n')
    assert main(["validate", str(tmp_path), "--params", str(out), "--params", str(other), "--no-progress"]) == 2
    assert "host.wakeup_us is 22.0 in host.toml but 5.0 in other.toml" in capsys.readouterr().err


def test_only_a_wake_up_onto_an_idle_cpu_pays_and_colder_after_longer_idle():
    from cfsim.engine.cfs import CfsEngine

    w = WakeupCost(base_ns=20_000, cold_ns=60_000, cold_tau_ns=10_000_000)

    def cpu_of_one_wake(busy_neighbour: bool, idle_ns: int, wakeup_cost: bool = True) -> int:
        eng = CfsEngine(cpus=1, hz=1000, wakeup=w)
        if busy_neighbour:   # another thread of the group keeps the only CPU busy throughout
            eng.run(eng.new_thread("busy"), 10**9, lambda tid: None)
        t = eng.new_thread("sleeper", wakeup_cost=wakeup_cost)
        eng.run(t, 100_000, lambda tid: None)                  # runs, then sleeps
        eng.call_at(100_000 + idle_ns, lambda: eng.run(t, 100_000, lambda tid: None))
        eng.run_until(2 * 10**9)
        return eng.thread_cpu_ns(t) - 200_000

    first = w.cycle_ns(0)   # the first run starts on a CPU idle since t=0, and ends that much later
    assert cpu_of_one_wake(False, 1_000_000) == first + w.cycle_ns(1_000_000 - first)
    assert cpu_of_one_wake(False, 20_000_000) == first + w.cycle_ns(20_000_000 - first) \
        > cpu_of_one_wake(False, 1_000_000)
    assert cpu_of_one_wake(True, 1_000_000) == 0             # woken onto a busy CPU: a plain switch
    assert cpu_of_one_wake(False, 1_000_000, wakeup_cost=False) == 0


def test_wake_up_latency_holds_the_spinning_m_and_delays_the_request():
    # an open loop with fanout 4 at GOMAXPROCS 8 on 2 CPUs: while a woken M is on its way to an
    # idle CPU it holds its P and nmspinning, so the runtime's wakep starts no other M
    # (proc.go: wakep "only start one if none exist already")
    over = ["host.cpus=2", "go.gomaxprocs=8", "workload.kind=open", "workload.arrivals=poisson",
            "workload.rate_per_s=2000", "workload.fanout=4", "workload.cpu_ms_per_request=0.1",
            "run.duration_s=2", "run.warmup_s=0.5"]
    a = simulate(load_scenario("cpu-bound-threads", over)).summary
    b = simulate(load_scenario("cpu-bound-threads", over + ["host.wakeup_latency_us=30"])).summary
    assert b["os_thread_wakes_per_s"] < 0.9 * a["os_thread_wakes_per_s"]
    assert b["throughput_per_s"] == pytest.approx(a["throughput_per_s"], rel=0.02)
    # at low load every request wakes an M from idle: its latency adds to the request's
    low = ["host.cpus=2", "go.gomaxprocs=1", "workload.kind=open", "workload.arrivals=fixed",
           "workload.rate_per_s=100", "workload.cpu_ms_per_request=0.2", "run.duration_s=3", "run.warmup_s=0.5"]
    p0 = simulate(load_scenario("cpu-bound-threads", low)).summary["latency_p50_s"]
    p1 = simulate(load_scenario("cpu-bound-threads", low + ["host.wakeup_latency_us=30"])).summary["latency_p50_s"]
    assert p1 - p0 == pytest.approx(30e-6, abs=5e-6)


def test_a_client_sending_in_bunches_wakes_the_runtime_less_per_request():
    """The lab's load generator wakes late and sends what is overdue at once: one wake-up of an
    idle Go process then serves a bunch. The same requests (Poisson, 2,000/s, 0.1 ms) sent by such
    a client wake fewer Ms per request; a model that counts one wake-up per request, or per
    request at an idle process, given the scheduled times, cannot show it."""
    def run(late_ms, p99_ms):
        raw = {"host": {"cpus": 2, "hz": 250}, "cgroup": {"cpu_limit": 2.0},
               "go": {"gomaxprocs": 2, "live_heap_mb": 16},
               "workload": {"kind": "open", "arrivals": "poisson", "rate_per_s": 2000, "cpu_ms_per_request": 0.1,
                            "client_send_late_ms": late_ms, "client_send_late_p99_ms": p99_ms},
               "run": {"duration_s": 3.0, "warmup_s": 0.5, "seed": 2}}
        s = simulate(load_scenario(raw)).summary
        return s["os_thread_wakes_per_s"] / s["throughput_per_s"], s["throughput_per_s"]

    (w0, t0), (w1, t1) = run(0.0, 0.0), run(0.4, 1.5)
    assert t1 == pytest.approx(t0, rel=0.03)
    assert w1 < 0.8 * w0
