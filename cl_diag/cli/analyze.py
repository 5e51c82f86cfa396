"""``cl-diag analyze``: pair-similarity diagnostics, probes and theory for embeddings or a trained
encoder.

The command line of :mod:`cl_diag.orchestration.analyze` (one concept at two layers: options,
recipes and printing here; the analysis there)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console

from cl_diag.cli import app
from cl_diag.cli.declared import declared_options
from cl_diag.errors import UserError
from cl_diag.orchestration.analysis_config import (
    ANALYZE,
    AnalyzeConfig,
    check_analysis,
    from_command_line,
)
from cl_diag.vocabulary import RESULT_NAME, PairType

if TYPE_CHECKING:  # the result model is imported only by a command that prints a result
    from cl_diag.result import Probes, Result


def renamed_batch_size(value: int) -> UserError:
    """What ``analyze --batch-size`` (or a probe suite's ``batch-size``) gets: the option was
    renamed, so that ``--batch-size`` means the training batch in every command."""
    return UserError(
        f"analyze's encoding batch is --encode-batch-size (images per encoding batch; "
        f"--batch-size is train's training batch): give --encode-batch-size {value} instead "
        f"(in a probe suite, encode-batch-size = {value})."
    )


@app.command(no_args_is_help=True)
@declared_options(AnalyzeConfig, ANALYZE)
def analyze(
    ctx: typer.Context,
    probe: str | None = typer.Option(
        None,
        help="A probe suite: TOML whose keys are the options below, a path (e.g. "
        "probes/paper.toml) or a bundled name (e.g. quick: see cl-diag recipes); options given "
        "here win.",
    ),
    batch_size: int | None = typer.Option(
        None, "--batch-size", hidden=True, help="Renamed --encode-batch-size."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print only the report path."),
    **declared: Any,  # one per AnalyzeConfig field; read from ctx with the probe suite's
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
    config = from_command_line(values)
    quiet = values["quiet"]
    config = check_analysis(config)  # a value out of bounds is refused before torch loads
    # the default folder <source>-analysis already holding an analysis: it is replaced, with a word
    replaces = values["out"] is None and (config.out / RESULT_NAME).is_file()
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
    if replaces:
        Console(stderr=True, soft_wrap=True).print(
            f"note: replaced the earlier analysis in {config.out} (the default folder for "
            f"{config.input.name}); give --out to keep both.",
            highlight=False,
        )
    console.print(f"report: {outcome.out / 'report.html'}", highlight=False)


def _print_summary(console: Console, result: Result) -> None:
    from rich.table import Table

    from cl_diag.measurement.pairs import EXCESS_MARGIN  # late: torch, after the work is done
    from cl_diag.report.overview import view_names

    first, second = view_names(result)
    for name, layer in result.layers.items():
        gap = layer.modality_gap
        if gap is not None:  # two encoders: the gap first, the pooled statistics are mostly it
            after = "—" if gap.after is None else _num(gap.after.negative_mean)
            console.print(
                f"{name}: {first} vs {second}: modality gap ||mu_1 - mu_2|| "
                f"{_num(gap.centroid_distance)} ({_pct(gap.variance_share)} % of the pooled "
                f"variance); cross-view negative mean {_num(gap.before.negative_mean)}, "
                f"{after} with the gap removed",
                highlight=False,
            )
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
                f"{name}: within-view negatives by view: {first} mean {_num(u.mean)} "
                f"var {_num(u.var)}; {second} mean {_num(v.mean)} var {_num(v.var)}",
                highlight=False,
            )
    if result.probes is not None:
        _print_probes(console, result.probes, (first, second))


def _num(value) -> str:
    return "—" if value is None else f"{value:.4f}"


def _pct(value) -> str:
    return "" if value is None else f"{100 * value:.2f}"


def _print_probes(console: Console, probes: Probes, views: tuple[str, str]) -> None:
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
        title = metric.title
        if title.endswith("(2→1)"):  # the retrieval's directions, by the views' names
            title = title.replace("(2→1)", f"({views[1]} → {views[0]})")
        elif title.startswith("retrieval ") and "reverse" not in metric.key:
            title += f" ({views[0]} → {views[1]})"
        table.add_row(title, *[_pct(v) for v in values])
    if table.rows:  # no probe ran (sampled pairs of an embeddings file): only why not
        console.print(table)
    for probe, reason in (probes.skipped or {}).items():
        console.print(f"not run: the {probe} probe ({reason})", highlight=False, markup=False)
