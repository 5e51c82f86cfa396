"""cl-diag: embedding diagnostics for contrastive learning.

See README.md for the commands and the result.json schema, and
``cl_diag.losses`` for the loss library.
"""

__version__ = "0.1.0"
