"""cl-diag: embedding diagnostics for contrastive learning.

The Python API (README "Python API"; :mod:`cl_diag.api`)::

    import cl_diag
    res = cl_diag.measure(z1, z2, n_ref=50_000)     # the result `cl-diag analyze` gives
    res.save("out/")                                 # result.json, report.md, report.html
    cl_diag.load("out/result.json")
    cl_diag.compare(["a/result.json", "b/result.json"], out="cmp/")
    mon = cl_diag.Monitor(n_ref=len(train_set), log_every=50)   # in any training loop

See README.md for the commands and the result.json schema, and ``cl_diag.losses`` for the
loss library. The names above are imported on first use, so ``import cl_diag`` stays cheap
(no torch, no pandas) and never imports an optional extra (lightning, timm, lightly).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from cl_diag.api import Result, compare, load, measure
    from cl_diag.measurement.monitor import Monitor

__all__ = ["Monitor", "Result", "__version__", "compare", "load", "measure"]

#: public name -> the module that defines it (imported on first access)
_LAZY = {
    "Monitor": "cl_diag.measurement.monitor",
    "Result": "cl_diag.api",
    "compare": "cl_diag.api",
    "load": "cl_diag.api",
    "measure": "cl_diag.api",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'cl_diag' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
