"""The coverage notes and the band as the commands show them (``run``, ``sweep --band``,
``recommend``, ``audit``): plain functions so the command layer stays a thin glue."""
from __future__ import annotations

from typing import Any, Mapping

from cfsim.overheads.band import BAND_KEYS, band
from cfsim.overheads.coverage import coverage_notes, depends_on_unpinned
from cfsim.scenario import Scenario


def notes_text(sc: Scenario) -> list[str]:
    return [n.text for n in coverage_notes(sc)]


def annotate(sc: Scenario, summary: Mapping[str, Any], with_band: bool = True) -> dict[str, Any]:
    """``{"coverage": [...], "band": {key: {"low", "high"}} | None, "lab_accuracy": ... | None}``
    for a simulated scenario (:func:`cfsim.overheads.accuracy.lab_accuracy`)."""
    from cfsim.overheads.accuracy import lab_accuracy

    out: dict[str, Any] = {"coverage": notes_text(sc), "band": None, "lab_accuracy": lab_accuracy(sc, summary)}
    if with_band and depends_on_unpinned(sc):
        out["band"] = widen(band(sc), summary)
    return out


def widen(b: Mapping[str, Mapping[str, Any]] | None, central: Mapping[str, Any]) -> dict | None:
    """The band, stretched to hold the central answer too (corners and centre are separate runs)."""
    if b is None:
        return None
    out = {}
    for k, v in b.items():
        c = central.get(k)
        lo, hi = v["low"], v["high"]
        if isinstance(c, (int, float)):
            lo, hi = min(lo, c), max(hi, c)
        out[k] = {"low": lo, "high": hi}
    return out


def band_lines(b: Mapping[str, Mapping[str, Any]] | None, central: Mapping[str, Any]) -> list[str]:
    """One line per headline key: ``key  central  [low .. high]``."""
    if not b:
        return []
    lines = ["band (unpinned many-core parameters at their low / high priors, cfsim.overheads.band.UNPINNED):"]
    for k, v in b.items():
        c = central.get(k)
        lines.append(f"  {k:<22} {_fmt(c)}  [{_fmt(v['low'])} .. {_fmt(v['high'])}]")
    return lines


def band_columns(b: Mapping[str, Mapping[str, Any]] | None) -> dict[str, Any]:
    """``band_low_<key>`` / ``band_high_<key>`` for the headline keys (None where there is no band)."""
    out: dict[str, Any] = {}
    for k in BAND_KEYS:
        v = (b or {}).get(k)
        out[f"band_low_{k}"] = None if v is None else v["low"]
        out[f"band_high_{k}"] = None if v is None else v["high"]
    return out


def _fmt(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, (int, float)) else str(v)


def summary_with_band(sc: Scenario) -> dict[str, Any]:
    """A sweep point function (``sweep --band``): the summary plus ``band_low_<key>`` and
    ``band_high_<key>`` columns, a ``coverage`` column (notes joined by "; ") and the lab's
    accuracy on runs like the point (:func:`cfsim.overheads.accuracy.accuracy_columns`)."""
    from cfsim.overheads.accuracy import accuracy_columns, lab_accuracy
    from cfsim.simulation import simulate

    out = dict(simulate(sc).summary)
    b = widen(band(sc), out) if depends_on_unpinned(sc) else None
    acc = lab_accuracy(sc, out)
    out.update(band_columns(b))
    out["coverage"] = "; ".join(notes_text(sc))
    out.update(accuracy_columns(acc))
    return out


def recommend_notes(sc: Scenario, rep) -> dict[str, Any]:
    """Coverage notes of the scenario, and the band and lab accuracy of the recommended
    configuration."""
    from cfsim.overheads.accuracy import lab_accuracy

    out: dict[str, Any] = {"coverage": notes_text(sc), "band": None, "lab_accuracy": None}
    win = getattr(getattr(rep, "result", None), "winner", None)
    if win is not None:
        chosen = sc.with_overrides(list(win.candidate.overrides(sc)))
        out["coverage"] += [t for t in notes_text(chosen) if t not in out["coverage"]]
        if depends_on_unpinned(chosen):
            out["band"] = widen(band(chosen), getattr(win, "summary", {}) or {})
        summary = getattr(win, "summary", None)
        if summary:
            # how far the model was off on lab runs like the recommended configuration
            out["lab_accuracy"] = lab_accuracy(chosen, summary)
    return out


def audit_note(sc: Scenario, before: Mapping[str, Any]) -> str:
    """One sentence for an audit finding simulated on ``sc``: the band of the simulated "before"
    where unpinned parameters matter, what lies outside the lab and the public measurements, and
    how far the model was off on lab runs like it (:func:`cfsim.overheads.accuracy.accuracy_phrase`)."""
    parts = []
    if depends_on_unpinned(sc):
        b = band(sc, keys=("throughput_per_s", "cpu_usage_cores", "latency_p99_s")) or {}
        if b:
            parts.append("band " + ", ".join(f"{k} {_fmt(v['low'])}..{_fmt(v['high'])}" for k, v in b.items()))
    parts += notes_text(sc)
    from cfsim.overheads.accuracy import accuracy_phrase, lab_accuracy

    acc = accuracy_phrase(lab_accuracy(sc, before))
    if acc:
        parts.append(acc)
    return "; ".join(parts)
