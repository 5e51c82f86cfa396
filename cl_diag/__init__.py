"""cl-diag: embedding diagnostics for contrastive learning.

See README.md for the commands and the result.json schema, and
``cl_diag.losses`` for the loss library.
"""

from typing import Any

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # The Python API is imported on first use, so `import cl_diag` stays light.
    if name == "analyze":  # cl_diag.analyze(encoder=..., projector=..., dataset=..., out=...)
        from cl_diag.orchestration.analyze import analyze_module

        return analyze_module
    raise AttributeError(f"module 'cl_diag' has no attribute {name!r}")
