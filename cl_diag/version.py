"""cl-diag's version: one home, at the bottom of the layers, so that the modules that record it
(the environment fingerprint, a checkpoint's versions, result.json's ``tool``) need not import
the package root above them. ``pyproject.toml`` reads it from here (``dynamic = ["version"]``)."""

__version__ = "0.1.0"
