"""Collection rule for the doctests of src/cfsim (``testpaths`` in pyproject.toml).

Where the compiled modules run (cfsim._native), pytest cannot import a compiled module's source
file for its doctests (the module is the compiled one), so their doctests run from source in
tests/unit/test_native.py instead.
"""


def pytest_ignore_collect(collection_path, config):
    if collection_path.suffix != ".py" or "cfsim" not in collection_path.parts:
        return None
    from cfsim import _native

    if not _native.compiled():
        return None
    return True if collection_path.resolve() in _native.native_sources() else None
