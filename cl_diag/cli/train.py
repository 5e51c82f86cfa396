"""``cl-diag train``: train a contrastive model with any loss of the library, with or without
VRN.

The command line of :mod:`cl_diag.orchestration.train` (one concept at two layers: options,
recipes and printing here; the resolved config and the run there)."""

from __future__ import annotations

import typer
from rich.console import Console

from cl_diag.cli import app
from cl_diag.errors import UserError
from cl_diag.orchestration.train import TrainConfig, check_train_options, train_options

_D = TrainConfig()  # one source of truth for the defaults

_DATA, _MODEL, _LOSS, _OPT, _RUN, _REC = (
    "Data",
    "Model",
    "Loss",
    "Optimisation",
    "Running",
    "Records",
)


@app.command(name="train")
def train_command(
    ctx: typer.Context,
    recipe: str | None = typer.Argument(
        None,
        help="A TOML recipe whose keys are the options below (a path, e.g. "
        "trainers/simclr-vrn.toml, or a bundled name, e.g. simclr-vrn: see cl-diag recipes); "
        "options given here win.",
    ),
    recipe_name: str | None = typer.Option(
        None,
        "--recipe",
        help="The recipe as an option instead of the first argument (e.g. --recipe simclr-vrn).",
        rich_help_panel="Recipe",
    ),
    # data
    dataset: str = typer.Option(
        _D.dataset, help="digits, cifar10, cifar100, imagefolder or toy.", rich_help_panel=_DATA
    ),
    data_root: str | None = typer.Option(
        None,
        help="Folder holding cifar-10-batches-py/ or cifar-100-python/, or the ImageFolder train "
        "root.",
        rich_help_panel=_DATA,
    ),
    val_root: str | None = typer.Option(
        None, help="ImageFolder root of the test split (imagefolder only).", rich_help_panel=_DATA
    ),
    download: bool = typer.Option(
        _D.download, help="Download CIFAR into --data-root if it is missing.", rich_help_panel=_DATA
    ),
    num_samples: int | None = typer.Option(
        None,
        help="toy: number of instances (default 4). Other datasets: train on the first N images "
        "only.",
        rich_help_panel=_DATA,
    ),
    dim: int = typer.Option(
        _D.dim, help="toy: dimension of the free vectors.", rich_help_panel=_DATA
    ),
    num_classes: int | None = typer.Option(
        None,
        help="toy: give instance i the class i mod N (for supcon/supcl and the collapse study; "
        "default: every instance its own class).",
        rich_help_panel=_DATA,
    ),
    image_size: int | None = typer.Option(
        None,
        help="Crop size of the views (default 8 digits, 32 CIFAR, 224 imagefolder).",
        rich_help_panel=_DATA,
    ),
    # model
    arch: str = typer.Option(
        _D.arch,
        help="auto, small-cnn, resnet18-cifar, resnet18, resnet50 (embedding: toy only), or "
        "timm:NAME (any timm model, random init; needs timm). auto: small-cnn for digits, "
        "resnet18-cifar for CIFAR, resnet18 for imagefolder.",
        rich_help_panel=_MODEL,
    ),
    projector_hidden: int | None = typer.Option(
        None,
        help="Hidden width of the Linear-BN-ReLU-Linear projector (default 512, 2048 for "
        "resnet50).",
        rich_help_panel=_MODEL,
    ),
    projector_dim: int = typer.Option(
        _D.projector_dim,
        help="Output dimension of the projector (the loss sees it).",
        rich_help_panel=_MODEL,
    ),
    # loss
    loss: str = typer.Option(
        _D.loss,
        help="infonce, simclr, dcl, dhel, sigmoid, spectral, triplet, contrastive, supcon, "
        "supcl or hcl.",
        rich_help_panel=_LOSS,
    ),
    temperature: float | None = typer.Option(
        None,
        help="Temperature t of infonce/simclr/dcl/dhel/sigmoid/supcon/supcl/hcl (default: the "
        "loss's).",
        rich_help_panel=_LOSS,
    ),
    bias: float | None = typer.Option(
        None, help="sigmoid: bias b (paper Eq. 9 sign; default -1).", rich_help_panel=_LOSS
    ),
    within_view: bool | None = typer.Option(
        None,
        "--within-view/--no-within-view",
        help="sigmoid: also push within-view negatives (default off).",
        rich_help_panel=_LOSS,
    ),
    margin: float | None = typer.Option(
        None, help="triplet/contrastive: margin.", rich_help_panel=_LOSS
    ),
    mining: str | None = typer.Option(
        None, help="triplet: all, semi-hard or batch-hard.", rich_help_panel=_LOSS
    ),
    alpha: float | None = typer.Option(
        None,
        help="supcl: self-supervised share in [0, 1], (1 - alpha) L_sup + alpha L_self "
        "(default 0.5; 1 is simclr).",
        rich_help_panel=_LOSS,
    ),
    beta: float | None = typer.Option(
        None,
        help="hcl: concentration beta >= 0 on hard negatives (0: uniform weights; default 1).",
        rich_help_panel=_LOSS,
    ),
    tau_plus: float | None = typer.Option(
        None,
        help="hcl: class prior tau+ in [0, 1) of the debiasing (0: none; default 0.1).",
        rich_help_panel=_LOSS,
    ),
    views: int = typer.Option(
        _D.views,
        help="Augmented views per instance (V >= 2): simclr, infonce, supcon and supcl in the "
        "multi-positive form (every other view of the same instance is a positive), VRN over "
        "every view pair.",
        rich_help_panel=_LOSS,
    ),
    queue: int = typer.Option(
        _D.queue,
        help="Keep the last K key embeddings of each view as extra cross-view negatives (MoCo's "
        "memory bank) for infonce, simclr, dcl, hcl and VRN; 0: no queue.",
        rich_help_panel=_LOSS,
    ),
    key_encoder: str = typer.Option(
        _D.key_encoder,
        help="With --queue: momentum (a momentum copy of encoder + projector, MoCo v2) or same "
        "(the current encoder's embeddings, detached).",
        rich_help_panel=_LOSS,
    ),
    key_momentum: float = typer.Option(
        _D.key_momentum,
        help="With --queue --key-encoder momentum: m in theta_k <- m theta_k + (1 - m) theta.",
        rich_help_panel=_LOSS,
    ),
    vrn: float = typer.Option(
        _D.vrn,
        help="lambda: add lambda x VRN to the loss (0: off; the paper uses 30).",
        rich_help_panel=_LOSS,
    ),
    vrn_delta: float | None = typer.Option(
        None, help="VRN target similarity delta (default -1/(n_train - 1)).", rich_help_panel=_LOSS
    ),
    vrn_power: float = typer.Option(
        _D.vrn_power, help="VRN power p in mean (s - delta)^p.", rich_help_panel=_LOSS
    ),
    vrn_tuning_grid: str | None = typer.Option(
        None,
        help="Record that --vrn was chosen from these weights (comma-separated, e.g. "
        "0.1,0.3,1,3,10,30,100; --vrn among them): the reports then test the claims about a "
        "tuned lambda on this run. Give --vrn-tuning-split too.",
        rich_help_panel=_LOSS,
    ),
    vrn_tuning_split: str | None = typer.Option(
        None,
        help="Record the split --vrn was chosen on, e.g. validation (a split carved from the "
        "training set; never test).",
        rich_help_panel=_LOSS,
    ),
    vrn_tuning_criterion: str | None = typer.Option(
        None,
        help="Record what --vrn was chosen by, e.g. 'linear top-1, mean over seeds'.",
        rich_help_panel=_LOSS,
    ),
    # optimisation
    epochs: int = typer.Option(
        _D.epochs, help="Training epochs (each drops its last partial batch).", rich_help_panel=_OPT
    ),
    steps: int | None = typer.Option(
        None,
        help="Train for exactly this many optimiser steps instead of --epochs.",
        rich_help_panel=_OPT,
    ),
    batch_size: int = typer.Option(
        _D.batch_size,
        help="Global batch size (split across processes under torchrun).",
        rich_help_panel=_OPT,
    ),
    balanced_batch: bool = typer.Option(
        _D.balanced_batch,
        help="Fill every batch with m classes x n instances (m = --classes-per-batch, n = "
        "batch / m), as the SSEM theory of supcl assumes.",
        rich_help_panel=_OPT,
    ),
    classes_per_batch: int | None = typer.Option(
        None,
        help="--balanced-batch: classes per batch m (default: every class of the dataset); "
        "--batch-size must be a multiple of m.",
        rich_help_panel=_OPT,
    ),
    optimizer: str = typer.Option(
        _D.optimizer, help="sgd (momentum), adam or adamw.", rich_help_panel=_OPT
    ),
    lr: float = typer.Option(
        _D.lr,
        help="Base learning rate (peak lr = base x batch/256 under linear scaling).",
        rich_help_panel=_OPT,
    ),
    lr_scaling: str = typer.Option(
        _D.lr_scaling,
        help="auto (linear for sgd on images, none otherwise), linear or none.",
        rich_help_panel=_OPT,
    ),
    momentum: float = typer.Option(_D.momentum, help="SGD momentum.", rich_help_panel=_OPT),
    weight_decay: float = typer.Option(
        _D.weight_decay, help="Weight decay (decoupled for adamw).", rich_help_panel=_OPT
    ),
    warmup_epochs: float = typer.Option(
        _D.warmup_epochs, help="Linear warm-up length in epochs (per-step).", rich_help_panel=_OPT
    ),
    warmup_steps: int | None = typer.Option(
        None,
        help="Linear warm-up length in optimiser steps instead of --warmup-epochs (an equal-steps "
        "study warms every batch size up over the same steps).",
        rich_help_panel=_OPT,
    ),
    schedule: str = typer.Option(
        _D.schedule, help="After warm-up: cosine (decay to 0) or constant.", rich_help_panel=_OPT
    ),
    seed: int = typer.Option(
        _D.seed,
        help="Seed of the weights, batches and augmentations (same seed, same run on CPU).",
        rich_help_panel=_OPT,
    ),
    # running
    device: str = typer.Option(
        _D.device, help="auto (CUDA when present), cpu or cuda.", rich_help_panel=_RUN
    ),
    precision: str = typer.Option(
        _D.precision,
        help="auto (bf16 autocast on CUDA where supported, else fp16; fp32 on CPU), fp32, bf16 or "
        "fp16.",
        rich_help_panel=_RUN,
    ),
    compile: bool = typer.Option(_D.compile, help="torch.compile the model.", rich_help_panel=_RUN),
    workers: int | None = typer.Option(
        None,
        help="DataLoader worker processes (default 0 on CPU, up to 8 on CUDA).",
        rich_help_panel=_RUN,
    ),
    sync_bn: bool = typer.Option(
        _D.sync_bn,
        help="Under torchrun on CUDA: SyncBatchNorm in the projector and backbone.",
        rich_help_panel=_RUN,
    ),
    deterministic: bool = typer.Option(
        _D.deterministic,
        help="Deterministic algorithms, one intra-op thread, cuDNN deterministic (benchmark off) "
        "and CUBLAS_WORKSPACE_CONFIG=:4096:8: the same bytes on any machine whose fingerprint "
        "agrees on the CPU capability and libraries (docs/reproducibility.md). Slower.",
        rich_help_panel=_RUN,
    ),
    # records
    out: str | None = typer.Option(
        None,
        help="Output folder for last.pt and metrics.csv (default runs/DATASET-LOSS, or the "
        "--resume folder).",
        rich_help_panel=_REC,
    ),
    save_every: int = typer.Option(
        _D.save_every,
        help="Also keep epoch_NNNN.pt every N epochs (0: only last.pt).",
        rich_help_panel=_REC,
    ),
    log_every: int = typer.Option(
        _D.log_every,
        help="Read the loss and the in-batch statistics from the device every N steps, one "
        "metrics.csv row each (0: once per epoch). Steps in between never wait for the host.",
        rich_help_panel=_REC,
    ),
    logger: str = typer.Option(
        _D.logger,
        help="Where the metrics rows also go as they are made: csv (metrics.csv only), "
        "tensorboard (event files in OUT/tensorboard; pip install 'cl-diag\\[tensorboard]') or "
        "wandb (a W&B run, online or offline as WANDB_MODE says; pip install 'cl-diag\\[wandb]'). "
        "metrics.csv is always written.",
        rich_help_panel=_REC,
    ),
    resume: str | None = typer.Option(
        None, help="Continue the run saved in this last.pt exactly.", rich_help_panel=_REC
    ),
    overwrite: bool = typer.Option(
        _D.overwrite, help="Replace a run already in --out.", rich_help_panel=_REC
    ),
    quiet: bool = typer.Option(
        _D.quiet,
        "--quiet",
        "-q",
        help="Plain per-epoch lines instead of the progress bar.",
        rich_help_panel=_REC,
    ),
) -> None:
    """Train a contrastive encoder with any loss, with or without VRN; write last.pt and metrics.csv.

    With no options: SimCLR on scikit-learn's digits with a small CNN, on CPU, in a few minutes.

    Examples:

      cl-diag train --loss dcl --vrn 30 --batch-size 32 --out runs/dcl-vrn-b32

      cl-diag train trainers/simclr-vrn.toml --batch-size 64

      cl-diag train --recipe simclr-vrn --batch-size 64

      cl-diag train --resume runs/dcl-vrn-b32/last.pt
    """  # noqa: E501 (typer's help shows a command docstring's lines as written)
    # here, not at the top: what runs a command is imported by that command alone, so that
    # help and argument errors stay instant (tests/test_cli_startup.py)
    from cl_diag.cli.progress import train_display
    from cl_diag.recipes import merge_recipe, read_recipe

    if recipe is not None and recipe_name is not None:
        raise UserError(f"Two recipes given ({recipe} and --recipe {recipe_name}); give one.")
    path = recipe if recipe is not None else recipe_name
    # A recipe's keys are TrainConfig's fields (= these options); the command line wins over it.
    values, given = merge_recipe(ctx, read_recipe(path, TrainConfig) if path is not None else {})
    options = train_options(values, given)
    check_train_options(options)  # a value out of bounds is refused before torch loads
    from cl_diag.orchestration.train import train as run_train

    try:
        with train_display(Console(), quiet=options.quiet) as display:
            result = run_train(options, progress=display)
    except KeyboardInterrupt:
        _interrupted(options)
        raise
    if result.out_dir is None:  # a non-zero rank under torchrun
        return
    typer.echo(result.summary())


def _interrupted(options: TrainConfig) -> None:
    from pathlib import Path

    from cl_diag.cli import report_interrupt

    folder = options.out or (str(Path(options.resume).parent) if options.resume else None)
    last = Path(folder) / "last.pt" if folder else None
    if last is not None and last.is_file():
        report_interrupt(
            f"{last} keeps the run as of its last completed epoch; continue it with "
            f"cl-diag train --resume {last}"
        )
    else:
        report_interrupt("the run stopped before its first epoch ended; nothing was kept.")
