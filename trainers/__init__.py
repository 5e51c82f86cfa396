"""The bundled training recipes (TOML data, not code): ``cl-diag recipes`` lists them.

This file only makes the folder the data package ``cl_diag.trainers`` of an installed cl-diag,
so ``cl-diag train --recipe simclr-vrn`` finds it outside the checkout.
"""
