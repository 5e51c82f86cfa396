"""The content of a comparison report: several result.json dicts side by side.

Runs are labelled by what differs between their training configs (issue 6:
"simclr b32 +VRN30"), not by paths; folder names are the fallback when configs
are empty or identical. The tables hold, per layer, the positive mean, the
cross-view and within-view negative mean/var/std/excessive ratio, the geometry,
and the probe accuracies; with a baseline, each run's difference from it.

The batch-size view reproduces the layout of the paper's Table 1 and Fig. 4
(Lee et al., ICML 2025), with the Theorem 5.5 band (Eq. 11)

    Var[s_neg] in [ (n-m) / ((m-1)(n-1)^2),  n(n-m) / ((m-1)(n-1)^2) ]

and the 1/d variance of uniformly random unit vectors (paper-notes 11.4); the
temperature view is Fig. 3's.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import PurePath

import numpy as np
import pandas as pd

from cl_diag.report import figures
from cl_diag.report.analysis import SIMILARITY_CONVENTION
from cl_diag.report.document import MISSING, Document, Figure, Heading, Note, Paragraph, Table, flatten, fmt, get, pct

# Config keys that say where or how a run was executed, not what was trained.
IGNORED_CONFIG_KEYS = frozenset(
    {"out", "out_dir", "output", "resume", "device", "devices", "quiet", "num_workers", "data_root", "progress",
     "log_every", "checkpoint", "checkpoint_every", "save_every", "parallel"}
)
# Aliases of the four keys the labels and the study figures understand (flattened config keys).
_ALIASES = {
    "loss": ("loss", "loss.name", "method"),
    "batch_size": ("batch_size", "batch-size"),
    "temperature": ("temperature", "loss.temperature", "tau"),
    "vrn": ("vrn", "vrn.lambda", "vrn_lambda", "vrn.weight", "vrn_weight"),
    "seed": ("seed",),
}
LABEL_ORDER = ("loss", "batch_size", "vrn", "temperature")
# the seed goes last in a label: "simclr +VRN3 seed1" reads as a member of the group "simclr +VRN3"
SEED_KEY = "seed"

PAIR_METRICS = (
    ("positive_mean", ("pairs", "positive", "mean"), "positive mean"),
    ("cross_view_negative_mean", ("pairs", "cross_view_negative", "mean"), "cross-view neg. mean"),
    ("cross_view_negative_var", ("pairs", "cross_view_negative", "var"), "cross-view neg. var"),
    ("cross_view_negative_std", ("pairs", "cross_view_negative", "std"), "cross-view neg. std"),
    ("cross_view_negative_excessive_ratio", ("pairs", "cross_view_negative", "excessive_ratio"), "cross-view excessive ratio"),
    ("within_view_negative_mean", ("pairs", "within_view_negative", "mean"), "within-view neg. mean"),
    ("within_view_negative_var", ("pairs", "within_view_negative", "var"), "within-view neg. var"),
    ("within_view_negative_std", ("pairs", "within_view_negative", "std"), "within-view neg. std"),
    ("within_view_negative_excessive_ratio", ("pairs", "within_view_negative", "excessive_ratio"), "within-view excessive ratio"),
)
GEOMETRY_METRICS = (
    ("alignment", ("geometry", "alignment"), "alignment"),
    ("uniformity_u", ("geometry", "uniformity", "u"), "uniformity u"),
    ("uniformity_v", ("geometry", "uniformity", "v"), "uniformity v"),
    ("effective_rank_u", ("geometry", "effective_rank", "u"), "effective rank u"),
    ("effective_rank_v", ("geometry", "effective_rank", "v"), "effective rank v"),
    ("frontier_gap", ("geometry", "frontier_gap"), "frontier gap"),
    ("alignment_ceiling", ("geometry", "alignment_ceiling", "value"), "alignment ceiling"),
)
# (column, path inside result["probes"], title); retrieval is per layer and added separately
PROBE_METRICS = (
    ("linear_top1", ("linear", "top1"), "linear top-1"),
    ("linear_top5", ("linear", "top5"), "linear top-5"),
    ("knn_k20_top1", ("knn", "k20", "top1"), "kNN k=20 top-1"),
    ("knn_k200_top1", ("knn", "k200", "top1"), "kNN k=200 top-1"),
    ("clustering_nmi", ("clustering", "nmi"), "k-means NMI"),
    ("clustering_ari", ("clustering", "ari"), "k-means ARI"),
)
RETRIEVAL_METRICS = tuple(
    (f"retrieval_recall_at_{k}", f"recall_at_{k}", f"retrieval R@{k}") for k in (1, 5, 10)
)
_SCORES = {"clustering_nmi", "clustering_ari"}  # not accuracies: printed as numbers, not %


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def run_facts(result: dict) -> dict[str, object]:
    """Flattened training config with the label keys under canonical names.

    ``vrn`` becomes the VRN weight (0 when off; ``vrn.enabled = false`` also means off) and
    ``batch_size`` falls back to ``theory.batch_size``.
    """
    flat = {k: v for k, v in flatten(result.get("config") or {}).items() if k not in IGNORED_CONFIG_KEYS}
    facts: dict[str, object] = {}
    for canonical, aliases in _ALIASES.items():
        for alias in aliases:
            if alias in flat:
                facts[canonical] = flat.pop(alias)
                break
    if "vrn.enabled" in flat:
        enabled = flat.pop("vrn.enabled")
        if enabled is False:
            facts["vrn"] = 0.0
        elif "vrn" not in facts:
            facts["vrn"] = 1.0 if enabled else 0.0
    if isinstance(facts.get("vrn"), bool):
        facts["vrn"] = 1.0 if facts["vrn"] else 0.0
    if facts.get("batch_size") is None and get(result, "theory", "batch_size") is not None:
        facts["batch_size"] = get(result, "theory", "batch_size")
    for key in sorted(flat):
        facts[key] = flat[key]
    return facts


def _vrn_on(facts: dict) -> bool:
    value = _number(facts.get("vrn"))
    return value is not None and value > 0


def _part(key: str, value: object) -> str:
    if value is None:
        return ""
    if key == "loss":
        return str(value)
    if key == "batch_size":
        return f"b{fmt(value)}"
    if key == "vrn":
        weight = _number(value)
        return f"+VRN{weight:g}" if weight is not None and weight > 0 else ""
    if key == "temperature":
        return f"t{fmt(value)}"
    if key == SEED_KEY:
        return f"seed{fmt(value)}"
    return f"{key}={fmt(value)}"


def _folder_names(names: list[str]) -> list[str]:
    """Shortest unique trailing path parts of each run's name ("a/analysis", "b/analysis")."""
    parts = [PurePath(n).parts or (n,) for n in names]
    depth = [1] * len(names)
    while True:
        labels = ["/".join(p[-d:]) for p, d in zip(parts, depth)]
        counts = Counter(labels)
        grown = False
        for i, label in enumerate(labels):
            if counts[label] > 1 and depth[i] < len(parts[i]):
                depth[i] += 1
                grown = True
        if not grown:
            break
    seen: Counter = Counter()
    out = []
    for label in labels:
        seen[label] += 1
        out.append(label if counts[label] == 1 else f"{label} #{seen[label]}")
    return out


