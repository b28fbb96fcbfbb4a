"""``cfsim audit|vpa replay|recommend --prometheus-url`` against Debian's real Prometheus on loopback.

cfsim simulates known containers and writes their series with cAdvisor, kube-state-metrics and Go
runtime names (:mod:`cfsim.advice.exports`); ``promtool tsdb create-blocks-from openmetrics`` turns
them into a TSDB; ``prometheus`` serves it over TLS (a throwaway CA made here) with basic auth
(``--web.config.file``). Planted: a trapped container (GOMAXPROCS 1 under a 1.5-core limit, known
only from ``go_cpu_classes_total_cpu_seconds_total``), a healthy one (``go_sched_gomaxprocs_threads``)
and an over-provisioned one (no Go metrics: GOMAXPROCS unknown), in cluster ``prod-a``; a copy of
the healthy one in cluster ``prod-b``. Skips (with the reason) without promtool and prometheus.
"""
from __future__ import annotations

import datetime as dt
import ipaddress
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from cfsim import simulate
from cfsim.advice.exports import simulated_series, write_simulated_openmetrics
from cfsim.cli import main

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = str(ROOT / "data/lab/scenarios/cpu-stream.toml")      # demand 1.6 cores, 2-CPU node
SHORT = ["run.duration_s=8", "run.warmup_s=1"]
T0 = 1_767_225_600            # 2026-01-01T00:00:00Z
SPAN_S, SCRAPE_S = 2 * 3600, 15
TRAPPED = ("shop", "checkout-7d9f8b6c5d-x2x7k", "app")
HEALTHY = ("shop", "api-5f7c9d8b4-abcde", "app")
OVER = ("batch", "report-6b5d4c7f9-qwert", "app")
PLANTED = {
    TRAPPED: ["cgroup.cpu_limit=1.5", "go.gomaxprocs=1"],
    HEALTHY: ["cgroup.cpu_limit=2.0", "go.gomaxprocs=2"],
    OVER: ["host.cpus=4", "cgroup.cpu_limit=3.0", "go.gomaxprocs=3", "workload.rate_per_s=500"],
}
EXPECTED = {TRAPPED: ["trapped"], HEALTHY: [], OVER: ["headroom"]}
USER, PASSWORD = "cfsim", "s3cret-for-the-test"

pytestmark = pytest.mark.skipif(
    not (shutil.which("promtool") and shutil.which("prometheus")),
    reason="needs promtool and prometheus on PATH (Debian: apt-get install prometheus)")


def _ca(name: str):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(hours=1))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    return key, cert


