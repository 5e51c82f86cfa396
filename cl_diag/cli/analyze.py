"""``cl-diag analyze``: pair-similarity diagnostics, probes and theory for embeddings or a trained
encoder.

The command line of :mod:`cl_diag.orchestration.analyze` (one concept at two layers: options,
recipes and printing here; the analysis there)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console

from cl_diag.cli import app
from cl_diag.errors import UserError
from cl_diag.orchestration.analysis_config import (
    PROBES,
    AnalyzeConfig,
    check_analysis,
    option_names,
)
from cl_diag.vocabulary import LAYERS, PairType

if TYPE_CHECKING:  # the result model is imported only by a command that prints a result
    from cl_diag.result import Probes, Result

_D = AnalyzeConfig(input=Path("."), out=Path("."))  # one source of truth for the defaults
_PAIRS, _CKPT, _FOREIGN, _RUN = "Pairs", "Checkpoints", "Foreign checkpoints", "Running"
_EMB = "Embeddings files"


def default_out(source: Path) -> Path:
    return source.parent / f"{source.stem}-analysis"


def _names(
    value: str, allowed: tuple[str, ...], option: str, *, none: bool = True
) -> tuple[str, ...]:
    """``all``, a comma-separated subset of ``allowed``, or (``none=True``) ``none``: the
    words :func:`cl_diag.orchestration.analysis_config.option_names` reads for the CLI and
    Python."""
    return option_names(value, allowed, option.removeprefix("--"), none=none)


def renamed_batch_size(value: int) -> UserError:
    """What ``analyze --batch-size`` (or a probe suite's ``batch-size``) gets: the option was
    renamed, so that ``--batch-size`` means the training batch in every command."""
    return UserError(
        f"analyze's encoding batch is --encode-batch-size (images per encoding batch; "
        f"--batch-size is train's training batch): give --encode-batch-size {value} instead "
        f"(in a probe suite, encode-batch-size = {value})."
    )


@app.command(no_args_is_help=True)
def analyze(
    ctx: typer.Context,
    source: Path = typer.Argument(
        ...,
        help="An embeddings file (.npz/.pt with z1, z2[, labels]), a cl-diag checkpoint "
        "(last.pt), a solo-learn, lightly, MoCo or DINO checkpoint, or a torchvision ResNet or "
        "timm state dict (with --arch); any other file with --backbone-prefix.",
    ),
    probe: str | None = typer.Option(
        None,
        help="A probe suite: TOML whose keys are the options below, a path (e.g. "
        "probes/paper.toml) or a bundled name (e.g. quick: see cl-diag recipes); options given "
        "here win.",
    ),
    out: Path | None = typer.Option(
        None, "--out", "-o", help="Output folder \\[default: <source>-analysis]."
    ),
    n_ref: int | None = typer.Option(
        None,
        help="Training-set size n of the threshold -1/(n-1) \\[default: the checkpoint's "
        "training-set size; for an embeddings file, its number of rows].",
        rich_help_panel=_PAIRS,
    ),
    pairs: str = typer.Option(
        _D.pairs,
        help="'exact' (all pairs, streamed), 'sampled' (--num-pairs per type) or 'moments' "
        "(exact means and variances over all pairs in O(n d^2), the rest from --num-pairs "
        "sampled pairs per type: for n in the millions).",
        rich_help_panel=_PAIRS,
    ),
    num_pairs: int = typer.Option(
        _D.num_pairs,
        help="Pairs drawn per type in sampled and moments modes (the paper uses 5,000).",
        rich_help_panel=_PAIRS,
    ),
    seed: int = typer.Option(
        _D.seed,
        help="Seed of the sampled images, their augmentations, sampled pairs and probes.",
        rich_help_panel=_PAIRS,
    ),
    block_size: int | None = typer.Option(
        None,
        help="Rows per streamed block \\[default: from a memory budget].",
        rich_help_panel=_PAIRS,
    ),
    hist_bins: int = typer.Option(
        _D.hist_bins, help="Bins of the stored histogram on [-1, 1].", rich_help_panel=_PAIRS
    ),
    keys: str | None = typer.Option(
        None,
        help="Embeddings files: the two arrays that are the views, view 1 first, e.g. "
        "image_embeds,text_embeds \\[default: z1,z2]. Naming them also measures the modality "
        "gap (see --cross-modal).",
        rich_help_panel=_EMB,
    ),
    cross_modal: bool | None = typer.Option(
        None,
        "--cross-modal/--no-cross-modal",
        help="Embeddings files: the two views come from two encoders (image and text...): "
        "measure the modality gap between their centroids and what removing it does to the "
        "cross-view statistics \\[default: on with --keys, else off].",
        rich_help_panel=_EMB,
    ),
    num_images: int = typer.Option(
        _D.num_images,
        help="Training images sampled (seeded) and augmented twice to make the two views.",
        rich_help_panel=_CKPT,
    ),
    views: int = typer.Option(
        _D.views,
        help="Augmented views per image (V >= 2; exact pairs): positives and cross-view negatives "
        "over every view pair, within-view negatives in every view. V = 2 is the default result.",
        rich_help_panel=_CKPT,
    ),
    layers: str = typer.Option(
        ",".join(_D.layers),
        help=f"Layers measured: comma-separated subset of {', '.join(LAYERS)}, or all.",
        rich_help_panel=_CKPT,
    ),
    probes: str = typer.Option(
        "all",
        help=f"Probes: all, none, or a comma-separated subset of {', '.join(PROBES)}. An "
        "embeddings file gets retrieval (both directions, --pairs exact); the others need a "
        "dataset's labelled splits.",
        rich_help_panel=_CKPT,
    ),
    baselines: bool = typer.Option(
        _D.baselines,
        help="Also run the probes on raw pixels and on the architecture at random initialisation.",
        rich_help_panel=_CKPT,
    ),
    probe_train_images: int | None = typer.Option(
        None,
        help="Probe on this many (seeded) images of the train split \\[default: all].",
        rich_help_panel=_CKPT,
    ),
    probe_test_images: int | None = typer.Option(
        None,
        help="Probe on this many (seeded) images of the test split \\[default: all].",
        rich_help_panel=_CKPT,
    ),
    validation_fraction: float | None = typer.Option(
        None,
        help="Hold out this share of the probes' train split (seeded by --seed, stratified by "
        "class) as a validation split: the linear probe is also fitted on the rest and scored "
        "on it, the accuracy to choose a training option on (e.g. a VRN weight) without the "
        "test split. The test-split probes are unchanged \\[default: no validation split].",
        rich_help_panel=_CKPT,
    ),
    data_root: Path | None = typer.Option(
        None,
        help="Folder holding cifar-10-batches-py/ or cifar-100-python/, or the ImageFolder train "
        "root [default for cl-diag checkpoints: the one they were trained with].",
        rich_help_panel=_CKPT,
    ),
    val_root: Path | None = typer.Option(
        None, help="ImageFolder root of the test split (imagefolder only).", rich_help_panel=_CKPT
    ),
    image_size: int | None = typer.Option(
        None,
        help="Side in pixels of the images encoded \\[default: the training size the checkpoint "
        "records (a cl-diag config, solo-learn's crop_size, a Lightning checkpoint's "
        "hyper_parameters); else the dataset's own: 32 for CIFAR, 8 for digits; an image folder "
        "with no record: 224, a guess, with a warning]. A side other than the recorded one is "
        "measured with a warning. Digits are resized to it (and repeated to 3 channels for a "
        "foreign model).",
        rich_help_panel=_CKPT,
    ),
    arch: str | None = typer.Option(
        None,
        help="Backbone of a foreign checkpoint: resnet18-cifar, resnet18, resnet34-cifar, "
        "resnet34, resnet50-cifar, resnet50, or timm:NAME (any timm model, built with "
        "pretrained=False) \\[default: from args.json beside a solo-learn .ckpt, MoCo's 'arch', "
        "DINO's 'args'].",
        rich_help_panel=_FOREIGN,
    ),
    dataset: str | None = typer.Option(
        None,
        help="Dataset of a foreign checkpoint: digits (the embedded 8x8 digits: no download), "
        "cifar10, cifar100 or imagefolder \\[default: from args.json].",
        rich_help_panel=_FOREIGN,
    ),
    cifar_stem_padding: int | None = typer.Option(
        None,
        help="Padding of the 3x3 CIFAR stem (not stored in the weights) \\[default: 2 for upstream "
        "solo-learn, 1 for the paper's fork (BN in the projector or add_vrn_loss_term in "
        "args.json) and plain state dicts].",
        rich_help_panel=_FOREIGN,
    ),
    encoder: str | None = typer.Option(
        None,
        help="Which encoder of a two-encoder checkpoint: MoCo query or key \\[default: query], "
        "DINO teacher or student \\[default: teacher].",
        rich_help_panel=_FOREIGN,
    ),
    backbone_prefix: str | None = typer.Option(
        None,
        help="Read any file: the keys under this prefix are the backbone (prefix removed; '' "
        "for every key outside --projector-prefix). The error for an unknown layout lists the "
        "file's prefixes.",
        rich_help_panel=_FOREIGN,
    ),
    projector_prefix: str | None = typer.Option(
        None,
        help="With --backbone-prefix: the keys under this prefix are the projector "
        "(an nn.Sequential of Linear, BatchNorm1d and activations).",
        rich_help_panel=_FOREIGN,
    ),
    rename: list[str] | None = typer.Option(
        None,
        "--rename",
        help="'REGEX=REPLACEMENT' applied to every key (re.sub, split at the last '='), before "
        "the layout is recognised and the strict key check; repeatable, applied in order. "
        "E.g. --rename '^module\\.encoder\\.=backbone.'",
        rich_help_panel=_FOREIGN,
    ),
    device: str = typer.Option(
        _D.device, help="auto (CUDA when present), cpu or cuda.", rich_help_panel=_RUN
    ),
    encode_batch_size: int = typer.Option(
        _D.encode_batch_size,
        help="Images per encoding batch (of the views and of the probes' splits).",
        rich_help_panel=_RUN,
    ),
    batch_size: int | None = typer.Option(
        None, "--batch-size", hidden=True, help="Renamed --encode-batch-size."
    ),
    workers: int | None = typer.Option(
        None,
        help="DataLoader worker processes \\[default: 0 on CPU, up to 8 on CUDA].",
        rich_help_panel=_RUN,
    ),
    amp: bool = typer.Option(
        _D.amp, help="fp16 autocast and channels_last while encoding on CUDA.", rich_help_panel=_RUN
    ),
    overwrite: bool = typer.Option(
        _D.overwrite,
        help="Replace files in --out that cl-diag did not write (or that changed since): "
        "without it such files stop the command.",
        rich_help_panel=_RUN,
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print only the report path."),
) -> None:
    """Measure positive, cross-view and within-view negative similarities; probes and theory for checkpoints.

    Examples:

      cl-diag analyze pairs.npz --out out/ --n-ref 50000

      cl-diag analyze clip.npz --keys image_embeds,text_embeds --out clip-analysis/

      cl-diag analyze runs/simclr-b32/last.pt --out runs/simclr-b32/analysis

      cl-diag analyze solo/simclr-ep=199.ckpt --dataset cifar100 --data-root ~/data --out a/

      cl-diag analyze resnet18.pth --arch resnet18-cifar --dataset cifar10 --data-root ~/data --out b/

      cl-diag analyze moco_0199.pth.tar --encoder key --dataset imagefolder --data-root ~/in

      cl-diag analyze dino.pth --arch timm:vit_small_patch16_224 --dataset imagefolder ...

      cl-diag analyze x.pt --arch resnet18 --backbone-prefix net.enc. --dataset cifar10 ...

      cl-diag analyze timm.pth --arch timm:resnet18 --dataset digits --image-size 32

      cl-diag analyze last.pt --probe probes/paper.toml

      cl-diag analyze last.pt --probe quick

      torchrun --nproc-per-node 2 -m cl_diag analyze big.npz --out out/   (same bytes, K ranks)
    """  # noqa: E501 (typer's help shows a command docstring's lines as written)
    # here, not at the top: what runs a command is imported by that command alone, so that
    # help and argument errors stay instant (tests/test_cli_startup.py)
    from cl_diag.recipes import apply_recipe

    values, _ = apply_recipe(ctx, probe)
    if values["batch_size"] is not None:
        raise renamed_batch_size(values["batch_size"])
    config = AnalyzeConfig(
        input=source,
        out=values["out"] if values["out"] is not None else default_out(source),
        n_ref=values["n_ref"],
        pairs=values["pairs"],
        num_pairs=values["num_pairs"],
        seed=values["seed"],
        block_size=values["block_size"],
        hist_bins=values["hist_bins"],
        keys=values["keys"],
        cross_modal=values["cross_modal"],
        num_images=values["num_images"],
        views=values["views"],
        layers=_names(values["layers"], LAYERS, "--layers", none=False),
        probes=_names(values["probes"], PROBES, "--probes"),
        baselines=values["baselines"],
        probe_train_images=values["probe_train_images"],
        probe_test_images=values["probe_test_images"],
        validation_fraction=values["validation_fraction"],
        arch=values["arch"],
        dataset=values["dataset"],
        data_root=values["data_root"],
        val_root=values["val_root"],
        image_size=values["image_size"],
        cifar_stem_padding=values["cifar_stem_padding"],
        encoder=values["encoder"],
        backbone_prefix=values["backbone_prefix"],
        projector_prefix=values["projector_prefix"],
        renames=tuple(values["rename"] or ()),
        device=values["device"],
        encode_batch_size=values["encode_batch_size"],
        workers=values["workers"],
        amp=values["amp"],
        overwrite=values["overwrite"],
    )
    quiet = values["quiet"]
    config = check_analysis(config)  # a value out of bounds is refused before torch loads
    console = Console()
    from cl_diag.cli import shown_warnings
    from cl_diag.cli.progress import counter, plain_counter, progress_bar, use_bar
    from cl_diag.orchestration.analyze import analyze as run_analyze

    try:
        with shown_warnings():
            if use_bar(quiet):
                with progress_bar(console, transient=True) as bar:
                    outcome = run_analyze(config, progress=counter(bar))
            else:  # a pipe or a log: plain lines on stderr (none with --quiet)
                outcome = run_analyze(config, progress=None if quiet else plain_counter())
    except KeyboardInterrupt:
        from cl_diag.cli import report_interrupt

        report_interrupt(f"nothing in {config.out} was changed; run the command again.")
        raise
    if not outcome.is_main:  # a rank > 0 under torchrun: rank 0 reports (and writes)
        return
    if not quiet:
        _print_summary(console, outcome.result)
    console.print(f"report: {outcome.out / 'report.html'}", highlight=False)


def _print_summary(console: Console, result: Result) -> None:
    from rich.table import Table

    from cl_diag.measurement.pairs import EXCESS_MARGIN  # late: torch, after the work is done

    for name, layer in result.layers.items():
        table = Table(title=f"{name}: n={layer.n}, d={layer.d}, threshold={result.delta:.6g}")
        columns = ("pair type", "count", "mean", "var", "min", "max", "excessive ratio")
        for column in (*columns, f"below δ − {EXCESS_MARGIN:g}"):
            table.add_column(column, justify="right" if column != "pair type" else "left")
        for pair_type, stats in layer.pairs.items():
            ratio, beyond = stats.excessive_ratio, stats.excessive_margin_ratio
            table.add_row(
                pair_type,
                str(stats.count),
                f"{stats.mean:.4f}",
                f"{stats.var:.4f}",
                f"{stats.min:.4f}",
                f"{stats.max:.4f}",
                "" if ratio is None else f"{ratio:.4f}",
                "" if beyond is None else f"{beyond:.4f}",
            )
        console.print(table)
        collapse = layer.collapse
        if collapse is not None and collapse.within_class_variance is not None:
            console.print(
                f"{name}: {collapse.classes} classes, within-class variance "
                f"{collapse.within_class_variance:.4f}, s_w {_num(collapse.s_w)}, "
                f"s_b {_num(collapse.s_b)}"
                + (f", collapsed (< {collapse.epsilon:g})" if collapse.collapsed else ""),
                highlight=False,
            )
        within = layer.pairs.get(PairType.WITHIN_VIEW_NEGATIVE)
        if within is not None and within.by_view is not None:
            u, v = within.by_view.u, within.by_view.v
            console.print(
                f"{name}: within-view negatives by view: view 1 mean {_num(u.mean)} "
                f"var {_num(u.var)}; view 2 mean {_num(v.mean)} var {_num(v.var)}",
                highlight=False,
            )
        gap = layer.modality_gap
        if gap is not None:
            console.print(
                f"{name}: modality gap ||mu_1 - mu_2|| {_num(gap.centroid_distance)}, "
                f"{_pct(gap.variance_share)} % of the pooled variance",
                highlight=False,
            )
    if result.probes is not None:
        _print_probes(console, result.probes)


def _num(value) -> str:
    return "—" if value is None else f"{value:.4f}"


def _pct(value) -> str:
    return "" if value is None else f"{100 * value:.2f}"


def _print_probes(console: Console, probes: Probes) -> None:
    from rich.table import Table

    # here, not at the top: cl_diag.report loads pandas and matplotlib, which the CLI imports
    # only inside the commands that compute (tests/test_cli_startup.py)
    from cl_diag.report.metrics import probe_report_metrics
    from cl_diag.result import BASELINES

    names = [b for b in BASELINES if probes.baseline(b) is not None]
    table = Table(title=f"probes on {probes.layer} features (%)")
    table.add_column("probe")
    for column in ("trained", *names):
        table.add_column(column.replace("_", " "), justify="right")
    for metric in probe_report_metrics(probes.retrieval or {}):
        values = [metric.read(probes)] + [metric.read(probes.baseline(b)) for b in names]
        if all(v is None for v in values):
            continue
        table.add_row(metric.title, *[_pct(v) for v in values])
    console.print(table)
    for probe, reason in (probes.skipped or {}).items():
        console.print(f"not run: the {probe} probe ({reason})", highlight=False, markup=False)
