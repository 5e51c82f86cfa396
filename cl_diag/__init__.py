"""cl-diag: embedding diagnostics for contrastive learning.

The Python API (README "Python API"; :mod:`cl_diag.api`)::

    import cl_diag
    res = cl_diag.measure(z1, z2, n_ref=50_000)     # the result `cl-diag analyze` gives
    res.save("out/")                                 # result.json, report.md, report.html
    cl_diag.load("out/result.json")
    cl_diag.compare([res, "b/result.json"], out="cmp/")  # results and paths alike
    mon = cl_diag.Monitor(n_ref=len(train_set), log_every=50)   # in any training loop

The names above are imported on first use, so ``import cl_diag`` stays cheap (no torch, no
pandas, no optional extra). The root also hands the bottom-layer result model its writer
(:meth:`cl_diag.result.Result.save` renders reports, which sit above it) through
:mod:`cl_diag.upcalls`, which imports nothing, so that every ``cl-diag --help`` stays instant.
"""

from __future__ import annotations

import importlib as _importlib
import typing as _typing

from cl_diag import upcalls as _upcalls
from cl_diag.errors import UserError
from cl_diag.version import __version__

if _typing.TYPE_CHECKING:
    from pathlib import Path

    from cl_diag.api import compare, measure, theory
    from cl_diag.measurement.monitor import Monitor
    from cl_diag.orchestration.analyze import analyze_module as analyze
    from cl_diag.result import Result, load

#: the public API: what ``dir(cl_diag)`` shows and ``from cl_diag import *`` takes
__all__ = [
    "Monitor",
    "Result",
    "UserError",
    "__version__",
    "analyze",
    "compare",
    "load",
    "measure",
    "theory",
]

#: public name -> "module" that defines it, or "module:name" (imported on first access)
_LAZY = {
    "Monitor": "cl_diag.measurement.monitor",
    "analyze": "cl_diag.orchestration.analyze:analyze_module",
    "Result": "cl_diag.result",
    "compare": "cl_diag.api",
    "load": "cl_diag.result",
    "measure": "cl_diag.api",
    "theory": "cl_diag.api",
}


def _write_analysis(result: Result, out: Path, *, overwrite: bool = False) -> object:
    """What :meth:`cl_diag.result.Result.save` writes a folder with: the analysis folder
    ``cl-diag analyze`` writes. The result model sits below the reports and may not import
    them, so the package root, above both and always imported first, hands this over."""
    from cl_diag.orchestration.analyze import write_analysis

    return write_analysis(result, out, overwrite=overwrite)


def _result_text(result: Result) -> str:
    """A result's ``repr``: its short form (:func:`cl_diag.report.headline.result_text`)."""
    from cl_diag.report.headline import result_text

    return result_text(result)


def _result_html(result: Result) -> str:
    """A result's ``_repr_html_`` (:func:`cl_diag.report.headline.result_html`)."""
    from cl_diag.report.headline import result_html

    return result_html(result)


_upcalls.install(_write_analysis, _result_text, _result_html)


def __getattr__(name: str) -> _typing.Any:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'cl_diag' has no attribute {name!r}")
    module, _, attribute = where.partition(":")
    value = getattr(_importlib.import_module(module), attribute or name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    """The public API (``__all__``) and the module's own dunders: no helper, no imported
    name, no submodule that happens to be loaded."""
    return sorted(set(__all__) | {n for n in globals() if n.startswith("__") and n.endswith("__")})