def _tls_files(folder: Path) -> tuple[Path, Path, Path, Path]:
    """A CA, a server certificate for 127.0.0.1 signed by it, and an unrelated CA."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    ca_key, ca_cert = _ca("cfsim test CA")
    _, other_cert = _ca("some other CA")
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca_cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(hours=1)).not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    paths = [folder / n for n in ("ca.pem", "server.pem", "server.key", "other-ca.pem")]
    paths[0].write_bytes(ca_cert.public_bytes(pem))
    paths[1].write_bytes(cert.public_bytes(pem))
    paths[2].write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    paths[3].write_bytes(other_cert.public_bytes(pem))
    return tuple(paths)  # type: ignore[return-value]


@pytest.fixture(scope="module")
def planted():
    results = {k: simulate(SCENARIO, SHORT + v) for k, v in PLANTED.items()}
    go = {TRAPPED: ["go_cpu_classes_total_cpu_seconds_total", "go_gc_gogc_percent"],
          HEALTHY: ["go_sched_gomaxprocs_threads", "go_gc_gogc_percent", "go_gc_gomemlimit_bytes"], OVER: []}
    series = simulated_series(results, SPAN_S, SCRAPE_S, go_metrics=go, owners=True,
                              vpa_target_cores={OVER: 0.6}, extra_labels={"cluster": "prod-a"})
    decoy = simulated_series({HEALTHY: results[HEALTHY]}, SPAN_S, SCRAPE_S, owners=True,
                             extra_labels={"cluster": "prod-b"})
    return series + decoy


@pytest.fixture(scope="module")
def server(planted, tmp_path_factory, start_prometheus):
    import bcrypt

    work = tmp_path_factory.mktemp("live")
    om = write_simulated_openmetrics(planted, work / "cluster.om", start_unix_s=T0)
    tsdb = work / "data"
    subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", str(om), str(tsdb)],
                   check=True, capture_output=True, timeout=120)
    ca, crt, key, other = _tls_files(work)
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
    web = work / "web.yml"
    web.write_text(f"tls_server_config:\n  cert_file: {crt}\n  key_file: {key}\n"
                   f"basic_auth_users:\n  {USER}: '{hashed}'\n")
    pw = work / "password"
    pw.write_text(PASSWORD + "\n")
    bad_pw = work / "wrong-password"
    bad_pw.write_text("not-it\n")
    with start_prometheus(work, tsdb, web_config=web, ca=ca, basic_auth=(USER, PASSWORD)) as url:
        yield {"url": url, "ca": ca, "other_ca": other, "password": pw, "wrong_password": bad_pw, "work": work}


def _live(server, *extra, password="password", ca="ca", cluster="prod-a"):
    args = ["--prometheus-url", server["url"], "--prometheus-ca", str(server[ca]), "--prometheus-user", USER,
            "--prometheus-password-file", str(server[password]), "--start", str(T0), "--end", str(T0 + SPAN_S),
            "--no-progress"]
    if cluster:
        args += ["--cluster", cluster]
    return args + list(extra)


def _run(capsys, argv):
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_audit_finds_exactly_the_planted_problems(server, capsys, tmp_path):
    code, out, err = _run(capsys, ["audit", *_live(server, "--step", "1m"), "--format", "json", "--no-simulate",
                                   "--report", str(tmp_path / "audit")])
    assert code == 0, err
    data = json.loads(out)
    got = {(c["namespace"], c["pod"], c["container"]): sorted(c["flags"]) for c in data["containers"]}
    assert got == EXPECTED
    by = {(c["namespace"], c["pod"], c["container"]): c for c in data["containers"]}
    # GOMAXPROCS: from the rate of go_cpu_classes_total_cpu_seconds_total, from the gauge, unknown
    assert by[TRAPPED]["gomaxprocs_source"] == "rate(go_cpu_classes_total_cpu_seconds_total)"
    assert by[TRAPPED]["stats"]["gomaxprocs"] == 1 and by[TRAPPED]["stats"]["gomaxprocs_observed"]
    assert by[HEALTHY]["gomaxprocs_source"] == "go_sched_gomaxprocs_threads"
    assert by[HEALTHY]["stats"]["gomaxprocs"] == 2
    assert by[OVER]["gomaxprocs_source"] is None
    assert "go_sched_gomaxprocs_threads" in by[OVER]["missing"]["GOMAXPROCS"]
    assert by[TRAPPED]["go_settings"] == {"gogc": 100.0}
    # owners from kube-state-metrics, the VPA's current target from its VPA metrics
    assert by[TRAPPED]["workload"]["kind"] == "Deployment" and by[TRAPPED]["workload"]["name"] == "checkout"
    assert by[OVER]["vpa_now"]["target_m"] == 600
    assert data["prometheus"]["cluster"] == "prod-a"
    # every family is on this server except the VPA bounds other than the target (only it was planted)
    assert set(data["prometheus"]["absent"]) == {
        f"kube_verticalpodautoscaler_status_recommendation_containerrecommendations_{b}"
        for b in ("lowerbound", "upperbound", "uncappedtarget")}
    assert (tmp_path / "audit.html").exists()


def test_audit_emits_patches_that_kubectl_applies_and_the_schemas_accept(server, capsys, tmp_path):
    yaml = pytest.importorskip("yaml")
    code, out, err = _run(capsys, ["audit", *_live(server, "--step", "1m"), "--duration", "4", "--no-report",
                                   "--emit", "patch", "--format", "yaml"])
    assert code == 0, err
    docs = [d for d in yaml.safe_load_all(out) if d]
    names = {d["metadata"]["name"]: d for d in docs}
    assert set(names) == {"checkout", "report"}       # the healthy one needs no patch
    checkout = names["checkout"]["spec"]["template"]["spec"]["containers"][0]
    assert checkout["env"] == [{"name": "GOMAXPROCS", "value": "2"}]   # ceil(1.5)
    report = names["report"]["spec"]["template"]["spec"]["containers"][0]
    assert float(report["resources"]["limits"]["cpu"].rstrip("m")) / (1000 if report["resources"]["limits"]["cpu"]
                                                                      .endswith("m") else 1) < 3.0
    assert "kubectl patch deployment checkout -n shop --type strategic" in out
    for doc in docs:
        _check_patch(doc, tmp_path)


QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?$")


#: the CPU request and limit each planted workload runs with (what kube-state-metrics reports)
RUNNING_CPU = {"checkout": "1500m", "api": "2", "report": "3"}


def _deployment(name: str, namespace: str, container: str) -> dict:
    cpu = RUNNING_CPU[name]
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [
                                      {"name": container, "image": f"registry.example/{name}:1.0",
                                       "resources": {"requests": {"cpu": cpu, "memory": "256Mi"},
                                                     "limits": {"cpu": cpu, "memory": "512Mi"}},
                                       "env": [{"name": "LOG_LEVEL", "value": "info"}]},
                                      {"name": "sidecar", "image": "registry.example/proxy:2"}]}}}}


def _check_patch(patch: dict, tmp_path: Path) -> None:
    """The patch merged into a Deployment by kubectl (strategic merge, offline) validates against the
    Kubernetes OpenAPI schemas, keeps the other container and env var, and has canonical quantities."""
    kv = pytest.importorskip("kubernetes_validate")
    yaml = pytest.importorskip("yaml")
    c = patch["spec"]["template"]["spec"]["containers"][0]
    for part in c.get("resources", {}).values():
        for q in part.values():
            assert isinstance(q, str) and QUANTITY.match(q), q
    base = _deployment(patch["metadata"]["name"], patch["metadata"]["namespace"], c["name"])
    if not shutil.which("kubectl"):
        pytest.skip("kubectl not installed: cannot apply the strategic merge")
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(base))
    (tmp_path / "patch.yaml").write_text(yaml.safe_dump(patch))
    res = subprocess.run(["kubectl", "patch", "--local", "-f", str(tmp_path / "base.yaml"), "--type", "strategic",
                          "--patch-file", str(tmp_path / "patch.yaml"), "-o", "yaml"],
                         capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    merged = yaml.safe_load(res.stdout)
    kv.validate(merged, "1.32", strict=True)
    containers = {x["name"]: x for x in merged["spec"]["template"]["spec"]["containers"]}
    assert set(containers) == {c["name"], "sidecar"}
    env = {e["name"] for e in containers[c["name"]].get("env", [])}
    assert "LOG_LEVEL" in env
    for kind in ("limits", "requests"):
        if kind in c.get("resources", {}):
            assert containers[c["name"]]["resources"][kind]["cpu"] == c["resources"][kind]["cpu"]
    lim = containers[c["name"]]["resources"]["limits"]["cpu"]
    req = containers[c["name"]]["resources"]["requests"]["cpu"]
    assert _cores(req) <= _cores(lim)


def _cores(q: str) -> float:
    return float(q[:-1]) / 1000 if q.endswith("m") else float(q)


def test_audit_emits_the_vpa_status_block(server, capsys):
    yaml = pytest.importorskip("yaml")
    code, out, err = _run(capsys, ["audit", *_live(server, "--step", "1m"), "--no-simulate", "--no-report",
                                   "--emit", "vpa-status", "--format", "yaml"])
    assert code == 0, err
    docs = [d for d in yaml.safe_load_all(out) if d]
    assert len(docs) == 3
    for d in docs:
        (rec,) = d["status"]["recommendation"]["containerRecommendations"]
        assert rec["containerName"] == "app"
        assert set(rec) == {"containerName", "target", "lowerBound", "upperBound", "uncappedTarget"}
        for field in ("target", "lowerBound", "upperBound", "uncappedTarget"):
            assert QUANTITY.match(rec[field]["cpu"]), rec
        assert _cores(rec["lowerBound"]["cpu"]) <= _cores(rec["target"]["cpu"]) <= _cores(rec["upperBound"]["cpu"])
    assert "writes today (kube-state-metrics): target 600m" in out


def _planted_csv(planted, key, step_s: int, path: Path) -> Path:
    """The usage the test planted, per ``step_s`` window (what `vpa replay` reads from a CSV)."""
    (usage,) = [s for s in planted if s.metric == "container_cpu_usage_seconds_total"
                and (s.labels["namespace"], s.labels["pod"], s.labels["container"]) == key
                and s.labels["cluster"] == "prod-a"]
    keep = np.isclose(np.mod(usage.t_s, step_s), 0)
    t, v = usage.t_s[keep], usage.values[keep]
    rows = [f"{T0 + t1:.3f},{float((v1 - v0) / (t1 - t0))!r},{'/'.join(key)}"
            for t0, t1, v0, v1 in zip(t[:-1], t[1:], v[:-1], v[1:])]
    path.write_text("timestamp,cpu_cores,container\n" + "\n".join(rows) + "\n")
    return path


def test_vpa_replay_live_equals_the_replay_of_the_same_data_as_csv(server, planted, capsys, tmp_path):
    code, out, err = _run(capsys, ["vpa", "replay", *_live(server, "--step", "1m", "--namespace", "shop",
                                                          "--selector", 'pod=~"checkout-.*"'), "--format", "json"])
    assert code == 0, err
    live = json.loads(out)
    csv = _planted_csv(planted, TRAPPED, 60, tmp_path / "usage.csv")
    code, out, err = _run(capsys, ["vpa", "replay", str(csv), "--format", "json"])
    assert code == 0, err
    offline = json.loads(out)
    assert live["containers"] == offline["containers"] == ["/".join(TRAPPED)]
    assert len(live["recommendations"]) == len(offline["recommendations"]) > 100
    assert live["recommendations"] == offline["recommendations"]
    assert live["final"] == offline["final"]
    assert 900 <= live["final"]["target"] <= 1300   # usage pinned at GOMAXPROCS 1 core: P90 bucket x 1.15


def test_recommend_live_answers_in_kubernetes_terms(server, capsys, tmp_path):
    argv = ["recommend", *_live(server, "--step", "1m", "--namespace", "shop", "--selector", 'pod=~"checkout-.*"'),
            "--slo", "throttled_ratio<=0.1", "--slo", "throughput_per_s>=1450", "--duration", "3",
            "--coarse-step", "0.5", "--no-burst", "--gomaxprocs", "automaxprocs,ceil", "--vpa-rounds", "1"]
    code, out, err = _run(capsys, argv + ["--format", "json"])
    assert code == 0, err
    (t,) = json.loads(out)["targets"]
    assert t["name"] == "shop/deployment/checkout/app"
    assert t["peer_history"] == "observed"
    rec = t["recommendation"]
    # the trapped service (demand fills its 1.5-core limit) needs GOMAXPROCS >= 2: not automaxprocs' 1
    assert rec["gomaxprocs"] >= 2
    k8s = t["kubernetes"]
    c = k8s["patch"]["spec"]["template"]["spec"]["containers"][0]
    assert c["name"] == "app" and c["env"] == [{"name": "GOMAXPROCS", "value": str(rec["gomaxprocs"])}]
    assert k8s["vpa_status"]["recommendation"]["containerRecommendations"][0]["containerName"] == "app"
    code, out, err = _run(capsys, argv + ["--emit", "patch", "--format", "yaml"])
    assert code == 0, err
    assert "kubectl patch deployment checkout -n shop --type strategic --patch-file /dev/stdin" in out
    yaml = pytest.importorskip("yaml")
    (patch,) = [d for d in yaml.safe_load_all(out) if d]
    _check_patch(patch, tmp_path)


def test_vpa_replay_live_refuses_a_selection_of_several_workload_containers(server, capsys):
    code, _, err = _run(capsys, ["vpa", "replay", *_live(server)])
    assert code == 2
    assert err.count("\n") == 1 and "matches 2 containers" in err


@pytest.mark.parametrize("case, argv, expected", [
    ("wrong password", dict(password="wrong_password"), "HTTP 401 Unauthorized: the server refused the credentials"),
    ("bad CA", dict(ca="other_ca"), "TLS handshake failed: unable to get local issuer certificate"),
    ("empty selector", dict(extra=("--selector", 'pod="no-such-pod"')), "empty result: no series match"),
    ("two clusters", dict(cluster=None), "matches containers in 2 clusters (prod-a, prod-b"),
])
def test_live_failures_are_one_clear_line_and_exit_2(server, capsys, case, argv, expected):
    extra = argv.pop("extra", ())
    code, out, err = _run(capsys, ["audit", *_live(server, *extra, **argv), "--no-simulate", "--no-report"])
    assert code == 2, (case, err)
    assert out == ""
    assert err.startswith("error: prometheus: ") and err.count("\n") == 1, err
    assert expected in err, err
    assert "label values of __name__" in err or "container_cpu_usage_seconds_total{" in err  # what was asked


def test_unreachable_host_is_one_clear_line_and_exit_2(capsys, free_port):
    port = free_port
    code, out, err = _run(capsys, ["audit", "--prometheus-url", f"https://127.0.0.1:{port}", "--history", "1h",
                                   "--no-simulate", "--no-report", "--no-progress"])
    assert code == 2
    assert err.count("\n") == 1 and "cannot connect" in err and "Connection refused" in err, err
