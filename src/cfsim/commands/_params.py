"""``--params FILE.toml`` for the commands that simulate a user's scenario (run, sweep, trap,
recommend): a host measured with ``cfsim lab wakeup|tlb|switch --out``, a fit written by
``cfsim calibrate --out``, applied as the validation's twins take them
(:func:`cfsim.validation.calibrate.params_settings`); ``--set`` wins over a file."""
from __future__ import annotations

from typing import Any, Sequence

HELP = ("parameters from a TOML file's [params] table (a host measured with `cfsim lab wakeup|tlb|switch "
        "--out`, a fit from `cfsim calibrate --out`, e.g. docs/params/lab-host-switches.toml); repeat for "
        "several (a key two files set differently is an error); --set wins over a file")


def add_params_argument(p, help_text: str = HELP) -> None:
    p.add_argument("--params", metavar="TOML", action="append", default=[], help=help_text)


def set_keys(sets: Sequence[str]) -> list[str]:
    """The ``section.key`` names of ``--set section.key=value`` overrides.

    >>> set_keys(["cgroup.cpu_limit=1.5", " go.gomaxprocs = 2"])
    ['cgroup.cpu_limit', 'go.gomaxprocs']
    """
    return [s.split("=", 1)[0].strip() for s in sets if "=" in s]


def read_cli_params(paths: Sequence[str]) -> dict[str, Any]:
    """The merged ``[params]`` of ``paths`` (:func:`cfsim.validation.calibrate.read_params_files`);
    a missing or malformed file raises OSError or ValueError naming it, as does a key no scenario
    knows."""
    from cfsim.scenario import load_scenario
    from cfsim.validation.calibrate import read_params_files
    from cfsim.validation.normalise import calibration_overrides

    params = read_params_files(paths)[0] if paths else {}
    load_scenario("cpu-bound-threads").with_overrides(list(calibration_overrides(params).items()))
    return params


def settings(scenario: str, sets: Sequence[str], params: dict[str, Any], keep: Sequence[str] = ()) -> list[str]:
    r"""The overrides that put ``params`` (:func:`read_cli_params`) under the user's ``--set``
    for ``scenario`` (a file or a built-in name): the files' settings first, then ``sets``, so that an
    explicit setting wins (a fitted cost factor scales the user's per-item CPU as it would the
    scenario's); ``keep``: further keys a file does not set (a sweep's axes).

    >>> import tempfile, pathlib
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "host.toml"
    >>> _ = f.write_text('[params]\n"host.wakeup_us" = 20.0\n"host.context_switch_us" = 2.5\n')
    >>> settings("cpu-bound-threads", ["host.wakeup_us=5"], read_cli_params([str(f)]))
    ['host.context_switch_us=2.5', 'host.wakeup_us=5']
    """
    from cfsim.scenario import load_scenario
    from cfsim.validation.calibrate import params_settings

    if not params:
        return list(sets)
    files = params_settings(load_scenario(scenario, list(sets)), params, keep=set_keys(sets) + list(keep))
    # a key the files' cost factor scaled was scaled from the user's own value: keep the scaled one
    scaled = set(set_keys(files))
    return files + [s for s in sets if set_keys([s])[0] not in scaled]


def scenario_overrides(scenario: str, sets: Sequence[str], paths: Sequence[str]) -> list[str]:
    """:func:`settings` of the files at ``paths``; a file that cannot be read or applied is a
    :class:`cfsim.commands.CommandError` naming it (``error: --params: ...``, exit 2)."""
    from cfsim.commands import CommandError

    try:
        params = read_cli_params(paths)
    except (OSError, ValueError) as exc:   # tomllib's decode error and ScenarioError are ValueErrors
        raise CommandError(f"--params: {exc}") from None
    return settings(scenario, sets, params)
