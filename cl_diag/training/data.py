"""Datasets for training and evaluation, and the two-view wrapper the loop consumes.

:func:`digits_split` is scikit-learn's 8x8 digits with the project's fixed stratified split;
:func:`load_dataset` one split of ``digits``, ``cifar10``, ``cifar100`` or ``imagefolder``;
:class:`TwoViews` gives ``(index, view1, view2, label)``; :func:`training_data` everything
the trainer needs for a config. A sample's augmentation is seeded from ``(seed, epoch,
index)``, never from the order in which workers or ranks see it, so a resumed run, another
``--workers`` and a DDP run on the same global batch all see exactly the same views.
"""

from __future__ import annotations

import functools
import os
import stat
import warnings
from collections.abc import Callable, Sized
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from torch.utils.data import Dataset

from cl_diag.errors import UserError
from cl_diag.options import DATASETS

__all__ = [
    "DIGITS_SPLIT_SEED",
    "DIGITS_TEST_FRACTION",
    "IMAGE_DATASETS",
    "BadImageError",
    "ToyViews",
    "TrainingData",
    "Transformed",
    "TwoViews",
    "class_counts",
    "dataset_labels",
    "digits_arrays",
    "digits_split",
    "load_dataset",
    "load_image",
    "sample_seed",
    "toy_labels",
    "train_size",
    "training_data",
]

#: the data sets of images (``options.DATASETS`` is every data set a run may name, "toy" too)
IMAGE_DATASETS = tuple(d for d in DATASETS if d != "toy")

#: The digits split never changes with ``--seed``: every run, and every analysis of any
#: run, sees the same 1,347 training and 450 test images.
DIGITS_SPLIT_SEED = 0
DIGITS_TEST_FRACTION = 0.25

_CIFAR_FOLDERS = {
    "cifar10": (
        "cifar-10-batches-py",
        "data_batch_1 ... data_batch_5, test_batch and batches.meta",
        "CIFAR-10",
    ),
    "cifar100": ("cifar-100-python", "train, test and meta", "CIFAR-100"),
}
#: Images in the official train split of CIFAR-10 and CIFAR-100 (5 x 10,000; 50,000).
CIFAR_TRAIN_SIZE = 50_000


# --------------------------------------------------------------------------- digits


def digits_arrays() -> tuple[torch.Tensor, torch.Tensor]:
    """All 1,797 scikit-learn digits as ``(images, labels)``.

    ``images``: float32 ``(1797, 1, 8, 8)`` scaled from the 0..16 grey levels to [0, 1];
    ``labels``: int64 ``(1797,)`` in 0..9. Bundled with scikit-learn, no download.
    """
    images, labels = _digits_numpy()
    return torch.from_numpy(images.copy()).unsqueeze(1), torch.from_numpy(labels.copy())


@functools.lru_cache(maxsize=1)
def _digits_numpy() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    bunch = load_digits()
    return bunch.images.astype(np.float32) / 16.0, bunch.target.astype(np.int64)


def digits_split(
    seed: int = DIGITS_SPLIT_SEED, test_fraction: float = DIGITS_TEST_FRACTION
) -> tuple[torch.Tensor, torch.Tensor]:
    """The fixed stratified train/test split of the digits, as sorted index tensors.

    With the defaults: 1,347 train and 450 test images, every class in the same
    proportion in both (scikit-learn ``train_test_split(stratify=labels)``, the
    ``"sklearn"`` rule of the project's one stratified split).
    """
    from cl_diag.measurement.probes import stratified_split

    _, labels = digits_arrays()
    train, test = stratified_split(labels, test_fraction, seed, method="sklearn")
    return torch.from_numpy(train), torch.from_numpy(test)