def config_labels(facts: list[dict], *, exclude: tuple[str, ...] = ()) -> list[str]:
    """Labels from the config keys that differ between runs (the loss name always leads)."""
    keys: list[str] = []
    for f in facts:
        keys += [k for k in f if k not in keys]
    differing = [k for k in keys if len({repr(f.get(k)) for f in facts}) > 1]
    ordered = [k for k in LABEL_ORDER if k in differing or k == "loss"]
    ordered += sorted(k for k in differing if k not in LABEL_ORDER and k != SEED_KEY)
    ordered += [SEED_KEY] if SEED_KEY in differing else []
    labels = []
    for f in facts:
        parts = [_part(k, f.get(k)) for k in ordered if k not in exclude]
        labels.append(" ".join(p for p in parts if p))
    return labels


def run_labels(runs: list[tuple[str, dict]]) -> list[str]:
    """One unique, human label per run: config differences, else folder names."""
    names = [name for name, _ in runs]
    facts = [run_facts(result) for _, result in runs]
    labels = config_labels(facts)
    if not any(labels) or len(set(labels)) == 1 and len(labels) > 1:
        return _folder_names(names)
    counts = Counter(labels)
    if all(counts[label] == 1 and label for label in labels):
        return labels
    # configs that cannot tell some runs apart: keep the config label, add the folder
    folders = _folder_names(names)
    out = []
    for label, folder in zip(labels, folders):
        out.append(label if label and counts[label] == 1 else f"{label} [{folder}]".strip())
    return out


def _natural_key(label: str) -> list:
    # "b32" before "b128": digit runs compare as numbers
    return [(0, float(tok), "") if tok[:1].isdigit() else (1, 0.0, tok) for tok in re.findall(r"\d+(?:\.\d+)?|\D+", label)]


