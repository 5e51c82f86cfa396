"""``analyze``: an embeddings file or a trained encoder in, result.json and reports out.

The one pivot of the project is the result dictionary built here (schema in
docs/result-schema.md); the reports are rendered from it alone.

What the input is decides the work (:func:`cl_diag.models.checkpoints.read_checkpoint_file`):

* an **embeddings file**: its two views are measured as the layer ``embedding``;
* a **cl-diag checkpoint** (rebuilt from its stored config), a **solo-learn checkpoint** or a
  **plain backbone state dict**: the paper's protocol (Lee et al., ICML 2025, Sec. 6.1;
  paper-notes 8) made explicit -- sample ``num_images`` training images (seeded), apply the
  training augmentation twice, encode in eval mode and measure the layers ``projector``
  and ``backbone``; then the probes on backbone features of the un-augmented train and
  test splits, next to the same probes on raw pixels and on the architecture at random
  initialisation; and the theory panel from the checkpoint's training config. A cl-diag
  checkpoint of the ``toy`` dataset carries its learned vectors: those are the two views.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

import cl_diag
from cl_diag.errors import UserError
from cl_diag.io.embeddings import load_embeddings, validate_views
from cl_diag.io.output import ensure_writable_parent, staged_output, write_json
from cl_diag.models import CheckpointFile, Subject, open_subject, read_checkpoint_file

SCHEMA = "cl-diag/result/1"

CONVENTIONS = {
    "similarity": "cosine similarity of L2-normalised rows (norms in float64, rows rounded once to float32)",
    "matmul": "float32 with TF32 disabled",
    "accumulation": "float64",
    "positive": "(u_i, v_i), n pairs",
    "cross_view_negative": "(u_i, v_j), i != j, all n(n-1) ordered pairs",
    "within_view_negative": "(u_i, u_j) and (v_i, v_j), i < j, n(n-1) pairs",
    "excessive_ratio": "fraction of negatives with similarity strictly below threshold = -1/(n_ref - 1)",
    "variance": "population variance (ddof 0)",
}

LAYERS = ("projector", "backbone")
PROBES = ("linear", "knn", "retrieval", "clustering")
#: Neighbour counts and temperature of the kNN probe (solo-learn / InstDisc defaults).
KNN_KS = (20, 200)
KNN_TEMPERATURE = 0.07
RETRIEVAL_KS = (1, 5, 10)

#: (description, total or None) -> advance(n). The CLI passes a rich progress bar.
ProgressFactory = Callable[[str, "int | None"], Callable[[int], None]]


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
    # ---- checkpoints only (ignored for an embeddings file)
    num_images: int = 5000
    layers: tuple[str, ...] = LAYERS
    probes: tuple[str, ...] = PROBES
    baselines: bool = True
    probe_train_images: int | None = None  # None: the whole train split
    probe_test_images: int | None = None  # None: the whole test split
    arch: str | None = None
    dataset: str | None = None
    data_root: Path | None = None
    val_root: Path | None = None
    cifar_stem_padding: int | None = None
    device: str = "auto"
    batch_size: int = 512
    workers: int | None = None  # None: 0 on CPU, up to 8 on CUDA
    amp: bool = True


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
    if config.seed < 0:
        raise UserError(f"--seed must be 0 or more (got {config.seed}).")
    if config.hist_bins < 1:
        raise UserError(f"--hist-bins must be at least 1 (got {config.hist_bins}).")
    if config.num_images < 2:
        raise UserError(f"--num-images must be at least 2 (got {config.num_images}): negatives need two instances.")
    bad = [layer for layer in config.layers if layer not in LAYERS]
    if bad or not config.layers:
        raise UserError(f"--layers takes a comma-separated subset of {', '.join(LAYERS)} (got {', '.join(config.layers) or 'nothing'}).")
    bad = [probe for probe in config.probes if probe not in PROBES]
    if bad:
        raise UserError(f"--probes takes 'none', 'all' or a comma-separated subset of {', '.join(PROBES)} (got {', '.join(bad)}).")
    for name, value in (("--probe-train-images", config.probe_train_images), ("--probe-test-images", config.probe_test_images)):
        if value is not None and value < 2:
            raise UserError(f"{name} must be at least 2 (got {value}).")
    if config.batch_size < 1:
        raise UserError(f"--batch-size must be at least 1 (got {config.batch_size}).")
    if config.workers is not None and config.workers < 0:
        raise UserError(f"--workers must be 0 or more (got {config.workers}).")
    if config.device not in ("auto", "cpu", "cuda"):
        raise UserError(f"--device must be auto, cpu or cuda (got {config.device!r}).")
    if config.device == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda was given but torch sees no CUDA device; use --device cpu (or auto).")
    ensure_writable_parent(config.out)  # fail before the measuring, not after


# --------------------------------------------------------------------------- measuring


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
    # The exact cross-view mean is already known; a sampled one is an estimate, so let
    # geometry compute the exact mean itself (O(nd)).
    exact_mean = pairs["cross_view_negative"]["mean"] if config.pairs == "exact" else None
    geo = geometry(z1, z2, n_ref=n_ref, cross_view_mean=exact_mean)
    return {"n": int(z1.shape[0]), "d": int(z1.shape[1]), "pairs": pairs, "geometry": geo}


def build_result(
    *,
    source: dict,
    n_ref: int,
    config: AnalyzeConfig,
    layers: dict,
    training_config: dict | None = None,
    probes: dict | None = None,
    theory: dict | None = None,
) -> dict:
    result = {
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
    if probes is not None:
        result["probes"] = probes
    if theory is not None:
        result["theory"] = theory
    return result


def _write(config: AnalyzeConfig, result: dict) -> AnalyzeResult:
    from cl_diag.report import render_analysis

    with staged_output(config.out) as staging:
        write_json(staging / "result.json", result)
        render_analysis(result, staging)
        files = sorted(path.relative_to(staging) for path in staging.rglob("*") if path.is_file())
    return AnalyzeResult(out=Path(config.out), result=result, files=[Path(config.out) / f for f in files])


def analyze(config: AnalyzeConfig, *, progress: ProgressFactory | None = None) -> AnalyzeResult:
    """Measure ``config.input`` (embeddings file or checkpoint) and write result.json,
    report.md and report.html into ``config.out``."""
    _check_config(config)
    if config.workers is None:
        from dataclasses import replace

        from cl_diag.measurement.views import resolve_device

        cuda = resolve_device(config.device).type == "cuda"
        config = replace(config, workers=min(8, os.cpu_count() or 1) if cuda else 0)
    file = read_checkpoint_file(config.input)
    if file.kind == "embeddings":
        return _write(config, _analyze_embeddings(config, file.payload))
    return _write(config, _analyze_checkpoint(config, file, progress or _no_progress))


def _analyze_embeddings(config: AnalyzeConfig, payload: dict | None) -> dict:
    embeddings = load_embeddings(config.input, payload=payload)
    n_ref = config.n_ref if config.n_ref is not None else embeddings.n
    layer = measure_layer(embeddings.z1, embeddings.z2, embeddings.labels, n_ref=n_ref, config=config)
    return build_result(
        source={"kind": "embeddings", "path": str(config.input), "sha256": embeddings.sha256},
        n_ref=n_ref,
        config=config,
        layers={"embedding": layer},
    )


def _no_progress(description: str, total: int | None) -> Callable[[int], None]:
    return lambda n: None


# --------------------------------------------------------------------------- checkpoints


def _analyze_checkpoint(
    config: AnalyzeConfig, file: CheckpointFile, progress: ProgressFactory
) -> dict:
    from cl_diag.orchestration.train import RESUME_FREE_FIELDS

    # The model home rebuilds the encoder and opens its data; from here on it is measuring.
    subject = open_subject(
        file,
        arch=config.arch,
        dataset=config.dataset,
        cifar_stem_padding=config.cifar_stem_padding,
        data_root=config.data_root,
        val_root=config.val_root,
        seed=config.seed,
        run_record_fields=RESUME_FREE_FIELDS,
    )
    source = subject.source

    if subject.embeddings is not None:  # toy: the learned vectors are the two views
        z1, z2 = subject.embeddings
        validate_views(z1, z2, None, str(file.path))
        n_ref = config.n_ref if config.n_ref is not None else (subject.n_train or z1.shape[0])
        layers = {"embedding": measure_layer(z1, z2, None, n_ref=n_ref, config=config)}
        probes = None
        if "retrieval" in config.probes:
            probes = {"layer": "embedding", "retrieval": {"embedding": _retrieval(z1, z2)}}
        theory = theory_panel(subject.training_config, n_ref, layers)
        return build_result(
            source=source, n_ref=n_ref, config=config, layers=layers,
            training_config=subject.training_config, probes=probes, theory=theory,
        )

    layers_wanted = [layer for layer in LAYERS if layer in config.layers]
    if subject.projector is None and "projector" in layers_wanted:
        if list(config.layers) == ["projector"]:
            raise UserError(
                f"{file.path} holds no projector weights, so the layer 'projector' cannot be measured; "
                "use --layers backbone."
            )
        layers_wanted.remove("projector")
        source["layers_skipped"] = {"projector": "the file holds no projector weights"}
    n_ref = config.n_ref if config.n_ref is not None else subject.n_train
    if n_ref is None or n_ref < 2:
        raise UserError(f"The training-set size of {file.path} is unknown; give --n-ref (e.g. 50000 for CIFAR).")

    from cl_diag.measurement.views import Pixels, Taps, encode_two_views, sample_indices

    if any(p in config.probes for p in ("linear", "knn", "clustering")):
        # Open both evaluation splits now: a missing test split should stop the run before
        # minutes of encoding, not after.
        subject.splits = {split: subject.eval_split(split) for split in ("train", "test")}
    n_pool = len(subject.two_views)
    indices = sample_indices(n_pool, config.num_images, config.seed)
    taps: dict[str, torch.nn.Module] = {"trained": Taps(subject.backbone, subject.projector)}
    baselines = config.baselines and bool(config.probes)
    if baselines and "retrieval" in config.probes:
        taps["random_init"] = Taps(subject.random_backbone, subject.random_projector)
        taps["raw_pixels"] = Pixels()
    views, view_labels = encode_two_views(
        taps,
        subject.two_views,
        indices,
        batch_size=config.batch_size,
        device=config.device,
        workers=config.workers,
        amp=config.amp,
        progress=progress(f"encoding 2 augmented views of {len(indices)} training images", len(indices)),
    )
    source["views"] = {
        "num_images": int(len(indices)),
        "pool": int(n_pool),
        "sampling": "uniform without replacement under --seed, sorted by index",
        "augmentation": "the training augmentation, twice, seeded per image from (seed, index)",
        "mode": "eval (BatchNorm running statistics)",
        "amp": bool(config.amp and torch.cuda.is_available() and config.device != "cpu"),
    }
    layers = {}
    for layer in layers_wanted:
        z1, z2 = views["trained"][layer]
        validate_views(z1, z2, None, f"the {layer} outputs of {file.path}")
        layers[layer] = measure_layer(z1, z2, view_labels, n_ref=n_ref, config=config)

    probes = _probes(config, subject, views, layers_wanted, progress) if config.probes else None
    theory = theory_panel(subject.training_config, n_ref, layers)
    return build_result(
        source=source, n_ref=n_ref, config=config, layers=layers,
        training_config=subject.training_config, probes=probes, theory=theory,
    )


# --------------------------------------------------------------------------- probes


def _retrieval(u: torch.Tensor, v: torch.Tensor) -> dict:
    from cl_diag.measurement.probes import retrieval

    out = retrieval(u, v, ks=RETRIEVAL_KS)
    return out


def _classification_probes(config: AnalyzeConfig, train, test) -> dict:
    """linear, knn and clustering on one representation's (features, labels)."""
    from cl_diag.measurement.probes import clustering, knn_probe, linear_probe

    (train_x, train_y), (test_x, test_y) = train, test
    out: dict[str, Any] = {}
    if "linear" in config.probes:
        out["linear"] = linear_probe(train_x, train_y, test_x, test_y, seed=config.seed)
    if "knn" in config.probes:
        out["knn"] = knn_probe(train_x, train_y, test_x, test_y, ks=KNN_KS, temperature=KNN_TEMPERATURE)
    if "clustering" in config.probes:
        out["clustering"] = clustering(test_x, test_y, seed=config.seed)
        out["clustering"]["settings"]["split"] = "test"
    return out