class _TensorImages(Dataset):
    """``(image, label)`` from in-memory tensors (the digits)."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor):
        self.images, self.targets = images, labels

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return self.images[i], int(self.targets[i])


# --------------------------------------------------------------------------- files on disk


def _cifar(name: str, data_root: str | None, train: bool, download: bool) -> Dataset:
    import torchvision

    folder, files, title = _CIFAR_FOLDERS[name]
    if not data_root:
        raise UserError(
            f"--dataset {name} needs --data-root: the folder that contains {folder}/ "
            f"(add --download to fetch {title} there)."
        )
    root = Path(data_root).expanduser()
    if not download and not (root / folder).is_dir():
        raise UserError(
            f"{title} not found under {root}: expected {root / folder}/ holding {files} "
            f"(the 'python version' archive from https://www.cs.toronto.edu/~kriz/cifar.html, "
            f"unpacked). Point --data-root at the folder that contains {folder}/, or add "
            f"--download to fetch it there."
        )
    cls = torchvision.datasets.CIFAR10 if name == "cifar10" else torchvision.datasets.CIFAR100
    try:
        return cls(str(root), train=train, download=download)
    except (RuntimeError, OSError) as exc:  # torchvision's "not found or corrupted", no network
        raise UserError(
            f"could not read {title} from {root / folder}: {exc}. Check that the folder holds "
            f"{files} unchanged, or remove it and use --download."
        ) from None


def _imagefolder(root: str | None, option: str) -> Dataset:
    import torchvision

    if not root:
        raise UserError(
            f"--dataset imagefolder needs {option}: a folder with one sub-folder per class "
            f"(root/cat/001.jpg, root/dog/002.png, ...)."
        )
    path = Path(root).expanduser()
    if not path.is_dir():
        raise UserError(
            f"{option} {path} is not a folder; imagefolder expects one sub-folder per class "
            f"(root/cat/001.jpg, root/dog/002.png, ...)."
        )
    try:
        return torchvision.datasets.ImageFolder(
            str(path), loader=load_image, is_valid_file=_regular_image
        )
    except (FileNotFoundError, RuntimeError, OSError) as exc:
        raise UserError(
            f"{option} {path} is not in ImageFolder layout ({exc}); expected one sub-folder per "
            f"class holding image files (root/cat/001.jpg, root/dog/002.png, ...)."
        ) from None


#: what a file that is not a regular file is, by its stat.S_IS* test
_NOT_REGULAR = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a folder"),
)


def _regular_image(path: str) -> bool:
    """ImageFolder's test of a file: an image by its suffix (torchvision's list), and then a
    regular file that is not empty, or :class:`BadImageError`. A named pipe called ``x.png``
    would block the reader for ever, a device never end: they are never opened, and stop the
    command as a bad image does (skipping would change the training set between runs); an empty
    file is found here rather than epochs later, when it is first drawn."""
    from torchvision.datasets.folder import IMG_EXTENSIONS, has_file_allowed_extension

    if not has_file_allowed_extension(path, IMG_EXTENSIONS):
        return False
    try:
        info = os.stat(path)
    except OSError as exc:  # a dangling link, no permission
        raise BadImageError(
            f"Cannot read the image {path} ({exc.strerror or exc}). Remove or replace that "
            "file and run again."
        ) from None
    mode = info.st_mode
    if stat.S_ISREG(mode) and info.st_size == 0:  # found here, not epochs later when drawn
        raise BadImageError(
            f"The image {path} is an empty file (0 bytes). Remove or replace it and run again: "
            "cl-diag stops at a bad image rather than skip it."
        )
    if stat.S_ISREG(mode):
        return True
    what = next((words for test, words in _NOT_REGULAR if test(mode)), "not a regular file")
    raise BadImageError(
        f"{path} is {what}, not an image file; cl-diag never opens it (it could block or never "
        "end). Remove it from the image folder and run again."
    )


class BadImageError(UserError):
    """An image file of an ImageFolder that cannot be decoded (corrupt, truncated, or a
    decompression bomb).

    Raised where the image is read, possibly in a DataLoader worker process; torch re-raises
    it in the main process with the worker's traceback as the message, from which the original
    message is recovered, so the user sees one line naming the file."""

    def __init__(self, message: str) -> None:
        marker = f"{BadImageError.__module__}.BadImageError: "
        if "Original Traceback" in message and marker in message:
            message = message.rsplit(marker, 1)[1].strip()
        super().__init__(message)


def load_image(path: str) -> Any:
    """An ImageFolder image as an RGB PIL image; :class:`BadImageError` naming the file when it
    cannot be decoded, or passes PIL's decompression-bomb limit. A bad image stops the command
    rather than being skipped, which would change the training set between runs and resumes.
    """
    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with open(path, "rb") as handle:
                image = Image.open(handle)
                return image.convert("RGB")
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError, Warning) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if isinstance(exc, (Image.DecompressionBombError, Image.DecompressionBombWarning)):
            reason = f"too large to decode safely: {reason}"
        elif isinstance(exc, Image.UnidentifiedImageError):
            reason = "not an image file PIL can decode"
        raise BadImageError(
            f"Cannot read the image {path} ({reason}). Remove or replace that file and run "
            "again: cl-diag stops at a bad image rather than skip it, so that the training set "
            "stays the same across runs and resumes."
        ) from None


def load_dataset(
    name: str,
    split: str = "train",
    *,
    data_root: str | None = None,
    val_root: str | None = None,
    download: bool = False,
) -> Dataset:
    """One split of an image dataset, un-transformed: items are ``(image, label)``.

    ``digits`` gives float tensors ``(1, 8, 8)`` in [0, 1]; the others give PIL images.
    ``split`` is ``"train"`` or ``"test"`` (for ``imagefolder``, ``"test"`` reads
    ``val_root``). Missing data raises :class:`UserError` naming the expected layout.
    """
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    if name == "digits":
        images, labels = digits_arrays()
        idx = digits_split()[0 if split == "train" else 1]
        return _TensorImages(images[idx], labels[idx])
    if name in _CIFAR_FOLDERS:
        return _cifar(name, data_root, split == "train", download)
    if name == "imagefolder":
        if split == "train":
            return _imagefolder(data_root, "--data-root")
        return _imagefolder(val_root, "--val-root")
    raise UserError(
        f"unknown dataset {name!r}; choose one of: {', '.join(d for d in IMAGE_DATASETS)}"
        + (" (toy has no images)" if name == "toy" else "")
    )


def _size(dataset: Dataset) -> int:
    # torch's Dataset type declares no __len__; every dataset here (digits tensors, CIFAR,
    # ImageFolder, Subset and the wrappers below) is a sized map-style one
    return len(cast(Sized, dataset))


def dataset_labels(dataset: Dataset) -> torch.Tensor:
    """Integer labels of every item, without decoding images."""
    if isinstance(dataset, torch.utils.data.Subset):
        return dataset_labels(dataset.dataset)[torch.as_tensor(dataset.indices)]
    targets = getattr(dataset, "targets", None)
    if targets is None:
        raise ValueError(f"{type(dataset).__name__} exposes no .targets")
    return torch.as_tensor(targets, dtype=torch.int64)


# --------------------------------------------------------------------------- two views


_MASK64 = (1 << 64) - 1


def _splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def sample_seed(seed: int, epoch: int, index: int) -> int:
    """The seed of one sample's augmentation: splitmix64 chained over (seed, epoch, index).

    A 63-bit value; distinct inputs give unrelated seeds (splitmix64 is a bijection with
    full avalanche), and it costs microseconds, unlike numpy's SeedSequence.
    """
    h = _splitmix64(seed & _MASK64)
    h = _splitmix64(h ^ (epoch & _MASK64))
    h = _splitmix64(h ^ (index & _MASK64))
    return h >> 1


def _key(key: Any) -> tuple[int, int]:
    # The trainer's sampler yields (epoch, index) so that workers never need to be told the
    # epoch; a plain integer key means epoch 0.
    if isinstance(key, tuple):
        return int(key[0]), int(key[1])
    return 0, int(key)


class TwoViews(Dataset):
    """Augmented views of each instance: items are ``(index, view1, view2, label)``, or with
    ``views`` V > 2 ``(index, view1, ..., viewV, label)``.

    The views of instance ``i`` in epoch ``e`` are drawn in order with torch's CPU generator
    seeded with ``sample_seed(seed, e, i)`` (so views 1 and 2 are the same for any V); keys are
    ``(epoch, index)`` tuples or plain indices (epoch 0). In the main process the global RNG
    state is restored afterwards.
    """

    def __init__(self, base: Dataset, transform: Callable, seed: int, views: int = 2):
        if views < 2:
            raise ValueError(f"TwoViews: views must be >= 2, got {views}")
        self.base, self.transform, self.seed = base, transform, int(seed)
        self.views = int(views)

    def __len__(self) -> int:
        return _size(self.base)

    def __getitem__(self, key: Any) -> tuple[Any, ...]:
        return self.__getitems__([key])[0]

    def __getitems__(self, keys: list[Any]) -> list[tuple[Any, ...]]:
        """The items of ``keys`` (the DataLoader asks for a batch at once). A transform that
        draws per image and then applies to a batch (``draw()`` and ``apply(images, draws)``,
        as :class:`~cl_diag.training.augment.DigitsViews`) warps the whole batch in one go,
        with the same draws and so the same views as one image at a time."""
        where = [_key(key) for key in keys]
        bases = [self.base[i] for _, i in where]
        batched: Any = self.transform if hasattr(self.transform, "draw") else None
        # Transforms draw from torch's default CPU generator. Seed only that one:
        # torch.manual_seed would also queue a (slow, stack-formatting) CUDA re-seed.
        cpu = torch.default_generator
        in_worker = torch.utils.data.get_worker_info() is not None
        saved = None if in_worker else cpu.get_state()
        drawn: list[Any] = []
        try:
            for (epoch, i), (image, _) in zip(where, bases, strict=True):
                cpu.manual_seed(sample_seed(self.seed, epoch, i))
                for _ in range(self.views):
                    drawn.append(self.transform(image) if batched is None else batched.draw())
        finally:
            if saved is not None:
                cpu.set_state(saved)
        if batched is not None:
            images = torch.stack([image for image, _ in bases for _ in range(self.views)])
            drawn = list(batched.apply(images, drawn).unbind(0))
        v = self.views
        return [
            (i, *drawn[k * v : (k + 1) * v], int(label))
            for k, ((_, i), (_, label)) in enumerate(zip(where, bases, strict=True))
        ]


class Transformed(Dataset):
    """``(transform(image), label)``: the un-augmented evaluation view of a dataset."""

    def __init__(self, base: Dataset, transform: Callable):
        self.base, self.transform = base, transform

    def __len__(self) -> int:
        return _size(self.base)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        image, label = self.base[i]
        return self.transform(image), int(label)


def toy_labels(n: int, num_classes: int | None = None) -> torch.Tensor:
    """The labels of the toy dataset's ``n`` instances: instance ``i`` is class
    ``i mod num_classes`` (``--num-classes``), or its own class ``i`` without it."""
    index = torch.arange(int(n))
    return index if num_classes is None else index % int(num_classes)


class ToyViews(Dataset):
    """The rebuttal's free-embedding experiment: instance ``i`` has no image.

    Its two "views" are the row ids ``i`` and ``n + i`` of a ``(2n, d)`` table of learnable
    vectors (:class:`cl_diag.models.FreeEmbeddings`); its label is :func:`toy_labels`: ``i``,
    or ``i mod num_classes`` with classes (for the supervised losses and the collapse study).
    """

    def __init__(self, n: int, num_classes: int | None = None):
        self.n = int(n)
        self.targets = toy_labels(self.n, num_classes)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, key: Any) -> tuple[int, torch.Tensor, torch.Tensor, int]:
        _, i = _key(key)
        return i, torch.tensor(i), torch.tensor(self.n + i), int(self.targets[i])


# --------------------------------------------------------------------------- for the trainer


def train_size(
    dataset: str, *, num_samples: int | None = None, data_root: str | None = None
) -> int:
    """The ``n_train`` that :func:`training_data` gives for these arguments, without loading images.

    digits and CIFAR have fixed train splits (1,347 and 50,000 images), toy has ``num_samples``
    instances (default 4); an ImageFolder's files are listed (not opened). ``num_samples``
    keeps the first N. A missing ImageFolder raises the same UserError as loading it.
    """
    if dataset == "toy":
        return 4 if num_samples is None else int(num_samples)
    if dataset == "digits":
        full = len(digits_split()[0])
    elif dataset in _CIFAR_FOLDERS:
        full = CIFAR_TRAIN_SIZE
    else:
        full = _size(load_dataset(dataset, "train", data_root=data_root))
    return full if num_samples is None else min(full, int(num_samples))


def class_counts(
    dataset: str,
    *,
    num_samples: int | None = None,
    data_root: str | None = None,
    num_classes: int | None = None,
) -> list[int]:
    """Instances per class of the training set :func:`training_data` gives for these arguments
    (classes in sorted label order, absent labels left out), read from the labels alone: the
    toy rule, the digits split, or the dataset's targets (CIFAR's label files are read, an
    ImageFolder's files listed, no image is decoded)."""
    if dataset == "toy":
        labels = toy_labels(train_size("toy", num_samples=num_samples), num_classes)
    elif dataset == "digits":
        labels = digits_arrays()[1][digits_split()[0]]
    else:
        labels = dataset_labels(load_dataset(dataset, "train", data_root=data_root))
    if num_samples is not None and dataset != "toy":
        labels = labels[: int(num_samples)]
    counts = torch.bincount(labels)
    return [int(c) for c in counts if c > 0]