def ordered(runs: list[tuple[str, dict]]) -> list[tuple[str, dict]]:
    """Runs in display order: loss, batch size, temperature, VRN weight, then the label's natural
    order (digit runs as numbers); input order breaks ties.

    The reports do not depend on the order the runs were given in (e.g. by a shell glob).
    """
    labels = run_labels(runs)
    facts = [run_facts(r) for _, r in runs]

    def num(value: object) -> tuple[int, float]:
        number = _number(value)
        return (0, number) if number is not None else (1, 0.0)

    def key(i: int) -> tuple:
        f = facts[i]
        # grouped like the paper's tables: by batch size, then temperature, without VRN before with
        return (str(f.get("loss") or ""), num(f.get("batch_size")), num(f.get("temperature")), num(f.get("vrn")),
                _natural_key(labels[i]))

    return [runs[i] for i in sorted(range(len(runs)), key=key)]


def _thresholds(runs: list[tuple[str, dict]]) -> list[tuple[int, float]]:
    seen: dict[object, float] = {}
    for _, result in runs:
        seen.setdefault(result.get("n_ref"), result.get("threshold"))
    return list(seen.items())


def comparison_warnings(runs: list[tuple[str, dict]]) -> list[str]:
    """What a reader must know before comparing these numbers (also printed by the CLI)."""
    labels = run_labels(runs)
    warnings = []
    if len(_thresholds(runs)) > 1:
        detail = "; ".join(
            f"{label}: n_ref = {fmt(r.get('n_ref'))}, δ = {fmt(r.get('threshold'))}" for label, (_, r) in zip(labels, runs)
        )
        warnings.append(
            "The runs have different n_ref, so their excessive-separation thresholds δ = −1/(n_ref − 1) differ "
            f"and their ratios count against different lines ({detail}). Both thresholds are drawn; to compare ratios "
            "on one threshold, re-run `cl-diag analyze` with the same --n-ref."
        )
    modes = {r.get("mode") for _, r in runs}
    if len(modes) > 1:
        detail = "; ".join(f"{label}: {r.get('mode')}" for label, (_, r) in zip(labels, runs))
        warnings.append(
            f"The runs mix exact and sampled statistics ({detail}); sampled values are estimates."
        )
    return warnings


def _layer_names(runs: list[tuple[str, dict]]) -> list[str]:
    names: list[str] = []
    for _, result in runs:
        names += [n for n in (result.get("layers") or {}) if n not in names]
    return names


def primary_layer(runs: list[tuple[str, dict]]) -> str | None:
    """The paper measures the projector output; an embeddings file has one layer."""
    names = _layer_names(runs)
    for preferred in ("projector", "embedding"):
        if preferred in names:
            return preferred
    return names[0] if names else None


def _layer_values(result: dict, layer_name: str) -> dict[str, float | None]:
    layer = get(result, "layers", layer_name)
    out: dict[str, float | None] = {}
    for column, path, _ in PAIR_METRICS + GEOMETRY_METRICS:
        out[column] = _number(get(layer, *path)) if isinstance(layer, dict) else None
    probes = result.get("probes") or {}
    for column, path, _ in PROBE_METRICS:
        out[column] = _number(get(probes, *path))
    for column, key, _ in RETRIEVAL_METRICS:
        out[column] = _number(get(probes, "retrieval", layer_name, key))
    return out


METRIC_COLUMNS = tuple(c for c, _, _ in PAIR_METRICS + GEOMETRY_METRICS + PROBE_METRICS) + tuple(
    c for c, _, _ in RETRIEVAL_METRICS
)


def comparison_frame(runs: list[tuple[str, dict]], *, baseline: str | None = None) -> pd.DataFrame:
    """One row per (run, layer): config facts, thresholds, every compared metric, and with a
    baseline ``delta_<metric>`` = run − baseline for the same layer (fractions, not %)."""
    runs = ordered(runs)
    labels = run_labels(runs)
    base_index = _baseline_index(runs, baseline)
    records = []
    for (name, result), label in zip(runs, labels):
        facts = run_facts(result)
        for layer_name in _layer_names(runs):
            layer = get(result, "layers", layer_name)
            if not isinstance(layer, dict):
                continue
            record: dict[str, object] = {
                "label": label,
                "run": name,
                "layer": layer_name,
                "loss": facts.get("loss"),
                "batch_size": facts.get("batch_size"),
                "temperature": facts.get("temperature"),
                "vrn": facts.get("vrn"),
                "n_ref": result.get("n_ref"),
                "threshold": result.get("threshold"),
                "mode": result.get("mode"),
                "n": layer.get("n"),
                "d": layer.get("d"),
            }
            record.update(_layer_values(result, layer_name))
            if base_index is not None:
                base = _layer_values(runs[base_index][1], layer_name)
                for column in METRIC_COLUMNS:
                    a, b = record[column], base[column]
                    record[f"delta_{column}"] = a - b if a is not None and b is not None else None
            records.append(record)
    frame = pd.DataFrame.from_records(records)
    return frame


