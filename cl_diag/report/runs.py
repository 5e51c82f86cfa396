"""Which runs are replicates, how runs are called and in what order they are shown: the one
home of these rules for every report. A run is a result, the name the user gave it and its
training config, parsed once (:class:`Run`).

* **Labels** name what differs between the configs ("simclr b32 +VRN30"), not the paths: the
  loss, batch size, VRN and temperature, any other option that differs, the seed last; folder
  names when configs are empty or identical.
* **Replicates** (:func:`replicate_key`): configs equal but for the seed, measured alike (the
  same n_ref, statistics mode and layer); the findings' groups also leave out the option they
  vary.
* **Order**: loss, batch size, temperature, VRN weight, then the label's natural order, so a
  report does not depend on the order the runs were given in.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePath

from cl_diag.report.document import fmt
from cl_diag.result import Result
from cl_diag.runconfig import RunConfig

__all__ = [
    "LABEL_ORDER",
    "SEED_KEY",
    "Run",
    "SeedGroup",
    "config_labels",
    "group_label",
    "loss_layer",
    "natural_key",
    "ordered",
    "replicate_key",
    "run_labels",
    "seed_groups",
    "unique_labels",
]

#: the option that makes runs replicates of one config (the seed axis of a sweep)
SEED_KEY = "seed"
#: the folder name `cl-diag sweep` gives each run's analysis (left out of a folder label)
ANALYSIS_FOLDER = "analysis"
#: the options a label names first, in this order (the loss always)
LABEL_ORDER = ("loss", "batch_size", "vrn", "temperature")


@dataclass(frozen=True)
class Run:
    """One run of a report: ``name`` as the user gave it (folder or file, the label fallback),
    its ``result`` and its training ``config`` (parsed once from the result)."""

    name: str
    result: Result
    config: RunConfig

    @classmethod
    def of(cls, name: str, result: Result) -> Run:
        return cls(name, result, RunConfig.of(result))


def loss_layer(result: Result) -> str:
    """The layer a run's loss is computed on, which the theorems describe: the theory panel's
    ``loss_layer``, else projector, else embedding, else the first layer measured."""
    theory = result.theory
    preferred = [theory.loss_layer] if theory is not None and theory.loss_layer else []
    names = list(result.layers)
    return next((n for n in (*preferred, "projector", "embedding") if n in result.layers), names[0])


def replicate_key(
    config: RunConfig, *, n_ref: int, mode: str, layer: str, without: Sequence[str] = (SEED_KEY,)
) -> str:
    """The one rule of replicates: runs with equal keys are replicates of one configuration.
    Equal configs but for the options ``without`` (the seed; a finding comparing VRN weights,
    batch sizes or α leaves that option out too), measured against the same n_ref, in the same
    statistics mode and on the same loss layer."""
    return repr((config.without(without), n_ref, mode, layer))


def _key_of(run: Run, without: Sequence[str] = (SEED_KEY,)) -> str:
    result = run.result
    return replicate_key(
        run.config, n_ref=result.n_ref, mode=result.mode, layer=loss_layer(result), without=without
    )


# ---- labels ---------------------------------------------------------------------------------


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _part(key: str, value: object) -> str:
    """One option's part of a label ("b32", "+VRN30", "t0.1", "seed1", "epochs=5")."""
    if value is None:
        return ""
    if key == "loss":
        return str(value)
    # labels identify runs: more digits than the 4 a report prints for reading
    if key == "batch_size":
        return f"b{fmt(value, 6)}"
    if key == "vrn":
        if value is True:  # on, weight not recorded (cl_diag.runconfig)
            return "+VRN"
        weight = _number(value)
        return f"+VRN{weight:g}" if weight is not None and weight > 0 else ""
    if key == "temperature":
        return f"t{fmt(value, 6)}"
    if key == SEED_KEY:
        return f"seed{fmt(value, 6)}"
    if key.startswith("vrn_tuning."):  # how λ was chosen: one word, beside "+VRN3"
        return "tuned" if key == "vrn_tuning.selected" else ""
    return f"{key}={fmt(value, 6)}"