def _probes(config: AnalyzeConfig, subject: Subject, views: dict, layers: list[str], progress) -> dict:
    from cl_diag.measurement.views import Pixels, Taps, encode_images, sample_indices

    probes: dict[str, Any] = {"layer": "backbone"}
    baselines: dict[str, dict] = {}
    with_baselines = config.baselines
    needs_splits = any(p in config.probes for p in ("linear", "knn", "clustering"))
    if needs_splits:
        taps: dict[str, torch.nn.Module] = {"trained": Taps(subject.backbone)}
        if with_baselines:
            taps["random_init"] = Taps(subject.random_backbone)
            taps["raw_pixels"] = Pixels()
        split_features = {}
        for split, limit in (("train", config.probe_train_images), ("test", config.probe_test_images)):
            dataset = subject.splits[split]
            idx = sample_indices(len(dataset), limit, config.seed)
            feats, labels = encode_images(
                taps, dataset, idx, batch_size=config.batch_size, device=config.device,
                workers=config.workers, amp=config.amp,
                progress=progress(f"encoding the un-augmented {split} split ({len(idx)} images)", len(idx)),
            )
            split_features[split] = (feats, labels, len(dataset))
        probes["splits"] = {
            split: {"images": int(len(split_features[split][1])), "of": int(split_features[split][2])}
            for split in ("train", "test")
        }

        def pair(name: str, layer: str):
            return tuple((split_features[s][0][name][layer], split_features[s][1]) for s in ("train", "test"))

        advance = progress("fitting the probes", None)
        probes.update(_classification_probes(config, *pair("trained", "backbone")))
        if with_baselines:
            baselines["raw_pixels"] = _classification_probes(config, *pair("raw_pixels", "pixels"))
            baselines["random_init"] = _classification_probes(config, *pair("random_init", "backbone"))
        advance(1)
    if "retrieval" in config.probes:
        probes["retrieval"] = {layer: _retrieval(*views["trained"][layer]) for layer in layers}
        if with_baselines:
            baselines.setdefault("raw_pixels", {})["retrieval"] = {"pixels": _retrieval(*views["raw_pixels"]["pixels"])}
            baselines.setdefault("random_init", {})["retrieval"] = {
                layer: _retrieval(*views["random_init"][layer]) for layer in layers
            }
    if with_baselines:
        probes["baselines"] = baselines
    return probes


