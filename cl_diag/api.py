"""The Python API: cl-diag's view from a notebook or a training script.

::

    import cl_diag

    res = cl_diag.measure(z1, z2, labels=None, n_ref=50_000)   # torch or numpy, (n, d) each
    res.layers["embedding"].pairs["cross_view_negative"].excessive_ratio
    res.to_frame()                    # one tidy pandas row per layer x pair type x statistic
    res.save("out/")                  # result.json, report.md, report.html, figures: as the CLI
    cl_diag.load("out/result.json")   # -> the same typed object, schema-checked
    cl_diag.compare([res, "b/result.json"], out="cmp/")   # results and paths, mixed

The commands are thin wrappers over the same functions (``cl-diag analyze`` of an embeddings
file and :func:`measure` both call
:func:`cl_diag.orchestration.analyze.measure_embeddings`), and a mistake in the input raises
:class:`cl_diag.errors.UserError` with the message the CLI prints.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from cl_diag.errors import UserError
from cl_diag.io.paths import path_argument
from cl_diag.result import Result, load

if TYPE_CHECKING:
    from cl_diag.orchestration.analyze import AnalyzeResult
    from cl_diag.orchestration.compare import CompareResult
    from cl_diag.orchestration.theory import TheoryOutcome

__all__ = ["Result", "compare", "load", "measure", "theory"]


def measure(
    z1: object,
    z2: object = None,
    labels: object = None,
    n_ref: int | None = None,
    *,
    keys: str | Sequence[str] | None = None,
    cross_modal: bool | None = None,
    probes: str | Sequence[str] = "all",
    **pair_options: object,
) -> Result:
    """Measure two views' embeddings: the result ``cl-diag analyze`` gives for them in a file.

    ``z1``, ``z2``: torch tensors or numpy arrays of shape (n, d), row i of each the two views of
    instance i (rounded to float32 as a file's are; a tensor is measured on its device). Or
    ``z1`` a dict of arrays (``dict(np.load("clip.npz"))``) and ``z2`` omitted: ``keys`` names
    its two views (``("image_embeds", "text_embeds")``; default ``z1``, ``z2``) and its
    ``labels`` array gives the labels. ``cross_modal``: the views come from two encoders, so the
    modality gap is measured (default: when ``keys`` is given). ``probes``: as ``--probes``; an
    embeddings file gets retrieval (exact pairs only). ``labels``: n class labels (the by-class
    split of the negatives). ``n_ref`` and the other keywords are ``cl-diag analyze``'s pair
    options, with its defaults (:data:`~cl_diag.orchestration.analysis_config.MEASURE`:
    ``pairs``, ``num_pairs``, ``seed``, ``block_size``, ``hist_bins``).

    The result holds the layer ``"embedding"``: each pair type's statistics (Lee et al., ICML
    2025) with the excessive ratio of the negatives, and the layer's geometry; its ``source`` is
    ``{"kind": "arrays", "sha256": ...}`` (:func:`cl_diag.io.embeddings.embeddings_from_arrays`).
    """
    from cl_diag.io.embeddings import embeddings_from_arrays, missing_keys_message
    from cl_diag.options import DEFAULT_KEYS, LABELS_KEY, PROBES, PYTHON, split_keys
    from cl_diag.orchestration.analysis_config import MEASURE, option_names
    from cl_diag.orchestration.analyze import (
        PairOptions,
        embeddings_views,
        measure_embeddings,
    )
    from cl_diag.result import Source

    _unknown_keyword(pair_options, MEASURE.names, "cl_diag.measure")
    options, n_ref = PairOptions.checked(n_ref, spelling=PYTHON, **pair_options)
    named = split_keys(keys, PYTHON)
    two_encoders = cross_modal if cross_modal is not None else named is not None
    if not isinstance(two_encoders, bool):
        raise UserError(f"cross_modal={cross_modal!r} must be True, False or None.")
    chosen = option_names(probes, PROBES, "probes", spelling=PYTHON)
    where = "the arrays given to cl_diag.measure"
    if isinstance(z1, Mapping):
        if z2 is not None:
            raise UserError(
                "cl_diag.measure got a dict of arrays and z2 as well; with a dict, name its two "
                "views with keys=('A', 'B') and drop z2."
            )
        first, second = named if named is not None else DEFAULT_KEYS
        missing = [k for k in (first, second) if k not in z1]
        if missing:
            fix = "Name two of them with keys=('A', 'B'), view 1 first."
            raise UserError(
                missing_keys_message(
                    "the dict given to cl_diag.measure", missing, sorted(map(str, z1)), fix
                )
            )
        arrays: Mapping = z1
        if labels is None:
            labels = arrays.get(LABELS_KEY)
        where = f"the arrays {first!r} and {second!r} given to cl_diag.measure"
        z1, z2 = arrays[first], arrays[second]
    elif named is not None:
        raise UserError(
            "keys= names two arrays of a dict: pass the dict as the first argument "
            "(cl_diag.measure(arrays, keys=...)), or pass z1 and z2 without keys."
        )
    elif z2 is None:
        raise UserError(
            "cl_diag.measure takes two views, z1 and z2 (or a dict of arrays with keys=)."
        )
    embeddings = embeddings_from_arrays(z1, z2, labels, where=where)
    source = Source(
        kind="arrays", sha256=embeddings.sha256, views=embeddings_views(named, two_encoders)
    )
    return measure_embeddings(
        embeddings,
        n_ref=n_ref,
        options=options,
        source=source,
        probes=chosen,
        cross_modal=two_encoders,
    )


def compare(
    runs: Iterable[str | os.PathLike[str] | Result | AnalyzeResult],
    *,
    out: str | os.PathLike[str] | None = None,
    baseline: str | os.PathLike[str] | Result | AnalyzeResult | None = None,
    overwrite: bool = False,
    labels: Sequence[str] | Mapping[int | str | os.PathLike[str], str] | None = None,
) -> CompareResult:
    """Compare analysed runs, as ``cl-diag compare``: into the folder ``out`` (report.md,
    report.html, comparison.csv and figures), or without ``out`` in memory only (the
    returned ``.frame``, ``.labels``, ``.warnings`` and headline; nothing written).

    ``runs``: a list whose items are results (what :func:`measure`, :func:`load` and
    ``cl_diag.analyze`` return) or paths (``str`` or :class:`~pathlib.Path`) of result.json
    files or of the folders holding one, mixed freely; a result in memory is labelled
    ``runs[i]`` by its place when its config does not tell it apart, what ``cl_diag.analyze``
    returned by the folder it wrote. ``baseline``: the run the others are differenced against
    (a result or a path). ``overwrite``: as ``--overwrite``. ``labels``: the runs' names in
    the report, as ``--label``: a list (one name per run, in order) or a mapping from a run
    (its place ``i``, ``"runs[i]"``, or its path as given) to its name.
    Returns what was written:
    ``.frame`` (one pandas row per run), ``.labels``, ``.warnings``, ``.files``; its repr is
    the runs' headline numbers."""
    from cl_diag.orchestration.analyze import AnalyzeResult
    from cl_diag.orchestration.compare import CompareConfig
    from cl_diag.orchestration.compare import compare as run_compare

    one_run = isinstance(runs, (str, os.PathLike, Result, AnalyzeResult))
    try:
        items = None if one_run else list(runs)
    except TypeError:  # not iterable
        items = None
    if items is None:
        one = f"[{str(runs)!r}, ...]" if isinstance(runs, (str, os.PathLike)) else "[res, res2]"
        raise UserError(
            f"compare takes a list of runs, not a {type(runs).__name__}: compare({one}, "
            "out=...), each a result or the path of a result.json or analysis folder."
        )
    inputs = [_run(item, f"runs[{i}]") for i, item in enumerate(items)]
    return run_compare(
        CompareConfig(
            inputs=inputs,
            out=None if out is None else path_argument(out, "out"),
            baseline=None if baseline is None else _run(baseline, "baseline"),
            overwrite=overwrite,
            labels=_labels(labels, inputs),
        )
    )


