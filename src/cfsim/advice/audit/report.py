"""The audit's report: the ranked table (CSV), markdown, HTML with a plot per container, and the
JSON summary the command prints."""
from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from cfsim.advice.audit.flags import Stats
from cfsim.advice.audit.load import Container
from cfsim.output import markdown_table

if TYPE_CHECKING:
    from cfsim.advice.audit import AuditResult

__all__ = ["write_report", "summary_json", "container_json"]


def _markdown(df: pd.DataFrame) -> str:
    return markdown_table(df.astype(object).where(df.notna(), None).to_dict("records"), list(df.columns))


def _plot_png(c: Container, st: Stats) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = c.t - c.t[0]
    fig, axes = plt.subplots(2, 1, figsize=(7, 3.6), sharex=True, gridspec_kw={"height_ratios": [2, 1]})
    ax = axes[0]
    ax.plot(t, c.usage, lw=1.2, label="usage [cores]")
    if c.limit is not None:
        ax.plot(t, c.limit, "--", lw=1, color="C3", label="limit [cores]")
    if c.gomaxprocs is not None:
        ax.plot(t, c.gomaxprocs, ":", lw=1.5, color="C2", label="GOMAXPROCS")
    elif st.gomaxprocs is not None:
        ax.axhline(st.gomaxprocs, ls=":", lw=1.5, color="C2", label="GOMAXPROCS (assumed)")
    ax.set_ylabel("cores")
    tops = [np.nanmax(c.usage)] + [np.nanmax(x) for x in (c.limit, c.gomaxprocs) if x is not None
                                   and np.isfinite(x).any()] + [float(st.gomaxprocs or 0)]
    ax.set_ylim(0, 1.15 * max(tops) + 0.05)
    ax.legend(loc="upper right", fontsize=7)
    ax.set_title(c.name, fontsize=9)
    ax2 = axes[1]
    if c.throttled_ratio is not None:
        ax2.plot(t, 100 * np.nan_to_num(c.throttled_ratio), lw=1, color="C1")
    ax2.set_ylabel("throttled %")
    ax2.set_ylim(0, 105)
    ax2.set_xlabel("time [s]")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def _h(x: Any) -> str:
    import html

    return html.escape("" if x is None else str(x))


def write_report(result: "AuditResult", out: str | Path) -> dict[str, Path]:
    """``<out>.csv``, ``<out>.md`` and ``<out>.html`` (plots embedded as PNG); ``out`` is a path
    prefix, or a folder (then ``audit.*`` inside it)."""
    out = Path(out)
    if out.is_dir() or str(out).endswith("/"):
        out = out / "audit"
    out.parent.mkdir(parents=True, exist_ok=True)
    df = result.table()
    paths = {"csv": out.with_suffix(".csv"), "md": out.with_suffix(".md"), "html": out.with_suffix(".html")}
    df.to_csv(paths["csv"], index=False)
    clean = [c.name for c in result.containers if not result.flags_by_container()[c.name]]
    md = [f"# cfsim audit: {len(result.containers)} containers, {len(result.findings)} findings\n",
          _markdown(df[["rank", "namespace", "pod", "container", "flag", "detail", "evidence", "fix", "effect"]]),
          "\nNo findings: " + (", ".join(clean) if clean else "none") + "\n"]
    paths["md"].write_text("\n".join(md))
    body = [f"<h1>cfsim audit</h1><p>{len(result.containers)} containers, {len(result.findings)} findings, "
            f"ranked by simulated impact (performance first, then headroom).</p>",
            df.drop(columns=["source"]).to_html(index=False, escape=True, na_rep="")]
    first = {}
    for rank, f in enumerate(result.findings):
        first.setdefault(f.container.name, rank)
    for c in sorted(result.containers, key=lambda c: (first.get(c.name, len(result.findings)), c.name)):
        st = result.stats[c.key]
        fs = [f for f in result.findings if f.container is c]
        body.append(f"<h2>{_h(c.name)}</h2><p><small>{_h(c.source)}<br/>series: {_h(', '.join(c.series))}"
                    f"</small></p>")
        body.append(f"<p>limit {_h(st.limit)} cores, request {_h(c.request)}, GOMAXPROCS {_h(st.gomaxprocs)}"
                    f"{'' if st.gomaxprocs_observed else ' (assumed)'}; usage p50 {st.usage_p50:.3f}, p99 "
                    f"{st.usage_p99:.3f} cores; throttled "
                    f"{_h(None if st.throttled_ratio is None else round(100 * st.throttled_ratio, 1))} %</p>")
        if not fs:
            body.append("<p><b>No findings.</b></p>")
        for f in fs:
            body.append(f"<h3>{_h(f.flag)}: {_h(f.detail)}</h3><ul><li><b>Evidence:</b> {_h(f.evidence)}</li>"
                        f"<li><b>Fix:</b> {_h(f.fix)}</li><li><b>Predicted effect:</b> {_h(f.effect)}</li></ul>")
        body.append(f'<img alt="{_h(c.name)}" src="data:image/png;base64,{_plot_png(c, st)}"/>')
    style = ("body{font-family:sans-serif;max-width:1100px;margin:auto}table{border-collapse:collapse;font-size:12px}"
             "td,th{border:1px solid #ccc;padding:3px}")
    paths["html"].write_text(f"<!doctype html><html><head><meta charset='utf-8'><title>cfsim audit</title>"
                             f"<style>{style}</style></head><body>{''.join(body)}</body></html>\n")
    return paths


def container_json(c: Container, st: Stats, flags: list[str]) -> dict[str, Any]:
    """One container: flags, statistics, where GOMAXPROCS came from, what is unknown and how to learn it."""
    return {"name": c.name, "namespace": c.key[0], "pod": c.key[1], "container": c.key[2], "flags": flags,
            "stats": st.as_dict(), "gomaxprocs_source": c.gomaxprocs_source or None, "go_settings": c.go_settings,
            "workload": None if c.workload is None else {"kind": c.workload[0], "name": c.workload[1],
                                                         "source": c.workload_source},
            "vpa_now": c.vpa, "missing": c.missing, "series": c.series, "source": c.source}


def summary_json(result: "AuditResult") -> dict[str, Any]:
    """Containers (flags, statistics, unknowns), findings, and the live query's meta when there is one."""
    flags = result.flags_by_container()
    out: dict[str, Any] = {"containers": [container_json(c, result.stats[c.key], flags[c.name])
                                          for c in result.containers],
                           "findings": json.loads(result.table().to_json(orient="records"))}
    if result.meta:
        m = result.meta
        out["prometheus"] = {"url": m.get("source"), "start": str(m.get("start")), "end": str(m.get("end")),
                             "step_s": m.get("step"), "selector": m.get("selector"), "cluster": m.get("cluster"),
                             "requests": m.get("requests"), "series": m.get("series"), "samples": m.get("samples"),
                             "absent": {k: {"gives": v[0], "add": v[1]} for k, v in (m.get("absent") or {}).items()}}
    return out
