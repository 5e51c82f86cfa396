"""The options of ``cl-diag theory`` and of ``cl_diag.theory``, each declared once: what the
command line builds before any heavy module is imported (:mod:`cl_diag.orchestration.theory`
reads the setting and advises)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cl_diag.options import OptionTable, option

__all__ = ["THEORY", "TheoryConfig"]

_SETTING = "Setting (over what SOURCE records)"
_SIZES = "Sizes"


@dataclass(frozen=True)
class TheoryConfig:
    """What ``cl-diag theory`` (and ``cl_diag.theory``) was given, each option declared once
    here: a ``source`` file (optional) and the settings that go over it (None: not given).
    ``out``: the folder the phase diagrams are written into. The command's parameters and the
    API's keyword checks are made from these fields (:data:`THEORY`); the domain of each
    number (τ > 0, m ≤ n, ...) is checked where the closed forms are
    (:func:`cl_diag.measurement.advice.advise`), for options and files alike."""

    source: str | None = option(
        None,
        "",
        "A result.json (or analysis folder), a cl-diag checkpoint or a training recipe whose "
        "setting to read; the options below go over it.",
        argument="SOURCE",
    )
    loss: str | None = option(None, _SETTING, "The loss (e.g. supcl, sigmoid, simclr).")
    temperature: float | None = option(
        None, _SETTING, "τ (t for the sigmoid loss).", flags=("--temperature", "--tau", "--t")
    )
    bias: float | None = option(
        None, _SETTING, "The sigmoid loss's b (= −b_SigLIP).", flags=("--bias", "--b")
    )
    alpha: float | None = option(None, _SETTING, "supcl's self-supervised share α in [0, 1].")
    within_view: bool | None = option(
        None,
        _SETTING,
        "The sigmoid loss with within-view negatives, or cross-view ones only.",
        flags=("--within-view/--cross-view-only",),
    )
    vrn: float | None = option(None, _SETTING, "VRN's weight λ (0: off).")
    n: int | None = option(
        None, _SIZES, "n, the training instances (the full batch).", flags=("--n",)
    )
    batch_size: int | None = option(
        None, _SIZES, "m, the mini-batch size.", flags=("--batch-size", "--m")
    )
    d: int | None = option(None, _SIZES, "d, the dimension the loss sees.", flags=("--d",))
    classes: int | None = option(None, _SIZES, "supcl: classes per balanced batch (the SSEM's m).")
    per_class: int | None = option(
        None, _SIZES, "supcl: instances of each class per batch (the SSEM's n)."
    )
    views: int | None = option(None, _SIZES, "supcl: views per instance (default 2).")
    out: Path | None = option(
        None,
        "",
        "Write the phase diagrams (SVG and PNG) into this folder.",
        path=True,
        flags=("--out", "-o"),
    )


#: the options of ``cl-diag theory`` and the keywords of ``cl_diag.theory``
THEORY = OptionTable.of(TheoryConfig, "theory")
