"""``analyze``: embeddings in, result.json and reports out.

The one pivot of the project is the result dictionary built here (schema in
docs/result-schema.md); the reports are rendered from it alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

import cl_diag
from cl_diag.errors import UserError
from cl_diag.io.embeddings import load_embeddings
from cl_diag.io.output import ensure_writable_parent, staged_output, write_json

SCHEMA = "cl-diag/result/1"

CONVENTIONS = {
    "similarity": "cosine similarity of L2-normalised rows (normalised once, in float32)",
    "matmul": "float32 with TF32 disabled",
    "accumulation": "float64",
    "positive": "(u_i, v_i), n pairs",
    "cross_view_negative": "(u_i, v_j), i != j, all n(n-1) ordered pairs",
    "within_view_negative": "(u_i, u_j) and (v_i, v_j), i < j, n(n-1) pairs",
    "excessive_ratio": "fraction of negatives with similarity strictly below threshold = -1/(n_ref - 1)",
    "variance": "population variance (ddof 0)",
}


@dataclass
class AnalyzeConfig:
    input: Path
    out: Path
    n_ref: int | None = None
    pairs: str = "exact"
    num_pairs: int = 5000
    seed: int = 0
    block_size: int | None = None
    hist_bins: int = 100


@dataclass
class AnalyzeResult:
    out: Path
    result: dict = field(repr=False)
    files: list[Path] = field(default_factory=list)


def _check_config(config: AnalyzeConfig) -> None:
    if config.pairs not in ("exact", "sampled"):
        raise UserError(f"--pairs must be 'exact' or 'sampled', not {config.pairs!r}.")
    if config.n_ref is not None and config.n_ref < 2:
        raise UserError(
            f"--n-ref {config.n_ref} is too small: the threshold -1/(n_ref - 1) needs n_ref >= 2 "
            "(the number of training instances, e.g. 50000 for CIFAR)."
        )
    if config.num_pairs < 1:
        raise UserError(f"--num-pairs must be at least 1 (got {config.num_pairs}).")
    if config.block_size is not None and config.block_size < 1:
        raise UserError(f"--block-size must be at least 1 (got {config.block_size}).")
    if config.hist_bins < 1:
        raise UserError(f"--hist-bins must be at least 1 (got {config.hist_bins}).")
    ensure_writable_parent(config.out)  # fail before the measuring, not after


def measure_layer(
    z1: torch.Tensor, z2: torch.Tensor, labels: torch.Tensor | None, *, n_ref: int, config: AnalyzeConfig
) -> dict:
    """Pair statistics and geometry of one layer's two views."""
    from cl_diag.measurement.geometry import geometry
    from cl_diag.measurement.pairs import pair_statistics

    pairs = pair_statistics(
        z1,
        z2,
        n_ref=n_ref,
        labels=labels,
        mode=config.pairs,
        num_pairs=config.num_pairs,
        seed=config.seed,
        block_size=config.block_size,
        hist_bins=config.hist_bins,
    )
    geo = geometry(z1, z2, n_ref=n_ref)
    return {"n": int(z1.shape[0]), "d": int(z1.shape[1]), "pairs": pairs, "geometry": geo}


def build_result(
    *, source: dict, n_ref: int, config: AnalyzeConfig, layers: dict, training_config: dict | None = None
) -> dict:
    return {
        "schema": SCHEMA,
        "tool": {"name": "cl-diag", "version": cl_diag.__version__},
        "source": source,
        "n_ref": n_ref,
        "threshold": -1.0 / (n_ref - 1),
        "mode": config.pairs,
        "num_pairs": config.num_pairs if config.pairs == "sampled" else None,
        "seed": config.seed,
        "conventions": CONVENTIONS,
        "config": training_config or {},
        "layers": layers,
    }


def analyze(config: AnalyzeConfig) -> AnalyzeResult:
    """Measure an embeddings file and write result.json, report.md and report.html into ``config.out``."""
    _check_config(config)
    embeddings = load_embeddings(config.input)
    n_ref = config.n_ref if config.n_ref is not None else embeddings.n
    layer = measure_layer(embeddings.z1, embeddings.z2, embeddings.labels, n_ref=n_ref, config=config)
    result = build_result(
        source={"kind": "embeddings", "path": str(config.input), "sha256": embeddings.sha256},
        n_ref=n_ref,
        config=config,
        layers={"embedding": layer},
    )
    from cl_diag.report import render_analysis

    with staged_output(config.out) as staging:
        write_json(staging / "result.json", result)
        render_analysis(result, staging)
        files = sorted(path.relative_to(staging) for path in staging.rglob("*") if path.is_file())
    return AnalyzeResult(out=Path(config.out), result=result, files=[Path(config.out) / f for f in files])
