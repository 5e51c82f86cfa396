"""Bridges to other training frameworks, each in its own module and imported only on demand
(``import cl_diag`` never imports them): :mod:`cl_diag.integrations.lightning`, a PyTorch
Lightning callback (``pip install 'cl-diag[lightning]'``)."""
