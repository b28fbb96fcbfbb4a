"""The ``--prometheus-*`` options shared by ``audit``, ``vpa replay`` and ``recommend``, their
one-line errors (exit 2), the choice between them and a command's offline input, and the live
containers they select; also the ``--emit`` check ``audit`` and ``recommend`` share."""
from __future__ import annotations

import argparse
import math
import os
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

from cfsim.commands import CommandError

PASSWORD_ENV = "CFSIM_PROMETHEUS_PASSWORD"


def add_prometheus_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group(
        "live Prometheus", "read cAdvisor, kube-state-metrics and Go runtime metrics from a Prometheus HTTP API "
                           "(Thanos, Mimir, VictoriaMetrics and managed services speak it too)")
    g.add_argument("--prometheus-url", metavar="URL", help="e.g. http://prometheus.monitoring:9090")
    g.add_argument("--prometheus-header", action="append", default=[], metavar="'NAME: VALUE'",
                   help="an HTTP header on every request (repeatable), e.g. 'X-Scope-OrgID: team-a'")
    g.add_argument("--prometheus-bearer-token-file", metavar="FILE",
                   help="send 'Authorization: Bearer <token>' with the token read from FILE")
    g.add_argument("--prometheus-user", metavar="USER", help="HTTP basic auth user")
    g.add_argument("--prometheus-password-file", metavar="FILE",
                   help=f"HTTP basic auth password read from FILE (or the environment variable {PASSWORD_ENV})")
    g.add_argument("--prometheus-ca", metavar="FILE", help="PEM file of the CA that signed the server's certificate")
    g.add_argument("--insecure-skip-tls-verify", action="store_true", help="do not verify the server's certificate")
    g.add_argument("--prometheus-timeout", type=float, default=60.0, metavar="S", help="per request (default 60)")
    g.add_argument("--prometheus-retries", type=int, default=3, metavar="N",
                   help="retries on HTTP 429/5xx and timeouts, with exponential backoff (default 3)")
    g.add_argument("--history", metavar="DURATION", help="how far back from --end (or now), e.g. 7d, 12h (default 1d)")
    g.add_argument("--start", metavar="TIME", help="RFC 3339 time or Unix seconds (instead of --history)")
    g.add_argument("--end", metavar="TIME", help="RFC 3339 time or Unix seconds (default now)")
    g.add_argument("--step", metavar="DURATION", help="query resolution, e.g. 1m (default: >= 1m, <= 2000 points)")
    g.add_argument("--namespace", metavar="NS", help="only this namespace")
    g.add_argument("--selector", action="append", default=[], metavar="MATCHER",
                   help="a PromQL label matcher on cAdvisor's series (repeatable), e.g. 'pod=~\"api-.*\"', "
                        "'container=\"api\"'")
    g.add_argument("--cluster", metavar="NAME", help="only series whose cluster label is NAME (multi-cluster servers)")
    g.add_argument("--cluster-label", default="cluster", metavar="LABEL",
                   help="the label that names the cluster (default 'cluster')")


@dataclass
class LiveSource:
    """What the options say: where, how, which containers, when."""

    url: str
    connection: Any
    selection: Any
    start_s: float
    end_s: float
    step: str | None


def live_source(args: Any) -> LiveSource:
    """Read the options (raises ValueError with a one-line message on bad ones)."""
    from cfsim.io.http import connect
    from cfsim.io.live import Selection, time_range

    password = None
    if args.prometheus_password_file:
        try:
            password = open(args.prometheus_password_file, encoding="utf-8").read().rstrip("\n")
        except OSError as exc:
            raise ValueError(f"--prometheus-password-file {args.prometheus_password_file}: "
                             f"{exc.strerror or exc}") from None
    elif os.environ.get(PASSWORD_ENV) is not None:
        password = os.environ[PASSWORD_ENV]
    if password is not None and not args.prometheus_user:
        raise ValueError("a basic auth password needs --prometheus-user")
    conn = connect(headers=args.prometheus_header, bearer_token_file=args.prometheus_bearer_token_file,
                   username=args.prometheus_user, password=password, ca_file=args.prometheus_ca,
                   insecure_skip_tls_verify=args.insecure_skip_tls_verify, timeout_s=args.prometheus_timeout,
                   retries=args.prometheus_retries)
    sel = Selection(args.namespace, tuple(args.selector), args.cluster_label, args.cluster)
    start_s, end_s = time_range(args.history, args.start, args.end)
    return LiveSource(args.prometheus_url, conn, sel, start_s, end_s, args.step)