@dataclass
class TrainingData:
    """What the trainer needs from the data side of a config."""

    dataset: str
    train_set: Dataset  # TwoViews or ToyViews
    labels: torch.Tensor  # of train_set, in order
    n_train: int
    num_classes: int
    split: dict[str, Any] = field(default_factory=dict)  # recorded in the checkpoint


def training_data(
    dataset: str,
    *,
    seed: int,
    data_root: str | None = None,
    val_root: str | None = None,
    download: bool = False,
    num_samples: int | None = None,
    image_size: int | None = None,
    num_classes: int | None = None,
    views: int = 2,
    channels: int | None = None,
) -> TrainingData:
    """The training set of ``dataset`` wrapped in two-view augmentation (``views`` V > 2: V views).

    ``num_samples`` keeps only the first N training images (the toy dataset: N instances,
    in ``num_classes`` classes: :func:`toy_labels`; two views always). ``channels``: what the
    model takes, when it differs from the images' own (a 3-channel model on digits).
    The returned ``split`` says which images are the train and test sets.
    """
    from cl_diag.training.augment import train_transform

    if dataset == "toy":
        n = train_size("toy", num_samples=num_samples)
        toy = ToyViews(n, num_classes)
        classes = n if num_classes is None else int(num_classes)
        return TrainingData("toy", toy, toy.targets.clone(), n, classes, {"kind": "toy", "n": n})

    base = load_dataset(dataset, "train", data_root=data_root, val_root=val_root, download=download)
    if dataset == "digits":
        train_idx, test_idx = digits_split()
        split: dict[str, Any] = {
            "kind": "stratified",
            "seed": DIGITS_SPLIT_SEED,
            "test_fraction": DIGITS_TEST_FRACTION,
            "train_indices": train_idx,
            "test_indices": test_idx,
        }
    elif dataset == "imagefolder":
        split = {
            "kind": "folders",
            "train": str(data_root),
            "test": None if val_root is None else str(val_root),
        }
    else:
        split = {"kind": "official", "train": "train", "test": "test"}

    labels = dataset_labels(base)
    if num_samples is not None and num_samples < _size(base):
        base = torch.utils.data.Subset(base, list(range(int(num_samples))))
        labels = labels[: int(num_samples)]
        split["num_samples"] = int(num_samples)
    num_classes = int(labels.max()) + 1 if len(labels) else 0
    transform = train_transform(dataset, image_size, channels=channels)
    drawn = TwoViews(base, transform, seed, views=views)
    return TrainingData(dataset, drawn, labels, _size(base), num_classes, split)
