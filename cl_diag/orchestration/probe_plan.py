"""The probe plan of an analysis: which probes run on what, and the probes block they make.
A checkpoint's probes (:func:`probe_block`) run on its backbone features of the un-augmented
splits, encoded once beside the raw-pixel and random-init baselines (fitted on rank 0), plus
retrieval on every analysed layer; a probe that cannot run is decided from the labels before
any image is encoded (:func:`unrunnable_probes`). An embeddings file feeds retrieval, and
with labels the classification probes on its view-1 rows (:func:`embeddings_probes`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import torch

from cl_diag.io.embeddings import Embeddings
from cl_diag.models import Subject
from cl_diag.orchestration.analysis_config import (
    AnalyzeConfig,
)
from cl_diag.result import (
    EMBEDDING_LAYER,
    PIXELS,
    RETRIEVAL_KS,
    Probes,
    ProbeSet,
    Retrieval,
    SplitSize,
    Validation,
)
from cl_diag.runtime import Runtime

#: the probes that fit or score on the labelled train/test splits
CLASSIFICATION_PROBES = ("linear", "knn", "clustering")


#: Neighbour counts and temperature of the kNN probe (solo-learn / InstDisc defaults).
KNN_KS = (20, 200)


KNN_TEMPERATURE = 0.07


#: why a classification probe cannot run on an embeddings file without labels
_NO_LABELS = (
    "it fits and scores on labelled rows; the file holds no labels (an integer array "
    "'labels', one class per row, gives them)"
)
#: the share of each class's rows of a labelled embeddings file held out as the probes' test
#: split (the rest is their train split)
EMBEDDINGS_TEST_FRACTION = 0.2


def embeddings_probes(
    embeddings: Embeddings,
    probes: Sequence[str],
    mode: str,
    *,
    seed: int = 0,
    is_main: bool = True,
) -> Probes | None:
    """The probes an embeddings file (or arrays) can feed: label-free retrieval of the positive
    in both directions (view 1 -> view 2 and back), and with labels the linear, kNN and
    clustering probes on view 1's rows, split per class into a train split and a test split of
    :data:`EMBEDDINGS_TEST_FRACTION` of each class's rows, drawn with ``seed``
    (:func:`~cl_diag.measurement.probes.stratified_split`). Every pair is ranked exactly and the
    probes fit on every row, so they run with ``--pairs exact`` only: sampled and moments modes
    are for sizes where that is out of reach, and say so. A probe asked for that cannot run is
    listed in ``skipped`` with the reason. None when no probe was asked for (and on the
    ranks > 0 of a torchrun job, which write no result)."""
    if not probes or not is_main:
        return None
    skipped: dict[str, str] = {}
    retrieval = None
    if "retrieval" in probes:
        if mode == "exact":
            from cl_diag.measurement.probes import retrieval as rank_positives

            scores = rank_positives(
                embeddings.z1, embeddings.z2, ks=RETRIEVAL_KS, both_directions=True
            )
            retrieval = {EMBEDDING_LAYER: scores}
        else:
            skipped["retrieval"] = (
                f"it ranks every pair exactly, O(n^2 d); --pairs {mode} is for sizes where "
                "every pair is out of reach: run it with --pairs exact"
            )
    asked = [p for p in CLASSIFICATION_PROBES if p in probes]
    trained, splits = ProbeSet(), None
    if asked and embeddings.labels is None:
        skipped.update(dict.fromkeys(asked, _NO_LABELS))
    elif asked and mode != "exact":
        skipped.update(
            dict.fromkeys(
                asked,
                f"it fits on every row; --pairs {mode} is for sizes where that is out of "
                "reach: run it with --pairs exact",
            )
        )
    elif asked:
        trained, splits, why = _row_probes(embeddings, asked, seed)
        skipped.update(why)
    return Probes(
        layer=EMBEDDING_LAYER,
        splits=splits,
        linear=trained.linear,
        knn=trained.knn,
        clustering=trained.clustering,
        retrieval=retrieval,
        skipped=skipped or None,
    )


def _row_probes(
    embeddings: Embeddings, asked: Sequence[str], seed: int
) -> tuple[ProbeSet, dict[str, SplitSize], dict[str, str]]:
    """The classification probes ``asked`` on view 1's labelled rows, split per class; those
    the split's labels cannot feed are returned with the reason instead."""
    from cl_diag.measurement.probes import ProbeInputError, check_probe_inputs, stratified_split

    assert embeddings.labels is not None
    labels = embeddings.labels.cpu().numpy()
    x = embeddings.z1.float().cpu()
    n = int(labels.size)
    try:
        fit, held = stratified_split(labels, EMBEDDINGS_TEST_FRACTION, seed)
    except ProbeInputError:  # no class has the two rows a test split needs
        lonely = "every class has one row: none can be held out as a test split"
        return ProbeSet(), {}, dict.fromkeys(asked, lonely)
    train = (x[torch.from_numpy(fit)], labels[fit])
    test = (x[torch.from_numpy(held)], labels[held])
    rows = (
        f"view 1's rows, {EMBEDDINGS_TEST_FRACTION:.0%} of each class held out as the test "
        f"split (seed {seed})"
    )
    why: dict[str, str] = {}
    for probe in asked:
        reason = check_probe_inputs(probe, train_y=train[1], test_y=test[1])
        if reason is not None:
            why[probe] = reason
    fitted = _classification_probes([p for p in asked if p not in why], seed, train, test)

    def with_rows(probe):
        return (
            None
            if probe is None
            else replace(probe, settings={**(probe.settings or {}), "rows": rows})
        )

    splits = {
        "train": SplitSize(images=int(fit.size), of=n),
        "test": SplitSize(images=int(held.size), of=n),
    }
    trained = ProbeSet(
        linear=with_rows(fitted.linear),
        knn=with_rows(fitted.knn),
        clustering=with_rows(fitted.clustering),
    )
    return trained, splits, why


