"""One module per ``python -m cfsim`` subcommand, each with ``add_parser`` and ``run``."""