def folder_names(names: Sequence[str]) -> list[str]:
    """Shortest unique trailing path parts of each run's name ("a/analysis", "b/analysis")."""
    parts = [PurePath(n).parts or (n,) for n in names]
    depth = [1] * len(names)
    while True:
        shown = ["/".join(p[-d:]) for p, d in zip(parts, depth, strict=True)]
        counts = Counter(shown)
        grown = False
        for i, label in enumerate(shown):
            if counts[label] > 1 and depth[i] < len(parts[i]):
                depth[i] += 1
                grown = True
        if not grown:
            break
    seen: Counter = Counter()
    out = []
    for label in shown:
        seen[label] += 1
        out.append(label if counts[label] == 1 else f"{label} #{seen[label]}")
    return out


def config_labels(configs: Sequence[RunConfig], *, exclude: Sequence[str] = ()) -> list[str]:
    """Labels from the options that differ between the runs (the loss name always leads),
    leaving out the options ``exclude`` (a group's label leaves out what its members vary)."""
    keys: list[str] = []
    for config in configs:
        keys += [k for k in config.options if k not in keys]
    differing = [k for k in keys if len({repr(c.option(k)) for c in configs}) > 1]
    ordered_keys = [k for k in LABEL_ORDER if k in differing or k == "loss"]
    ordered_keys += sorted(k for k in differing if k not in LABEL_ORDER and k != SEED_KEY)
    ordered_keys += [SEED_KEY] if SEED_KEY in differing else []
    out = []
    for config in configs:
        parts = [_part(k, config.option(k)) for k in ordered_keys if k not in exclude]
        out.append(" ".join(p for p in parts if p))
    return out


def _deduplicated(labels: Sequence[str], folders: Sequence[str]) -> list[str]:
    """``labels`` made unique: a repeated label gets its run's folder in brackets, and what is
    still repeated (a folder named like another run's label) a number."""
    counts = Counter(labels)
    shown = [
        label if counts[label] == 1 else f"{label} [{folder}]" if label != folder else folder
        for label, folder in zip(labels, folders, strict=True)
    ]
    again = Counter(shown)
    seen: Counter = Counter()
    out = []
    for label in shown:
        seen[label] += 1
        out.append(label if again[label] == 1 else f"{label} #{seen[label]}")
    return out


def _without_analysis(name: str) -> str:
    parts = PurePath(name).parts
    return "/".join(parts[:-1]) if len(parts) > 1 and parts[-1] == ANALYSIS_FOLDER else name


def unique_labels(
    names: Sequence[str], configs: Sequence[RunConfig], given: Sequence[str | None] = ()
) -> list[str]:
    """One unique, human label per run. A label the user ``given`` (``--label DIR=NAME``; None
    where none was) is used as it is; a run with a training config is called by the options
    that differ between the runs that have one (:func:`config_labels`), a run without one (an
    embeddings file, a foreign checkpoint) by its folder or file name. Labels repeated all the
    same get the run's folder added; when the configs tell no run apart, every run is called
    by its folder."""
    fixed = list(given) + [None] * (len(names) - len(given))
    folders = folder_names(names)
    has_config = [bool(c.options) for c in configs]
    # a run without a config is called by the folder it was analysed from: "runs/clip" for
    # "runs/clip/analysis" (the folder `cl-diag sweep` and the README's commands write)
    bare = folder_names([_without_analysis(n) for n in names])
    # options differ only between runs that record them: a run without a config would make
    # every option of the others "differ" (the whole config as a label)
    by_config = iter(config_labels([c for c, has in zip(configs, has_config, strict=True) if has]))
    labels = [
        next(by_config) if has else plain for has, plain in zip(has_config, bare, strict=True)
    ]
    config_runs = [label for label, has in zip(labels, has_config, strict=True) if has]
    if len(config_runs) > 1 and len(set(config_runs)) == 1:
        labels = list(folders)  # the configs tell no run apart
    labels = [label or folder for label, folder in zip(labels, folders, strict=True)]
    labels = [f if f is not None else label for f, label in zip(fixed, labels, strict=True)]
    return _deduplicated(labels, bare)


def group_label(
    configs: Sequence[RunConfig], labels: Sequence[str], exclude: Sequence[str]
) -> list[str]:
    """The name of each run's group when the options ``exclude`` are left out (a finding's
    group): the options that still differ between the runs with a config, or the run's own
    label for a run without one."""
    has_config = [bool(c.options) for c in configs]
    named = iter(
        config_labels(
            [c for c, has in zip(configs, has_config, strict=True) if has], exclude=exclude
        )
    )
    return [
        (next(named) or label) if has else label
        for has, label in zip(has_config, labels, strict=True)
    ]