def _baseline_index(runs: list[tuple[str, dict]], baseline: str | None) -> int | None:
    if baseline is None:
        return None
    names = [name for name, _ in runs]
    if baseline not in names:
        raise ValueError(f"baseline {baseline!r} is not one of the runs {names!r}")
    return names.index(baseline)


def _cell(column: str, value: float | None, *, delta: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    is_acc = column.startswith(("linear_", "knn_", "retrieval_"))
    if delta:
        return f"{100.0 * value:+.2f} pp" if is_acc else f"{value:+.6g}"
    return pct(value) if is_acc else fmt(value)


def _metric_table(
    rows_by_run: list[tuple[str, dict]], metrics, *, caption: str, delta: bool = False
) -> Table | None:
    columns_present = [(c, t) for c, _, t in metrics if any(v.get(c) is not None for _, v in rows_by_run)]
    if not columns_present:
        return None
    return Table(
        columns=["run", *[t for _, t in columns_present]],
        rows=[[label, *[_cell(c, values.get(c), delta=delta) for c, _ in columns_present]] for label, values in rows_by_run],
        caption=caption,
    )


def _deltas(values: list[tuple[str, dict]], base: dict) -> list[tuple[str, dict]]:
    out = []
    for label, row in values:
        out.append(
            (label, {c: (row[c] - base[c] if row.get(c) is not None and base.get(c) is not None else None) for c in row})
        )
    return out


# ---- seed groups ---------------------------------------------------------------------------------

# (column, title) of the "over seeds" table of each layer
SEED_PAIR_COLUMNS = (
    ("positive_mean", "positive mean"),
    ("cross_view_negative_mean", "cross-view neg. mean"),
    ("cross_view_negative_std", "cross-view neg. std"),
    ("cross_view_negative_excessive_ratio", "cross-view excessive ratio"),
    ("within_view_negative_mean", "within-view neg. mean"),
    ("within_view_negative_std", "within-view neg. std"),
    ("within_view_negative_excessive_ratio", "within-view excessive ratio"),
)
SEED_STD_WORDS = "sample standard deviation (ddof 1) across seeds"


@dataclass(frozen=True)
class SeedGroup:
    """Runs (indices into the ordered runs) whose configs differ only in ``seed``."""

    label: str
    members: tuple[int, ...]
    seeds: tuple[object, ...]

    @property
    def seeds_text(self) -> str:
        """"1–5" for a run of consecutive integer seeds, else the seeds comma-separated."""
        ints = [s for s in self.seeds if isinstance(s, int) and not isinstance(s, bool)]
        if len(ints) == len(self.seeds) > 2 and sorted(ints) == list(range(min(ints), max(ints) + 1)):
            return f"{min(ints)}–{max(ints)}"
        return ", ".join(fmt(s) for s in self.seeds)


def seed_groups(runs: list[tuple[str, dict]]) -> list[SeedGroup]:
    """Groups of >= 2 runs whose training configs are equal but for the seed (and whose
    n_ref and statistics mode agree, so that their ratios and estimates are comparable).

    ``runs`` in display order (:func:`ordered`); groups in the order of their first run,
    members in display order. A group with a repeated seed is not a seed group.
    """
    facts = [run_facts(r) for _, r in runs]
    keys = [
        repr((sorted((k, repr(v)) for k, v in f.items() if k != SEED_KEY), r.get("n_ref"), r.get("mode")))
        for f, (_, r) in zip(facts, runs)
    ]
    members: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        if facts[i].get(SEED_KEY) is not None:
            members.setdefault(key, []).append(i)
    labels = config_labels(facts, exclude=(SEED_KEY,))
    groups = []
    for idx in members.values():
        seeds = [facts[i][SEED_KEY] for i in idx]
        if len(idx) < 2 or len({repr(s) for s in seeds}) < len(seeds):
            continue
        groups.append(SeedGroup(label=labels[idx[0]] or "runs", members=tuple(idx), seeds=tuple(seeds)))
    counts = Counter(g.label for g in groups)
    if any(c > 1 for c in counts.values()):
        # same config label but different n_ref or mode: say which
        groups = [
            SeedGroup(
                f"{g.label} (n_ref = {fmt(runs[g.members[0]][1].get('n_ref'))}, {runs[g.members[0]][1].get('mode')})"
                if counts[g.label] > 1 else g.label,
                g.members,
                g.seeds,
            )
            for g in groups
        ]
    return groups


def seed_statistics(values: list[float | None]) -> tuple[float, float] | None:
    """(mean, sample std with ddof 1) of one metric over a group's seeds; None unless every
    seed has the metric (a mean over a subset would pass for the group's)."""
    if len(values) < 2 or any(v is None for v in values):
        return None
    array = np.asarray(values, dtype=np.float64)
    return float(array.mean()), float(array.std(ddof=1))


def _group_values(runs, group: SeedGroup, values_of) -> dict[str, tuple[float, float] | None]:
    per_run = [values_of(runs[i][1]) for i in group.members]
    columns = list(per_run[0])
    return {c: seed_statistics([v.get(c) for v in per_run]) for c in columns}


def _seed_cell(column: str, stats: tuple[float, float] | None) -> str:
    if stats is None:
        return MISSING
    mean, std = stats
    if column.startswith(("linear_", "knn_", "retrieval_")):
        return f"{100.0 * mean:.2f} ± {100.0 * std:.2f} %"
    return f"{fmt(mean, 4)} ± {fmt(std, 2)}"


def _seed_table(rows: list[tuple[SeedGroup, dict]], columns, *, caption: str) -> Table | None:
    present = [(c, t) for c, t in columns if any(stats.get(c) is not None for _, stats in rows)]
    if not rows or not present:
        return None
    return Table(
        columns=["group", "seeds", *[t for _, t in present]],
        rows=[
            [g.label, f"{len(g.members)}: {g.seeds_text}", *[_seed_cell(c, stats.get(c)) for c, _ in present]]
            for g, stats in rows
        ],
        caption=caption,
    )


def seed_frame(runs: list[tuple[str, dict]]) -> pd.DataFrame | None:
    """comparison_by_seed.csv: one row per (seed group, layer): the group's facts, its seeds and,
    for every compared metric, ``<metric>_mean`` and ``<metric>_std`` (ddof 1) over the seeds.
    None when no runs form a seed group."""
    runs = ordered(runs)
    groups = seed_groups(runs)
    if not groups:
        return None
    records = []
    for group in groups:
        first = runs[group.members[0]][1]
        facts = run_facts(first)
        for layer_name in _layer_names(runs):
            if not all(layer_name in (runs[i][1].get("layers") or {}) for i in group.members):
                continue
            record: dict[str, object] = {
                "group": group.label,
                "layer": layer_name,
                "n_seeds": len(group.members),
                "seeds": " ".join(fmt(s) for s in group.seeds),
                "runs": ";".join(runs[i][0] for i in group.members),
                "loss": facts.get("loss"),
                "batch_size": facts.get("batch_size"),
                "temperature": facts.get("temperature"),
                "vrn": facts.get("vrn"),
                "n_ref": first.get("n_ref"),
                "threshold": first.get("threshold"),
                "mode": first.get("mode"),
            }
            stats = _group_values(runs, group, lambda r, layer_name=layer_name: _layer_values(r, layer_name))
            for column in METRIC_COLUMNS:
                pair = stats.get(column)
                record[f"{column}_mean"] = None if pair is None else pair[0]
                record[f"{column}_std"] = None if pair is None else pair[1]
            records.append(record)
    return pd.DataFrame.from_records(records)


def _pooled_pairs(runs, group: SeedGroup, layer: str) -> dict | None:
    """The group's negative histograms summed over its seeds (None when their binnings differ)."""
    pooled: dict = {}
    for kind in ("cross_view_negative", "within_view_negative"):
        hists = [get(runs[i][1], "layers", layer, "pairs", kind, "histogram") for i in group.members]
        if any(not isinstance(h, dict) for h in hists):
            continue
        shapes = {(tuple(h.get("range", (-1.0, 1.0))), h.get("bins"), len(h.get("counts", []))) for h in hists}
        if len(shapes) != 1:
            return None
        counts = np.sum([np.asarray(h["counts"], dtype=np.int64) for h in hists], axis=0)
        pooled[kind] = {"histogram": {"range": list(hists[0].get("range", (-1.0, 1.0))), "bins": hists[0].get("bins"), "counts": counts.tolist()}}
    return pooled or None


@dataclass(frozen=True)
class _Study:
    """Points of one study figure: series label -> [(x, y)]."""

    series: list[figures.Series]

    @classmethod
    def collect(cls, runs, facts, x_key: str, y_of) -> _Study:
        series_labels = config_labels(facts, exclude=(x_key,))
        groups: dict[str, list[tuple[float, float]]] = {}
        for (_, result), f, s_label in zip(runs, facts, series_labels):
            x, y = _number(f.get(x_key)), y_of(result)
            if x is None or y is None:
                continue
            groups.setdefault(s_label or "runs", []).append((x, y))
        # series with and without VRN side by side: without first, a stable order
        ordered = sorted(groups.items(), key=lambda kv: ("+VRN" in kv[0], _natural_key(kv[0])))
        return cls([figures.Series(label, [p[0] for p in pts], [p[1] for p in pts]) for label, pts in ordered])

    @property
    def points(self) -> int:
        return sum(len(s.x) for s in self.series)


def _band(n_ref: object, ms: list[float]) -> tuple[list[float], list[float], list[float]] | None:
    """Thm 5.5 band on a fine grid of batch sizes spanning the runs' ones."""
    from cl_diag.measurement.theory import variance_band

    if not isinstance(n_ref, int) or not ms:
        return None
    lo_m, hi_m = max(2, int(min(ms))), min(int(max(ms)), n_ref)
    if hi_m < lo_m:
        return None
    grid = sorted({int(round(m)) for m in np.geomspace(lo_m, hi_m, 48)} | {int(m) for m in ms if 2 <= m <= n_ref})
    bands = [variance_band(n_ref, m) for m in grid]
    return [float(m) for m in grid], [b[0] for b in bands], [b[1] for b in bands]


def _study_blocks(runs: list[tuple[str, dict]], labels: list[str], layer: str | None) -> list:
    facts = [run_facts(r) for _, r in runs]
    blocks: list = []

    def distinct(key: str) -> list[float]:
        return sorted({v for v in (_number(f.get(key)) for f in facts) if v is not None})

    def xneg_var(result: dict) -> float | None:
        return _number(get(result, "layers", layer, "pairs", "cross_view_negative", "var"))

    def top1(result: dict) -> float | None:
        value = _number(get(result, "probes", "linear", "top1"))
        return None if value is None else 100.0 * value

    batch_sizes = distinct("batch_size")
    if len(batch_sizes) > 1 and layer is not None:
        blocks.append(Heading(2, "Batch-size study"))
        var_study = _Study.collect(runs, facts, "batch_size", xneg_var)
        table_rows = []
        for m in batch_sizes:
            row = [fmt(int(m)) if float(m).is_integer() else fmt(m)]
            for s in var_study.series:
                ys = [y for x, y in zip(s.x, s.y) if x == m]
                row.append(", ".join(fmt(y, 4) for y in ys) if ys else MISSING)
            table_rows.append(row)
        blocks.append(
            Table(
                columns=["batch size m", *[s.label for s in var_study.series]],
                rows=table_rows,
                caption=(
                    f"Variance (population) of cross-view negative similarities, layer '{layer}', by training batch size "
                    "(the layout of the paper's Table 1)."
                ),
            )
        )
        thresholds = _thresholds(runs)
        n_ref = thresholds[0][0]
        ds = sorted({d for _, r in runs if isinstance(d := get(r, "layers", layer, "d"), int) and d > 0})
        band = _band(n_ref, batch_sizes)
        blocks.append(
            Figure(
                filename="variance_vs_batch.svg",
                svg=figures.variance_vs_batch(
                    var_study.series,
                    band,
                    f"Thm 5.5 band (n = {fmt(n_ref)})",
                    [(d, 1.0 / d) for d in ds],
                    layer,
                ),
                alt=f"Variance of cross-view negative similarity versus batch size, layer {layer}",
                caption=(
                    f"Table 1 view: variance of cross-view negative similarities (layer '{layer}') versus training batch "
                    f"size m, log–log. Grey band: Theorem 5.5 (Eq. 11), [(n−m)/((m−1)(n−1)²), n(n−m)/((m−1)(n−1)²)] "
                    f"with n = n_ref = {fmt(n_ref)}, the optimum with fixed batches and d ≥ m − 1; dotted: 1/d, the "
                    "variance of uniformly random unit vectors. Real encoders (d ≪ n, reshuffled batches) sit far above "
                    "the band; only the ordering across m is predicted."
                    + (f" Runs have several n_ref; the band uses the first, {fmt(n_ref)}." if len(thresholds) > 1 else "")
                ),
            )
        )
        acc_study = _Study.collect(runs, facts, "batch_size", top1)
        if acc_study.points:
            blocks.append(
                Figure(
                    filename="accuracy_vs_batch.svg",
                    svg=figures.metric_vs(
                        acc_study.series,
                        xlabel="training batch size m",
                        ylabel="linear-probe top-1 (%)",
                        title="linear-probe accuracy vs batch size",
                        log_base=2,
                    ),
                    alt="Linear-probe top-1 accuracy versus batch size",
                    caption="Fig. 4 view: linear-probe top-1 accuracy (backbone features) versus training batch size.",
                )
            )
        else:
            blocks.append(Note("The runs differ in batch size but carry no linear-probe accuracy: no Fig. 4 view."))
    temperatures = distinct("temperature")
    if len(temperatures) > 1:
        blocks.append(Heading(2, "Temperature study"))
        acc_study = _Study.collect(runs, facts, "temperature", top1)
        if acc_study.points:
            blocks.append(
                Figure(
                    filename="accuracy_vs_temperature.svg",
                    svg=figures.metric_vs(
                        acc_study.series,
                        xlabel="temperature t",
                        ylabel="linear-probe top-1 (%)",
                        title="linear-probe accuracy vs temperature",
                        log_base=10,
                    ),
                    alt="Linear-probe top-1 accuracy versus temperature",
                    caption="Fig. 3 view: linear-probe top-1 accuracy (backbone features) versus temperature, log scale.",
                )
            )
        else:
            blocks.append(Note("The runs differ in temperature but carry no linear-probe accuracy: no Fig. 3 view."))
    return blocks


def _probe_caption(runs: list[tuple[str, dict]]) -> str:
    """Say which features each probe saw: the classification probes one layer, retrieval every layer."""
    probe_layers = sorted({str(get(r, "probes", "layer")) for _, r in runs if get(r, "probes", "layer") is not None})
    classifiers = any(get(r, "probes", key) is not None for _, r in runs for key in ("linear", "knn", "clustering"))
    retrieval = any(get(r, "probes", "retrieval") for _, r in runs)
    parts = []
    if classifiers:
        where = " / ".join(probe_layers) if probe_layers else "backbone"
        dropped = " (projector dropped)" if where == "backbone" else ""
        parts.append(f"linear, kNN and k-means probes on {where} features{dropped}")
    if retrieval:
        parts.append("retrieval: rank of the positive v_i among all v, on each named layer")
    text = "; ".join(parts) or "probes"
    return text[0].upper() + text[1:] + "; accuracies in %."


def build_comparison(runs: list[tuple[str, dict]], *, baseline: str | None = None) -> Document:
    """The comparison report's content. ``runs`` = [(name, result)], name = the run's folder or file."""
    if not runs:
        raise ValueError("a comparison needs at least one run")
    runs = ordered(runs)
    labels = run_labels(runs)
    base_index = _baseline_index(runs, baseline)
    facts = [run_facts(r) for _, r in runs]
    blocks: list = [Heading(1, "cl-diag comparison")]
    blocks.append(
        Table(
            columns=["run", "source", "loss", "batch size", "temperature", "VRN λ", "n_ref", "threshold δ", "mode", "layers"],
            rows=[
                [
                    label + (" (baseline)" if i == base_index else ""),
                    name,
                    fmt(f.get("loss")),
                    fmt(f.get("batch_size")),
                    fmt(f.get("temperature")),
                    fmt(f.get("vrn")),
                    fmt(r.get("n_ref")),
                    fmt(r.get("threshold")),
                    fmt(r.get("mode")),
                    ", ".join(r.get("layers") or {}),
                ]
                for i, ((name, r), label, f) in enumerate(zip(runs, labels, facts))
            ],
            caption="Runs, labelled by what differs between their training configs.",
        )
    )
    for warning in comparison_warnings(runs):
        blocks.append(Note(warning))
    thresholds = _thresholds(runs)
    threshold_words = "; ".join(f"n_ref = {fmt(n)}: δ = {fmt(t)}" for n, t in thresholds)
    blocks.append(
        Paragraph(
            f"Conventions: {SIMILARITY_CONVENTION}; variance is the population variance (ddof 0); cross-view negatives "
            "are (u_i, v_j), i ≠ j, all ordered pairs; within-view negatives are (u_i, u_j) and (v_i, v_j), i < j; the "
            f"excessive ratio is the fraction of negatives strictly below δ = −1/(n_ref − 1) ({threshold_words}). "
            "Accuracies are in %; differences from the baseline in percentage points (pp). comparison.csv holds the "
            "same numbers as fractions, one row per run and layer."
        )
    )
    groups = seed_groups(runs)
    if groups:
        blocks.append(
            Paragraph(
                "Seed groups: runs whose training configs differ only in their seed are also summarised "
                "\u201cover seeds\u201d, as mean ± " + SEED_STD_WORDS + " ("
                + "; ".join(f"{g.label}: seeds {g.seeds_text}" for g in groups)
                + "). comparison_by_seed.csv holds those means and standard deviations for every metric."
            )
        )
    base_label = labels[base_index] if base_index is not None else None
    for layer in _layer_names(runs):
        in_layer = [(label, _layer_values(r, layer)) for label, (_, r) in zip(labels, runs) if layer in (r.get("layers") or {})]
        blocks.append(Heading(2, f"Layer '{layer}'"))
        for metrics, what in ((PAIR_METRICS, "Pair similarities"), (GEOMETRY_METRICS, "Geometry")):
            table = _metric_table(in_layer, metrics, caption=f"{what}, layer '{layer}'.")
            if table is not None:
                blocks.append(table)
            if base_index is not None and layer in (runs[base_index][1].get("layers") or {}):
                base_values = _layer_values(runs[base_index][1], layer)
                diff = _metric_table(
                    _deltas(in_layer, base_values), metrics, caption=f"{what}, layer '{layer}': run − baseline ({base_label}).", delta=True
                )
                if diff is not None:
                    blocks.append(diff)
        seed_rows = [
            (g, _group_values(runs, g, lambda r, layer=layer: _layer_values(r, layer)))
            for g in groups
            if all(layer in (runs[i][1].get("layers") or {}) for i in g.members)
        ]
        seed_table = _seed_table(
            seed_rows,
            SEED_PAIR_COLUMNS,
            caption=(
                f"Over seeds, layer '{layer}': mean ± {SEED_STD_WORDS} of each run's statistic (a run's own std is "
                "the population std of its pair similarities)."
            ),
        )
        if seed_table is not None:
            blocks.append(seed_table)
        # one curve per seed group (its seeds' histograms summed), one per ungrouped run:
        # ten overlaid runs of two configs would hide the difference between the configs
        pooled_at: dict[int, tuple[SeedGroup, dict]] = {}
        for g in groups:
            pooled = _pooled_pairs(runs, g, layer)
            if pooled is not None:
                pooled_at[g.members[0]] = (g, pooled)
        skipped = {i for g, _ in pooled_at.values() for i in g.members[1:]}
        curves = []
        for i, (label, (_, r)) in enumerate(zip(labels, runs)):
            if i in pooled_at:
                g, pooled = pooled_at[i]
                curves.append((f"{g.label} ({len(g.members)} seeds pooled)", pooled))
            elif i not in skipped:
                curves.append((label, get(r, "layers", layer, "pairs", default={}) or {}))
        pooled_any = bool(pooled_at)
        overlay = figures.negative_overlay(curves, thresholds, layer)
        if overlay is not None:
            at_zero = all(abs(t or 0.0) < 0.01 for _, t in thresholds)
            blocks.append(
                Figure(
                    filename=f"negatives_{layer}.svg",
                    svg=overlay,
                    alt=f"Overlaid negative-similarity distributions of every run, layer {layer}",
                    caption=(
                        f"Negative-similarity densities (stored histograms), layer '{layer}', "
                        + (
                            "one curve per seed group (its seeds' histogram counts summed) and per ungrouped run. "
                            if pooled_any else "one curve per run. "
                        )
                        + f"Dashed threshold line(s): {threshold_words}"
                        + (
                            "; at this scale δ sits visually at 0."
                            if at_zero
                            else "; the excessive ratios count similarities strictly left of it."
                        )
                    ),
                )
            )
    probe_rows = []
    for label, (_, r) in zip(labels, runs):
        values = {c: _number(get(r.get("probes") or {}, *p)) for c, p, _ in PROBE_METRICS}
        for layer_name in (get(r, "probes", "retrieval", default={}) or {}):
            for k in (1, 5, 10):
                values[f"retrieval_{layer_name}_recall_at_{k}"] = _number(get(r, "probes", "retrieval", layer_name, f"recall_at_{k}"))
        probe_rows.append((label, values))
    retrieval_metrics = tuple(
        (f"retrieval_{layer}_recall_at_{k}", None, f"retrieval {layer} R@{k}") for layer in _layer_names(runs) for k in (1, 5, 10)
    )
    probe_table = _metric_table(probe_rows, PROBE_METRICS + retrieval_metrics, caption=_probe_caption(runs))
    if probe_table is not None:
        blocks += [Heading(2, "Probes"), probe_table]
        by_label = dict(probe_rows)
        seed_probe = _seed_table(
            [
                (g, {c: seed_statistics([by_label[labels[i]].get(c) for i in g.members]) for c in by_label[labels[g.members[0]]]})
                for g in groups
            ],
            [(c, t) for c, _, t in PROBE_METRICS + retrieval_metrics],
            caption=f"Probes over seeds: mean ± {SEED_STD_WORDS}; accuracies in %.",
        )
        if seed_probe is not None:
            blocks.append(seed_probe)
        if base_index is not None:
            diff = _metric_table(
                _deltas(probe_rows, probe_rows[base_index][1]),
                PROBE_METRICS + retrieval_metrics,
                caption=f"Probes: run − baseline ({base_label}); accuracies in percentage points.",
                delta=True,
            )
            if diff is not None:
                blocks.append(diff)
    blocks += _study_blocks(runs, labels, primary_layer(runs))
    return Document(title="cl-diag comparison: " + ", ".join(labels), blocks=blocks)
