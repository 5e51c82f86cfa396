"""The 2-D view of a layer in a run's report: PCA (and UMAP when it was run) of a sample of
its instances, coloured by class (:mod:`cl_diag.measurement.projection` made the coordinates;
the report draws what result.json holds)."""

from __future__ import annotations

from cl_diag.report import figures
from cl_diag.report.document import Figure, fmt
from cl_diag.result import Layer

__all__ = ["embedding_view_blocks"]


def embedding_view_blocks(name: str, layer: Layer) -> list[Figure]:
    """The figure of ``layer``'s 2-D views, with what it shows; nothing when none is stored."""
    views = layer.projections or {}
    svg = figures.embedding_2d(views, name)
    if svg is None:
        return []
    first = next(iter(views.values()))
    methods = [m for m in ("pca", "umap") if m in views]
    labelled = first.classes is not None
    sample = (
        f"all {fmt(layer.n)} instances"
        if len(first.rows) == layer.n
        else f"{fmt(len(first.rows))} of the {fmt(layer.n)} instances, drawn with seed "
        f"{fmt(first.seed)}"
    )
    how = {
        "pca": "PCA: the sample centred and projected onto its first two principal axes "
        "(exact SVD; each axis' share of the variance on it)",
        "umap": "UMAP (cosine metric, 15 neighbours, random_state = the seed)",
    }
    classes = ""
    if labelled:
        count = len(set(first.classes or []))
        classes = (
            f"; colour (and beyond ten classes, marker) = class, codes 0–{count - 1} in sorted "
            "label order"
            + (
                ""
                if count <= figures.MAX_LEGEND_CLASSES
                else f" (more than {figures.MAX_LEGEND_CLASSES}: no legend)"
            )
        )
    umap_note = (
        ""
        if "umap" in methods
        else " UMAP is drawn beside it when umap-learn is installed (pip install 'cl-diag[umap]')."
    )
    return [
        Figure(
            filename=f"embedding2d_{name}.svg",
            svg=svg,
            alt=f"2-D view ({', '.join(m.upper() for m in methods)}) of layer {name}",
            caption=(
                f"2-D view of layer '{name}': the L2-normalised rows of view u for {sample}; "
                + "; ".join(how[m] for m in methods)
                + classes
                + ". A picture to look at, not a measurement: distances in it are not the "
                "cosine similarities above." + umap_note
            ),
        )
    ]
