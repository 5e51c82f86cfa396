"""Moved to :mod:`cl_diag.models`; this name stays only because tests import it."""

# Re-export for tests (and not-yet-updated callers) that import the old home.
from cl_diag.models import ARCHS, ContrastiveModel, FreeEmbeddings, SmallCNN, build_model, build_projector, default_arch, default_projector_hidden, is_convolutional  # noqa: F401,E501