def retrieval_scores(u: torch.Tensor, v: torch.Tensor) -> Retrieval:
    from cl_diag.measurement.probes import retrieval

    return retrieval(u, v, ks=RETRIEVAL_KS)


def _classification_probes(probes: Sequence[str], seed: int, train, test) -> ProbeSet:
    """The linear, knn and clustering ``probes`` asked for on one representation's (features,
    labels) train and test splits (k-means clusters the test split)."""
    from cl_diag.measurement.probes import clustering, knn_probe, linear_probe

    (train_x, train_y), (test_x, test_y) = train, test
    linear = knn = scores = None
    if "linear" in probes:
        linear = linear_probe(train_x, train_y, test_x, test_y, seed=seed)
    if "knn" in probes:
        knn = knn_probe(train_x, train_y, test_x, test_y, ks=KNN_KS, temperature=KNN_TEMPERATURE)
    if "clustering" in probes:
        scores = clustering(test_x, test_y, seed=seed)
        scores = replace(scores, settings={**(scores.settings or {}), "split": "test"})
    return ProbeSet(linear=linear, knn=knn, clustering=scores)


def _validation_probe(config: AnalyzeConfig, train) -> Validation:
    """The linear probe on a validation split carved from the train split (``analyze
    --validation-fraction``): each class sends ``round(fraction * n_c)`` of its images, drawn
    with the analysis seed, to validation (:func:`stratified_split`, per class: the same
    images for every run of a dataset, so runs are chosen between on one split); the probe is
    fitted on the rest, with its own weight decay chosen inside them, and scored on the
    held-out images. The test split takes no part."""
    import numpy as np

    from cl_diag.measurement.probes import linear_probe, stratified_split

    assert config.validation_fraction is not None
    x, y = train
    labels = np.asarray(y.cpu() if isinstance(y, torch.Tensor) else y)
    fit, held = stratified_split(labels, config.validation_fraction, config.seed)
    fit_t, held_t = torch.from_numpy(fit), torch.from_numpy(held)
    linear = linear_probe(x[fit_t], labels[fit], x[held_t], labels[held], seed=config.seed)
    return Validation(
        fraction=float(config.validation_fraction),
        seed=int(config.seed),
        n_fit=int(fit.size),
        n_val=int(held.size),
        linear=linear,
    )


