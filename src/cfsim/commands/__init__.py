"""One module per ``python -m cfsim`` subcommand, each with ``add_parser`` and ``run``."""


class CommandError(Exception):
    """A failure the user can fix: :func:`cfsim.cli.main` prints ``error: <message>`` (one line) and
    exits 2."""