def _labels(labels: object, inputs: Sequence[object]) -> dict[str, str]:
    """``compare``'s ``labels`` as ``--label`` takes them (a run as given -> its name): from
    a list, one name per run in order; from a mapping, a run by its place (``0`` or
    ``"runs[0]"``) or its path. Anything else is a UserError saying what is accepted."""
    if labels is None:
        return {}

    def given(i: int) -> str:  # how compare names run i: its path as given, or runs[i]
        item = inputs[i]
        return os.fspath(item) if isinstance(item, Path) else f"runs[{i}]"

    accepted = (
        "give labels as a list of names, one per run (['base', 'vrn']), or a dict from a run's "
        "place or path to its name ({0: 'base'} or {'runs/a': 'base'})"
    )
    if isinstance(labels, (list, tuple)):
        if len(labels) != len(inputs) or not all(isinstance(n, str) for n in labels):
            raise UserError(
                f"compare: labels holds {len(labels)} item(s) for {len(inputs)} run(s); {accepted}."
            )
        return {given(i): name for i, name in enumerate(labels)}
    if not isinstance(labels, Mapping):
        raise UserError(f"compare: labels is of type {type(labels).__name__}; {accepted}.")
    out: dict[str, str] = {}
    for key, name in labels.items():
        if not isinstance(name, str):
            raise UserError(f"compare: labels[{key!r}] = {name!r} is not a name; {accepted}.")
        if isinstance(key, int) and not isinstance(key, bool):
            if not 0 <= key < len(inputs):
                raise UserError(
                    f"compare: labels names run {key}, but there are {len(inputs)} runs "
                    f"(0 to {len(inputs) - 1}); {accepted}."
                )
            out[given(key)] = name
        elif isinstance(key, (str, os.PathLike)):
            out[os.fspath(key)] = name
        else:
            raise UserError(f"compare: labels has the key {key!r}; {accepted}.")
    return out