def check_connection_numbers(args: Any) -> None:
    """``--prometheus-timeout`` > 0 and ``--prometheus-retries`` >= 0, refused by name at once
    (CommandError) whether or not a live source is used, so a typo is not found only on the day it is."""
    t = args.prometheus_timeout
    if not (math.isfinite(t) and t > 0):
        raise CommandError(f"--prometheus-timeout must be a finite number of seconds > 0 (got {t:g})")
    if args.prometheus_retries < 0:
        raise CommandError(f"--prometheus-retries must be >= 0 (got {args.prometheus_retries})")


def given_live_options(args: Any) -> list[str]:
    """The live-only options given without ``--prometheus-url`` (to refuse them)."""
    names = ("prometheus_bearer_token_file", "prometheus_user", "prometheus_password_file", "prometheus_ca",
             "history", "start", "end", "step", "namespace", "cluster")
    out = [f"--{n.replace('_', '-')}" for n in names if getattr(args, n, None)]
    out += ["--prometheus-header"] if args.prometheus_header else []
    out += ["--selector"] if args.selector else []
    out += ["--insecure-skip-tls-verify"] if args.insecure_skip_tls_verify else []
    return out


def check_emit_format(emit: str, fmt: str) -> None:
    """``--emit patch`` and ``--emit vpa-status`` print yaml or json (``table``, the default, prints
    yaml): another ``--format`` is a :class:`CommandError` (one ``error: ...`` line, exit 2)."""
    if emit != "report" and fmt not in ("yaml", "json", "table"):
        raise CommandError(f"--emit {emit} prints yaml or json, not {fmt}")


def refuse_mixed_sources(args: Any, offline: Any, what: str) -> None:
    """Exactly one input, the command's offline one (``offline``, described as ``what``) or
    ``--prometheus-url``, and the live-only options only with the latter (else CommandError)."""
    if bool(offline) == bool(args.prometheus_url):
        raise CommandError(f"give {what} or --prometheus-url URL (exactly one)")
    live_only = given_live_options(args)
    if offline and live_only:
        raise CommandError(f"{', '.join(live_only)} only apply with --prometheus-url")


def load_live(args: Any) -> tuple[list, dict]:
    """The containers the options select, read from the live Prometheus with a progress bar:
    ``(containers, meta)`` of :func:`cfsim.advice.audit.load_live_containers` (one-line errors)."""
    from cfsim.advice.audit import load_live_containers
    from cfsim.progress import Progress

    with one_line_errors():
        src = live_source(args)
        with Progress(None, "prometheus", "query", enabled=not args.no_progress) as bar:
            return load_live_containers(src.url, src.start_s, src.end_s, src.step, selection=src.selection,
                                        connection=src.connection, progress=bar)


@contextmanager
def one_line_errors() -> Iterator[None]:
    """Turn the live path's failures into a :class:`CommandError` (one ``error: ...`` line, exit 2)."""
    from cfsim.io.errors import CfsimParseError, PrometheusAPIError
    from cfsim.io.live import LiveQueryError

    try:
        yield
    except CommandError:
        raise
    except (PrometheusAPIError, LiveQueryError, CfsimParseError) as exc:
        raise CommandError(f"prometheus: {exc}") from None
    except ValueError as exc:  # bad options (header, time, selector, token file)
        raise CommandError(str(exc)) from None