def probe_block(
    config: AnalyzeConfig, subject: Subject, views: dict, layers: list[str], progress, run: Runtime
) -> Probes | None:
    """The probes block; None on the ranks > 0 of a torchrun job, which only help encode."""
    from cl_diag.measurement.views import Pixels, Taps, encode_images, sample_indices

    splits = None
    validation = None
    trained = ProbeSet()
    baselines: dict[str, ProbeSet] = {}
    with_baselines = config.baselines
    # a module passed from Python has no random-init twin when it cannot be re-initialised
    twin = subject.random_backbone if with_baselines else None
    needs_splits = any(p in config.probes for p in CLASSIFICATION_PROBES)
    # _measure_subject has checked that the subject is an encoder (its twin: twin)
    assert subject.backbone is not None
    if needs_splits:
        taps: dict[str, torch.nn.Module] = {"trained": Taps(subject.backbone)}
        if twin is not None:
            taps["random_init"] = Taps(twin)
        if with_baselines:
            taps["raw_pixels"] = Pixels()
        split_features = {}
        for split, limit in (
            ("train", config.probe_train_images),
            ("test", config.probe_test_images),
        ):
            dataset = subject.splits[split]
            idx = sample_indices(len(dataset), limit, config.seed)
            feats, labels = encode_images(
                taps,
                dataset,
                idx,
                batch_size=config.encode_batch_size,
                device=run.device,
                workers=config.workers or 0,  # resolved by analyze(): never None here
                amp=config.amp,
                progress=progress(
                    f"encoding the un-augmented {split} split ({len(idx)} images)", len(idx)
                ),
                ranks=run.ranks,
            )
            split_features[split] = (feats, labels, len(dataset))
        splits = {
            split: SplitSize(images=len(split_features[split][1]), of=int(split_features[split][2]))
            for split in ("train", "test")
        }
    if not run.ranks.is_main:  # the fitting is rank 0's alone: no collectives below
        return None
    if needs_splits:

        def pair(name: str, layer: str):
            return tuple(
                (split_features[s][0][name][layer], split_features[s][1]) for s in ("train", "test")
            )

        advance = progress("fitting the probes", None)
        fit = (config.probes, config.seed)
        trained = _classification_probes(*fit, *pair("trained", "backbone"))
        if config.validation_fraction is not None and "linear" in config.probes:
            validation = _validation_probe(config, pair("trained", "backbone")[0])
        if with_baselines:
            baselines["raw_pixels"] = _classification_probes(*fit, *pair("raw_pixels", "pixels"))
        if twin is not None:
            baselines["random_init"] = _classification_probes(
                *fit, *pair("random_init", "backbone")
            )
        advance(1)
    if "retrieval" in config.probes:
        retrieval = {layer: retrieval_scores(*views["trained"][layer][:2]) for layer in layers}
        trained = replace(trained, retrieval=retrieval)
        if with_baselines:
            pixels = {PIXELS: retrieval_scores(*views["raw_pixels"][PIXELS][:2])}
            base = baselines.get("raw_pixels", ProbeSet())
            baselines["raw_pixels"] = replace(base, retrieval=pixels)
        if twin is not None:
            retrieval = {
                layer: retrieval_scores(*views["random_init"][layer][:2]) for layer in layers
            }
            base = baselines.get("random_init", ProbeSet())
            baselines["random_init"] = replace(base, retrieval=retrieval)
    return Probes(
        layer="backbone",
        splits=splits,
        validation=validation,
        linear=trained.linear,
        knn=trained.knn,
        clustering=trained.clustering,
        retrieval=trained.retrieval,
        baselines=baselines if with_baselines and baselines else None,
    )


def unrunnable_probes(config: AnalyzeConfig, subject: Subject) -> dict[str, str]:
    """``{probe: why it cannot run}`` for the classification probes asked for, decided from the
    labels of the images the probes would encode
    (:func:`cl_diag.measurement.probes.check_probe_inputs`, the rule the probes themselves
    apply), before a single image is encoded."""
    from cl_diag.measurement.probes import check_probe_inputs
    from cl_diag.measurement.views import sample_indices
    from cl_diag.training.data import dataset_labels

    labels = {}
    for split, limit in (("train", config.probe_train_images), ("test", config.probe_test_images)):
        dataset = subject.splits[split]
        every = dataset_labels(getattr(dataset, "base", dataset))
        labels[split] = every[sample_indices(len(every), limit, config.seed)]
    skipped = {}
    for probe in CLASSIFICATION_PROBES:
        if probe in config.probes:
            reason = check_probe_inputs(probe, train_y=labels["train"], test_y=labels["test"])
            if reason is not None:
                skipped[probe] = reason
    return skipped