def _run(item: object, where: str) -> Path | Result:
    """One run given to :func:`compare`: a result as it is, a path as a :class:`Path`, what
    ``cl_diag.analyze`` returned as the folder it wrote; anything else a :class:`UserError`
    naming ``where`` it was, its type and what is accepted."""
    from cl_diag.orchestration.analyze import AnalyzeResult

    if isinstance(item, Result):
        return item
    if isinstance(item, AnalyzeResult):
        # the folder it wrote: its report is linked, and naming it twice is one run
        return Path(item.out) if item.is_main else item.result
    if isinstance(item, (str, os.PathLike)):
        return Path(item)
    raise UserError(
        f"compare: {where} is of type {type(item).__name__}, not a run. Give a cl_diag Result "
        "(what cl_diag.measure, cl_diag.load or cl_diag.analyze return) or the path (str or "
        "pathlib.Path) of a result.json or of the analysis folder holding one."
    )


def theory(source: str | os.PathLike[str] | None = None, **settings: object) -> TheoryOutcome:
    """What the sources predict for a setting before training, as ``cl-diag theory``: each
    result that applies, its condition and whether it holds at these sizes, advice, and with
    ``out`` the phase diagrams (SVG and PNG) written there.

    ``source``: a result.json (or analysis folder), a cl-diag checkpoint or a training recipe
    whose setting to read; the keywords (the options of ``cl-diag theory``, declared in
    :class:`~cl_diag.orchestration.theory_config.TheoryConfig`: ``loss``, ``temperature``,
    ``bias``, ``alpha``, ``within_view``, ``vrn``, ``n``, ``batch_size``, ``d``, ``classes``,
    ``per_class``, ``views``, ``out``) go over it (``temperature`` is the sigmoid loss's t,
    ``bias`` its b; ``classes`` x ``per_class`` a supcl balanced batch). Returns ``.advice``
    (``.items``: source, prediction, condition, holds, certainty, advice, numbers),
    ``.files`` and ``.to_json()``; a mistake is a :class:`UserError`.

    >>> import cl_diag
    >>> found = cl_diag.theory(loss="sigmoid", temperature=1.0, bias=-1.0, n=4, d=4)
    >>> found.advice.items[0].numbers["ccem"]["regime"]
    'antipodal'
    """
    from cl_diag.options import PYTHON, check_values
    from cl_diag.orchestration.theory import theory as run_theory
    from cl_diag.orchestration.theory_config import THEORY, TheoryConfig

    keywords = [name for name in THEORY.names if name != "source"]  # source is positional
    _unknown_keyword(settings, keywords, "cl_diag.theory")
    values = check_values(
        {"source": None if source is None else str(source), **settings}, THEORY, spelling=PYTHON
    )
    if values.get("out") is not None:
        values["out"] = path_argument(values["out"], "out")
    return run_theory(TheoryConfig(**values))


def _unknown_keyword(given: Mapping[str, object], declared: Iterable[str], function: str) -> None:
    """A :class:`UserError` for the first keyword of ``given`` that ``function`` does not
    declare (what Python's own TypeError says for a signature written out)."""
    names = tuple(declared)
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise UserError(
            f"{function} got an unknown keyword {unknown[0]!r}; its options are: "
            f"{', '.join(names)}."
        )