def run_labels(runs: Sequence[tuple[str, Result]]) -> list[str]:
    """One unique, human label per ``(name, result)``: config differences, else folder names."""
    typed = [Run.of(name, result) for name, result in runs]
    return unique_labels([r.name for r in typed], [r.config for r in typed])


# ---- order ----------------------------------------------------------------------------------


def natural_key(label: str) -> list:
    """ "b32" before "b128": digit runs compare as numbers."""
    return [
        (0, float(tok), "") if tok[:1].isdigit() else (1, 0.0, tok)
        for tok in re.findall(r"\d+(?:\.\d+)?|\D+", label)
    ]


def ordered(runs: Sequence[tuple[str, Result]]) -> list[tuple[str, Result]]:
    """Runs in display order: loss, batch size, temperature, VRN weight (an unrecorded weight
    after the numbers), then the label's natural order (digit runs as numbers); input order
    breaks ties."""
    typed = [Run.of(name, result) for name, result in runs]
    shown = unique_labels([r.name for r in typed], [r.config for r in typed])

    def num(value: object) -> tuple[int, float]:
        number = _number(value)
        return (0, number) if number is not None else (1, 0.0)

    def key(i: int) -> tuple:
        config = typed[i].config
        # grouped like the paper's tables: by batch size, then temperature, without VRN first
        return (
            config.loss or "",
            num(config.batch_size),
            num(config.temperature),
            num(config.vrn.weight),
            natural_key(shown[i]),
        )

    return [runs[i] for i in sorted(range(len(runs)), key=key)]


# ---- replicates -----------------------------------------------------------------------------


@dataclass(frozen=True)
class SeedGroup:
    """Runs (indices into the ordered runs) that are replicates of one configuration
    (:func:`replicate_key`), at distinct seeds."""

    label: str
    members: tuple[int, ...]
    seeds: tuple[object, ...]

    @property
    def seeds_text(self) -> str:
        """ "1–5" for a run of consecutive integer seeds, else the seeds comma-separated."""
        ints = [s for s in self.seeds if isinstance(s, int) and not isinstance(s, bool)]
        if len(ints) == len(self.seeds) > 2 and sorted(ints) == list(
            range(min(ints), max(ints) + 1)
        ):
            return f"{min(ints)}–{max(ints)}"
        return ", ".join(fmt(s) for s in self.seeds)


def groups_of(runs: Sequence[Run]) -> list[SeedGroup]:
    """The seed groups of ``runs`` (in display order): groups in the order of their first run,
    members in display order; a group with a repeated seed is not a seed group."""
    members: dict[str, list[int]] = {}
    for i, run in enumerate(runs):
        if run.config.option(SEED_KEY) is not None:
            members.setdefault(_key_of(run), []).append(i)
    named = config_labels([r.config for r in runs], exclude=(SEED_KEY,))
    groups = []
    for idx in members.values():
        seeds = [runs[i].config.option(SEED_KEY) for i in idx]
        if len(idx) < 2 or len({repr(s) for s in seeds}) < len(seeds):
            continue
        groups.append(
            SeedGroup(label=named[idx[0]] or "runs", members=tuple(idx), seeds=tuple(seeds))
        )
    counts = Counter(g.label for g in groups)
    if any(c > 1 for c in counts.values()):
        # same config label but measured differently (n_ref, mode or layer): say which
        def where(g: SeedGroup) -> str:
            first = runs[g.members[0]].result
            return f"{g.label} (n_ref = {fmt(first.n_ref)}, {first.mode})"

        groups = [
            SeedGroup(where(g) if counts[g.label] > 1 else g.label, g.members, g.seeds)
            for g in groups
        ]
    return groups


def seed_groups(runs: Sequence[tuple[str, Result]]) -> list[SeedGroup]:
    """Groups of >= 2 replicates (:func:`replicate_key`) of ``(name, result)`` runs, given
    in display order (:func:`ordered`)."""
    return groups_of([Run.of(name, result) for name, result in runs])
