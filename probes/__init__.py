"""The bundled probe suites (TOML data, not code): ``cl-diag recipes`` lists them.

This file only makes the folder the data package ``cl_diag.probes`` of an installed cl-diag,
so ``cl-diag analyze ... --probe quick`` finds it outside the checkout.
"""