# --------------------------------------------------------------------------- theory


def _derivative(fn: Callable, x: float) -> float:
    """d fn / dx at x by autograd in float64 (the loss library's phi and psi are torch functions)."""
    t = torch.tensor(float(x), dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(fn(t), t)
    return float(grad)


def _float_fn(fn: Callable) -> Callable[[float], float]:
    return lambda x: float(fn(torch.tensor(float(x), dtype=torch.float64)))


def theory_panel(training_config: dict, n_ref: int, layers: dict) -> dict:
    """Predictions of the paper's theorems for this run (paper-notes 5 and 11), beside the
    measured layers.

    * Which theorem applies follows from the loss's family and (c1, c2): Def. 3.1 (any
      coefficients) -> Thm 5.1(i); Def. 3.2 with c2 = 1 -> 5.1(ii); Def. 3.2 with
      (c1, c2) = (1, 0) -> 5.1(iii) if phi'(1) > ((N-2)/(2(N-1))) psi'(-1/(N-1)), else
      Thm 5.3 (excessive separation), evaluated at the batch the loss sees, N = m.
    * Thm 5.1 predicts s_pos = 1 and s_neg = -1/(n-1); with fixed mini-batches of size m
      (Thm 5.5, Eq. 11) the negative-similarity variance lies in
      [(n-m)/((m-1)(n-1)^2), n(n-m)/((m-1)(n-1)^2)] and each batch is its own simplex at
      -1/(m-1).
    * Sigmoid loss (Example 5.4): the Eq. 10 test and the double-constant optimum of
      paper-notes 11.1, both at N = m.
    * Per layer: the Thm 5.2 ceiling 1 + mean_neg + 1/(n-1) against the measured positive
      mean, and the validity caveat when d < n - 1 (the optima need a simplex to fit).
    """
    from cl_diag.losses import LOSSES
    from cl_diag.measurement import theory as th

    name = training_config.get("loss")
    m = training_config.get("batch_size")
    m = int(m) if isinstance(m, int) and not isinstance(m, bool) else None
    loss = LOSSES.get(name) if isinstance(name, str) else None
    panel: dict[str, Any] = {
        "n_ref": n_ref,
        "batch_size": m,
        "loss": {"name": name, "family": None, "c1": None, "c2": None},
        "theorem": None,
        "statement": "",
        "predicted": {"positive_mean": None, "negative_mean": None},
        "variance_band": None,
        "within_batch_optimum": None,
        "sigmoid": None,
        # The theorems are about the embedding the loss sees; the other layers are context.
        "loss_layer": "projector" if "projector" in layers else ("embedding" if "embedding" in layers else None),
    }
    family = getattr(loss, "family", None) if loss is not None else None
    hp: dict[str, Any] = {}
    if loss is not None:
        hp = {k: training_config[k] for k in loss.hyperparameter_names if training_config.get(k) is not None}
        try:
            hp = loss.resolve(**hp)
        except ValueError:
            hp = loss.defaults
    if family not in ("info", "ind-add"):
        if loss is None:
            why = f"the run's loss {name!r} is unknown to cl-diag" if name else "the training config names no loss"
        else:
            why = f"{name} is not cast into the paper's framework (Def. 3.1 / 3.2)"
        panel["statement"] = f"No optimum is predicted: {why}."
        panel["layers"] = _layer_checks(layers, n_ref, m)
        return panel

    c1, c2 = loss.coefficients(**hp)
    panel["loss"] = {
        "name": name,
        "family": "info_nce" if family == "info" else "independently_additive",
        "c1": float(c1),
        "c2": float(c2),
    }
    N = m if m is not None and m >= 3 else n_ref
    statement: list[str] = []
    excessive = False
    psi_increasing = True
    if family == "ind-add":
        phi, psi = loss.phi_psi(N, **hp)
        # Thms 5.1 (ii)/(iii) and 5.3 assume an increasing psi on [-1, 1]; spectral's psi = x^2 is not
        # (its optimum has orthogonal negatives, s_neg = 0, not a simplex).
        psi_increasing = all(_derivative(psi, x) >= 0 for x in (-1.0, -0.5, -1e-3, 0.5, 1.0))
    if family == "info":
        panel["theorem"] = "5.1(i)"
    elif not psi_increasing:
        panel["theorem"] = None
        statement.append(
            f"No optimum is predicted: psi of {name} is not increasing on [-1, 1], so Thms 5.1 and 5.3 do not apply."
        )
    elif (c1, c2) in ((0, 1), (1, 1)):
        panel["theorem"] = "5.1(ii)"
    elif c2 > 0:
        panel["theorem"] = None
        statement.append(f"No optimum is predicted: Thm 5.1 (ii) covers (c1, c2) = (0, 1) and (1, 1), not ({c1:g}, {c2:g}).")
    else:
        lhs, rhs_psi = _derivative(phi, 1.0), _derivative(psi, th.delta(N))
        verdict = th.additive_cross_only_condition(lhs, rhs_psi, N)
        panel["condition"] = {
            "N": N,
            "dphi_at_1": lhs,
            "rhs": (N - 2) / (2 * (N - 1)) * rhs_psi,
            "verdict": verdict,
        }
        if verdict == "excessive":
            panel["theorem"] = "5.3"
            excessive = True
        elif verdict == "etf":
            panel["theorem"] = "5.1(iii)"
        else:
            panel["theorem"] = None
            statement.append("phi'(1) equals the bound of Thm 5.3 (8): neither theorem applies as stated.")
    delta_n = th.delta(n_ref)
    if panel["theorem"] and panel["theorem"].startswith("5.1"):
        panel["predicted"] = {"positive_mean": 1.0, "negative_mean": delta_n}
        statement.append(
            f"Thm {panel['theorem']}: at the full-batch optimum positives align (s_pos = 1) and every negative "
            f"sits at -1/(n-1) = {delta_n:.6g} (a simplex ETF)."
        )
        if m is not None and 2 <= m < n_ref:
            lo, hi = th.variance_band(n_ref, m)
            panel["variance_band"] = {"n": n_ref, "m": m, "lo": lo, "hi": hi}
            panel["within_batch_optimum"] = th.delta(m)
            statement.append(
                f"With fixed mini-batches of m = {m} (Thm 5.5) each batch collapses to its own simplex at "
                f"-1/(m-1) = {th.delta(m):.6g}, more separated than -1/(n-1), and the negative variance lies in "
                f"[{lo:.4g}, {hi:.4g}] (Eq. 11)."
            )
    if excessive:
        if name == "sigmoid":
            opt = th.sigmoid_optimum(hp["temperature"], hp["bias"], N)
            panel["predicted"] = {"positive_mean": opt.s_pos, "negative_mean": opt.s_neg}
        else:
            x = th.additive_optimum_x(_float_fn(phi), _float_fn(psi), N)
            panel["predicted"] = {"positive_mean": x, "negative_mean": ((N - 2) * x - N) / (2 * (N - 1))}
        statement.append(
            f"Thm 5.3: the cross-view-only additive loss over N = {N} pairs separates negatives excessively at its "
            f"optimum, s_pos < 1 and s_neg < -1/(N-1); adding within-view negatives (c2 = 1) removes this."
        )
    if name == "sigmoid" and c2 == 0 and N >= 3:
        t, b = hp["temperature"], hp["bias"]
        opt = th.sigmoid_optimum(t, b, N)
        panel["sigmoid"] = {
            "t": t,
            "b": b,
            "eq10": {"N": N, "lhs": th.sigmoid_eq10_lhs(t, b, N), "rhs": (N - 2) / 2, "holds": th.sigmoid_eq10(t, b, N)},
            "ccem": {"N": N, "x_star": opt.x, "s_pos": opt.s_pos, "s_neg": opt.s_neg, "regime": opt.regime},
        }
    vrn = training_config.get("vrn")
    if isinstance(vrn, (int, float)) and vrn > 0:
        statement.append(
            f"VRN (lambda = {vrn:g}) penalises the squared distance of cross-view negatives from -1/(n-1), "
            "shrinking their variance (Def. 5.7)."
        )
    panel["statement"] = " ".join(statement)
    panel["layers"] = _layer_checks(layers, n_ref, m)
    return panel


def _layer_checks(layers: dict, n_ref: int, m: int | None) -> dict:
    """Thm 5.2 ceiling next to the measured positive mean, and the validity flags, per layer.

    No pass/fail flag: Eq. 7 with n = the measured rows always holds, while the ceiling stored here uses
    n_ref (the training set), so for a sample of n < n_ref rows it is an estimate, not a bound.
    """
    out = {}
    for name, layer in layers.items():
        d = layer.get("d")
        pos = (layer.get("pairs", {}).get("positive") or {}).get("mean")
        ceiling = ((layer.get("geometry") or {}).get("alignment_ceiling") or {}).get("value")
        out[name] = {
            "d": d,
            "alignment_ceiling": ceiling,
            "positive_mean": pos,
            "caveat": bool(isinstance(d, int) and d < n_ref - 1),
            "d_below_m_minus_1": bool(isinstance(d, int) and m is not None and d < m - 1),
        }
    return out
