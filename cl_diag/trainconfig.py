"""``cl-diag train``'s options, each declared once: :class:`TrainConfig`.

Each field is one option: its type (the annotation), default, ``--help`` panel and text,
bounds and choices (:func:`cl_diag.options.option`). From it come :data:`TRAIN` (the table
that checks a value from the command line, a recipe, a sweep cell, the API or a checkpoint's
stored config), the ``cl-diag train`` command (cl_diag.cli.declared) and the groups of options
the run treats alike (their ``tags``). :class:`ResolvedTrainConfig` is what a run uses, built
by :func:`cl_diag.orchestration.train.resolve_config`. Nothing heavy is imported here: the
command line builds its options before torch loads.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from cl_diag.options import (
    DATASETS,
    DEVICES,
    KEY_ENCODERS,
    LOGGERS,
    LR_SCALINGS,
    MAX_BATCH,
    MAX_EPOCHS,
    MAX_IMAGE_SIZE,
    MAX_INSTANCES,
    MAX_NAME,
    MAX_QUEUE,
    MAX_SEED,
    MAX_STEPS,
    MAX_VIEWS,
    MAX_WIDTH,
    MAX_WORKERS,
    OPTIMIZERS,
    PRECISIONS,
    SCHEDULES,
    TRAINING_LOSSES,
    Option,
    OptionTable,
    Product,
    option,
)

__all__ = [
    "LOSS_HPARAM_FIELDS",
    "RESUME_FREE_FIELDS",
    "RUN_CONFIG",
    "SESSION_FIELDS",
    "TRAIN",
    "TUNING_FIELDS",
    "ResolvedTrainConfig",
    "TrainConfig",
]

# the panels of ``cl-diag train --help``
DATA, MODEL, LOSS, OPTIMISATION, RUNNING, RECORDS = (
    "Data",
    "Model",
    "Loss",
    "Optimisation",
    "Running",
    "Records",
)


@dataclass(frozen=True)
class TrainConfig:
    """One field per ``cl-diag train`` option; ``None``/``"auto"`` mean "the documented default".

    Its defaults are the embedded recipe: digits, SimCLR, the small CNN, CPU, a few minutes on
    two cores. Tags: ``loss-hparam``, a hyper-parameter of the loss library (None: the loss's
    default); ``resume-free``, an option a resumed run may change (where and how it runs, not
    what it computes); ``session``, how one invocation behaves (left out of the training
    command a result records, so that a resumed run records the command of an uninterrupted
    one); ``vrn-tuning``, how ``--vrn`` was chosen (:data:`cl_diag.runconfig.TRAIN_TUNING_KEYS`);
    ``recorded-when-set``, an option added after runs were recorded, left out of a run's record
    while at its default (so that such a run records, and re-renders, as before)."""

    # data
    dataset: str = option(
        "digits",
        DATA,
        "digits, cifar10, cifar100, imagefolder or toy.",
        choices=DATASETS,
    )
    data_root: str | None = option(
        None,
        DATA,
        "Folder holding cifar-10-batches-py/ or cifar-100-python/, or the ImageFolder train root.",
        path=True,
        tags=("resume-free",),
    )
    val_root: str | None = option(
        None,
        DATA,
        "ImageFolder root of the test split (imagefolder only).",
        path=True,
        tags=("resume-free",),
    )
    download: bool = option(
        False,
        DATA,
        "Download CIFAR into --data-root if it is missing.",
        tags=("resume-free",),
    )
    num_samples: int | None = option(
        None,
        DATA,
        "toy: number of instances (default 4). Other datasets: train on the first N images only.",
        low=2,
        high=MAX_INSTANCES,
        hint="a single instance has no negatives",
    )
    dim: int = option(
        3,
        DATA,
        "toy: dimension of the free vectors.",
        low=1,
        high=MAX_WIDTH,
    )
    num_classes: int | None = option(
        None,
        DATA,
        (
            "toy: give instance i the class i mod N (for supcon/supcl and the collapse study; "
            "default: every instance its own class)."
        ),
        low=1,
        high=MAX_INSTANCES,
    )
    image_size: int | None = option(
        None,
        DATA,
        "Crop size of the views (default 8 digits, 32 CIFAR, 224 imagefolder).",
        low=1,
        high=MAX_IMAGE_SIZE,
        hint="the crop side in pixels",
    )
    # model
    arch: str = option(
        "auto",
        MODEL,
        (
            "auto, small-cnn, resnet18-cifar, resnet18, resnet50 (embedding: toy only), or "
            "timm:NAME (any timm model, random init; needs timm). auto: small-cnn for digits, "
            "resnet18-cifar for CIFAR, resnet18 for imagefolder."
        ),
        max_length=MAX_NAME,
    )
    projector_hidden: int | None = option(
        None,
        MODEL,
        "Hidden width of the Linear-BN-ReLU-Linear projector (default 512, 2048 for resnet50).",
        low=1,
        high=MAX_WIDTH,
    )
    projector_dim: int = option(
        128,
        MODEL,
        "Output dimension of the projector (the loss sees it).",
        low=1,
        high=MAX_WIDTH,
    )
    # loss
    loss: str = option(
        "simclr",
        LOSS,
        (
            "infonce, simclr, dcl, dhel, sigmoid, spectral, triplet, contrastive, supcon, supcl or "
            "hcl."
        ),
        choices=TRAINING_LOSSES,
        hint="vrn is a regulariser: --vrn LAMBDA adds it to any of them",
    )
    temperature: float | None = option(
        None,
        LOSS,
        "Temperature t of infonce/simclr/dcl/dhel/sigmoid/supcon/supcl/hcl (default: the loss's).",
        tags=("loss-hparam",),
    )
    bias: float | None = option(
        None,
        LOSS,
        "sigmoid: bias b (paper Eq. 9 sign; default -1).",
        tags=("loss-hparam",),
    )
    within_view: bool | None = option(
        None,
        LOSS,
        "sigmoid: also push within-view negatives (default off).",
        tags=("loss-hparam",),
    )
    margin: float | None = option(
        None,
        LOSS,
        "triplet/contrastive: margin.",
        tags=("loss-hparam",),
    )
    mining: str | None = option(
        None,
        LOSS,
        "triplet: all, semi-hard or batch-hard.",
        tags=("loss-hparam",),
    )
    alpha: float | None = option(
        None,
        LOSS,
        (
            "supcl: self-supervised share in [0, 1], (1 - alpha) L_sup + alpha L_self (default 0.5;"
            " 1 is simclr)."
        ),
        tags=("loss-hparam",),
    )
    beta: float | None = option(
        None,
        LOSS,
        "hcl: concentration beta >= 0 on hard negatives (0: uniform weights; default 1).",
        tags=("loss-hparam",),
    )
    tau_plus: float | None = option(
        None,
        LOSS,
        "hcl: class prior tau+ in [0, 1) of the debiasing (0: none; default 0.1).",
        tags=("loss-hparam",),
    )
    views: int = option(
        2,
        LOSS,
        (
            "Augmented views per instance (V >= 2): simclr, infonce, supcon and supcl in the "
            "multi-positive form (every other view of the same instance is a positive), VRN over "
            "every view pair."
        ),
        low=2,
        high=MAX_VIEWS,
        hint="two views make a positive",
    )
    queue: int = option(
        0,
        LOSS,
        (
            "Keep the last K key embeddings of each view as extra cross-view negatives (MoCo's "
            "memory bank) for infonce, simclr, dcl, hcl and VRN; 0: no queue."
        ),
        low=0,
        high=MAX_QUEUE,
        hint="0: no queue; MoCo keeps 65536",
    )
    key_encoder: str = option(
        "momentum",
        LOSS,
        (
            "With --queue: momentum (a momentum copy of encoder + projector, MoCo v2) or same (the "
            "current encoder's embeddings, detached)."
        ),
        choices=KEY_ENCODERS,
    )
    key_momentum: float = option(
        0.99,
        LOSS,
        "With --queue --key-encoder momentum: m in theta_k <- m theta_k + (1 - m) theta.",
        low=0,
        high=1,
        high_open=True,
        hint="MoCo uses 0.99 or 0.999",
    )
    vrn: float = option(
        0.0,
        LOSS,
        "lambda: add lambda x VRN to the loss (0: off; the paper uses 30).",
        low=0,
        hint="0 turns VRN off; the paper uses 30",
    )
    vrn_delta: float | None = option(
        None,
        LOSS,
        "VRN target similarity delta (default -1/(n_train - 1)).",
        low=-1,
        high=1,
        hint="a cosine similarity",
    )
    vrn_power: float = option(
        2.0,
        LOSS,
        "VRN power p in mean (s - delta)^p.",
        low=1,
        hint="the paper uses 2",
    )
    vrn_tuning_grid: str | None = option(
        None,
        LOSS,
        (
            "Record that --vrn was chosen from these weights (comma-separated, e.g. "
            "0.1,0.3,1,3,10,30,100; --vrn among them): the reports then test the claims about a "
            "tuned lambda on this run. Give --vrn-tuning-split too."
        ),
        hint="the VRN weights tried, e.g. 0.1,0.3,1,3,10,30,100",
        tags=("vrn-tuning", "recorded-when-set"),
    )
    vrn_tuning_split: str | None = option(
        None,
        LOSS,
        (
            "Record the split --vrn was chosen on, e.g. validation (a split carved from the "
            "training set; never test)."
        ),
        hint="the split the weight was chosen on: validation",
        tags=("vrn-tuning", "recorded-when-set"),
    )
    vrn_tuning_criterion: str | None = option(
        None,
        LOSS,
        "Record what --vrn was chosen by, e.g. 'linear top-1, mean over seeds'.",
        tags=("vrn-tuning", "recorded-when-set"),
    )
    # optimisation
    epochs: int = option(
        40,
        OPTIMISATION,
        "Training epochs (each drops its last partial batch).",
        low=1,
        high=MAX_EPOCHS,
    )
    steps: int | None = option(
        None,
        OPTIMISATION,
        "Train for exactly this many optimiser steps instead of --epochs.",
        low=1,
        high=MAX_STEPS,
        hint="or omit it to train --epochs",
    )
    batch_size: int = option(
        128,
        OPTIMISATION,
        "Global batch size (split across processes under torchrun).",
        low=2,
        high=MAX_BATCH,
        hint="a batch of 1 has no negative pairs",
    )
    balanced_batch: bool = option(
        False,
        OPTIMISATION,
        (
            "Fill every batch with m classes x n instances (m = --classes-per-batch, n = batch / "
            "m), as the SSEM theory of supcl assumes."
        ),
    )
    classes_per_batch: int | None = option(
        None,
        OPTIMISATION,
        (
            "--balanced-batch: classes per batch m (default: every class of the dataset); "
            "--batch-size must be a multiple of m."
        ),
        low=2,
        high=MAX_BATCH,
        hint="a batch needs negatives of another class",
    )
    optimizer: str = option(
        "sgd",
        OPTIMISATION,
        "sgd (momentum), adam or adamw.",
        choices=OPTIMIZERS,
    )
    lr: float = option(
        1.0,
        OPTIMISATION,
        "Base learning rate (peak lr = base x batch/256 under linear scaling).",
        low=0,
        low_open=True,
    )
    lr_scaling: str = option(
        "auto",
        OPTIMISATION,
        "auto (linear for sgd on images, none otherwise), linear or none.",
        choices=LR_SCALINGS,
    )
    momentum: float = option(
        0.9,
        OPTIMISATION,
        "SGD momentum.",
        low=0,
        high=1,
        high_open=True,
    )
    weight_decay: float = option(
        0.0001,
        OPTIMISATION,
        "Weight decay (decoupled for adamw).",
        low=0,
    )
    warmup_epochs: float = option(
        3.0,
        OPTIMISATION,
        "Linear warm-up length in epochs (per-step).",
        low=0,
        high=MAX_EPOCHS,
    )
    warmup_steps: int | None = option(
        None,
        OPTIMISATION,
        (
            "Linear warm-up length in optimiser steps instead of --warmup-epochs (an equal-steps "
            "study warms every batch size up over the same steps)."
        ),
        low=0,
        high=MAX_STEPS,
        hint="or omit it to use --warmup-epochs",
    )
    schedule: str = option(
        "cosine",
        OPTIMISATION,
        "After warm-up: cosine (decay to 0) or constant.",
        choices=SCHEDULES,
    )
    seed: int = option(
        0,
        OPTIMISATION,
        "Seed of the weights, batches and augmentations (same seed, same run on CPU).",
        low=0,
        high=MAX_SEED,
        hint="what numpy and torch generators take",
    )
    # running
    device: str = option(
        "auto",
        RUNNING,
        "auto (CUDA when present), cpu or cuda.",
        choices=DEVICES,
        tags=("resume-free",),
    )
    precision: str = option(
        "auto",
        RUNNING,
        "auto (bf16 autocast on CUDA where supported, else fp16; fp32 on CPU), fp32, bf16 or fp16.",
        choices=PRECISIONS,
        tags=("resume-free",),
    )
    compile: bool = option(
        False,
        RUNNING,
        "torch.compile the model.",
        tags=("resume-free",),
    )
    workers: int | None = option(
        None,
        RUNNING,
        "DataLoader worker processes (default 0 on CPU, up to 8 on CUDA).",
        low=0,
        high=MAX_WORKERS,
        hint="DataLoader worker processes",
        tags=("resume-free",),
    )
    sync_bn: bool = option(
        False,
        RUNNING,
        "Under torchrun on CUDA: SyncBatchNorm in the projector and backbone.",
    )
    deterministic: bool = option(
        False,
        RUNNING,
        (
            "Deterministic algorithms, one intra-op thread, cuDNN deterministic (benchmark off) and"
            " CUBLAS_WORKSPACE_CONFIG=:4096:8: the same bytes on any machine whose fingerprint "
            "agrees on the CPU capability and libraries (docs/reproducibility.md). Slower."
        ),
        tags=("resume-free",),
    )
    # records
    out: str | None = option(
        None,
        RECORDS,
        (
            "Output folder for last.pt and metrics.csv (default runs/DATASET-LOSS, or the --resume "
            "folder)."
        ),
        path=True,
        tags=("resume-free",),
    )
    save_every: int = option(
        0,
        RECORDS,
        "Also keep epoch_NNNN.pt every N epochs (0: only last.pt).",
        low=0,
        high=MAX_EPOCHS,
        hint="0: only last.pt",
        tags=("resume-free",),
    )
    log_every: int = option(
        0,
        RECORDS,
        (
            "Read the loss and the in-batch statistics from the device every N steps, one "
            "metrics.csv row each (0: once per epoch). Steps in between never wait for the host."
        ),
        low=0,
        high=MAX_STEPS,
        hint="0: once per epoch",
        tags=("resume-free",),
    )
    logger: str = option(
        "csv",
        RECORDS,
        (
            "Where the metrics rows also go as they are made: csv (metrics.csv only), tensorboard "
            "(event files in OUT/tensorboard; pip install 'cl-diag\\[tensorboard]') or wandb (a W&B"
            " run, online or offline as WANDB_MODE says; pip install 'cl-diag\\[wandb]'). "
            "metrics.csv is always written."
        ),
        choices=LOGGERS,
        tags=("resume-free",),
    )
    online_knn: int = option(
        0,
        RECORDS,
        (
            "Every N epochs (and at the last), the backbone's online kNN top-1 on the test split "
            "against the train split, un-augmented (k = 20, T = 0.07, as solo-learn's online "
            "kNN): a knn_top1 column in metrics.csv and the loggers (0: off). The training is "
            "unchanged by it."
        ),
        low=0,
        high=MAX_EPOCHS,
        hint="0: off",
        tags=("resume-free", "recorded-when-set"),
    )
    resume: str | None = option(
        None,
        RECORDS,
        "Continue the run saved in this last.pt exactly.",
        path=True,
        tags=("resume-free", "session"),
    )
    overwrite: bool = option(
        False,
        RECORDS,
        "Replace a run already in --out.",
        tags=("resume-free", "session"),
    )
    quiet: bool = option(
        False,
        RECORDS,
        "Plain per-epoch lines instead of the progress bar.",
        flags=("--quiet", "-q"),
        tags=("resume-free", "session"),
    )

    @classmethod
    def option_names(cls) -> list[str]:
        return [f.name for f in fields(TrainConfig)]

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """``{option: default}``: the bottom layer a recipe and the command line go over."""
        return {f.name: f.default for f in fields(TrainConfig)}

    def options(self) -> dict[str, Any]:
        """The option fields only, as a dict (what a checkpoint records as its ``config``)."""
        return {name: getattr(self, name) for name in TrainConfig.option_names()}


#: Every option of ``cl-diag train``, as :class:`TrainConfig` declares it, and the products
#: of options that bound what a run allocates.
TRAIN = OptionTable.of(
    TrainConfig,
    "train",
    (
        # the projector's second Linear (hidden x dim float32 weights, and Adam's two moments)
        Product(
            ("projector_hidden", "projector_dim"),
            1 << 26,
            "the projector's hidden x output weights",
            "projector_hidden",
        ),
        # MoCo's queue: K keys of the projector's width per view
        Product(("queue", "projector_dim"), 1 << 27, "the key queue", "queue", factor=2),
        # one step's (views x batch) rows: their similarity matrix is (V B)^2 numbers
        Product(
            ("views", "batch_size", "views", "batch_size"),
            1 << 32,
            "one step's similarities of (views x batch) rows",
            "batch_size",
        ),
        # one step's images (per process): views x batch x 3 channels x side^2 float32
        Product(
            ("views", "batch_size", "image_size", "image_size"),
            1 << 32,
            "one batch's image views (3 channels)",
            "batch_size",
            factor=3,
        ),
        # the toy dataset's free vectors: two views of num_samples x dim
        Product(("num_samples", "dim"), 1 << 28, "the toy's free vectors", "num_samples", factor=2),
    ),
)
#: What a training config stored in a checkpoint may hold: train's options, and the CIFAR
#: stem's padding a config of another trainer can name (the model is rebuilt with it).
RUN_CONFIG = OptionTable(
    "config",
    (*TRAIN.options, Option("conv1_padding", int, optional=True, low=0, high=8)),
    TRAIN.products,
)

LOSS_HPARAM_FIELDS = TRAIN.tagged("loss-hparam")
RESUME_FREE_FIELDS = frozenset(TRAIN.tagged("resume-free"))
SESSION_FIELDS = frozenset(TRAIN.tagged("session"))
TUNING_FIELDS = TRAIN.tagged("vrn-tuning")
RECORDED_WHEN_SET = TRAIN.tagged("recorded-when-set")


@dataclass(frozen=True, kw_only=True)
class ResolvedTrainConfig(TrainConfig):
    """Every option of a run filled in and checked, and every value derived from them.

    The option fields hold what the checkpoint records (``arch``, ``projector_hidden``,
    ``lr_scaling``, ``num_samples``, the loss's hyper-parameters, ``vrn_delta``, ``workers`` and
    ``out`` resolved; ``device`` and ``precision`` as given, so that a resumed run picks its
    machine again). The fields below are derived; build one with :func:`resolve_config`.
    """

    n_train: int  # training instances (after --num-samples)
    world: int  # processes (torchrun's WORLD_SIZE; 1 otherwise)
    device_type: str  # "cpu" or "cuda"
    autocast: str  # "fp32", "bf16" or "fp16": --precision with auto resolved for device_type
    peak_lr: float  # lr after warm-up: --lr, times batch/256 under linear scaling
    steps_per_epoch: int  # full batches per epoch (the last partial batch is dropped)
    total_steps: int  # --steps, or --epochs x steps_per_epoch
    run_epochs: int  # epochs the run spans (the last one may stop early under --steps)
    # the resolved warm-up: --warmup-steps, or --warmup-epochs x steps_per_epoch rounded (the
    # option's field, holding the value the loop uses; the option as given is below)
    warmup_steps: int
    warmup_steps_given: int | None = None  # --warmup-steps as given (None: from the epochs)
    # --balanced-batch: n = batch_size / classes_per_batch instances of each class per batch
    instances_per_class: int | None = None

    def record(self) -> dict[str, Any]:
        """The dict stored as a checkpoint's ``config``: the option fields only, each as
        resolved except ``warmup_steps``, recorded as given (None unless set), so that runs
        warming up over the same epochs at different batch sizes record the same options."""
        record = {**self.options(), "warmup_steps": self.warmup_steps_given}
        defaults = TrainConfig.defaults()
        for name in RECORDED_WHEN_SET:  # added later: a run that does not set it records as before
            if record[name] == defaults[name]:
                del record[name]
        return record
