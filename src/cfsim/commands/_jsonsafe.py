"""JSON output shared by the commands: NaN and infinities become null (strict JSON has neither)."""
from __future__ import annotations

import math
from typing import Any


def json_safe(x: Any) -> Any:
    """``x`` with every non-finite float replaced by None, through dicts, lists and tuples.

    >>> json_safe({"a": float("inf"), "b": [1.5, float("nan")]})
    {'a': None, 'b': [1.5, None]}
    """
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    return x
