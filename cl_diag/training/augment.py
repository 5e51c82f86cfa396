"""Two-view augmentation recipes (torchvision transforms v2) and the eval transforms.

* CIFAR / ImageFolder: the SimCLR recipe with the values of the paper's code (solo-learn
  ``pretrain_cifar.yaml``; paper-notes 7.1): RandomResizedCrop scale (0.08, 1), colour jitter
  (0.4, 0.4, 0.4, 0.1) with p 0.8 (ImageNet-size images: (0.8, 0.8, 0.8, 0.2)), grayscale p
  0.2, Gaussian blur p 0.5 with sigma ~ U[0.1, 2], horizontal flip p 0.5.
* digits (8x8 grey, too small for 8 % crops; a flipped digit is another digit): a random
  affine warp (shift 15 %, zoom 0.8-1.2, rotation 12°, shear 8°), a contrast scale and pixel
  noise. A 3-channel model sees the digit resized to its side and the grey channel repeated.

Randomness comes from the global torch RNG, which :class:`cl_diag.training.data.TwoViews`
seeds per sample.
"""

from __future__ import annotations

import torch
from torchvision.transforms import v2

__all__ = [
    "DATA_CHANNELS",
    "NORMALISATION",
    "default_image_size",
    "digits_transform",
    "eval_transform",
    "simclr_transform",
    "train_transform",
]

#: Per-channel (mean, std) used by the train and eval transforms.
NORMALISATION: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {
    "digits": ((0.3053,), (0.3760,)),  # of sklearn's digits / 16
    "cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
    "cifar100": ((0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)),
    "imagefolder": ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),  # ImageNet's
}

_IMAGE_SIZE = {"digits": 8, "cifar10": 32, "cifar100": 32, "imagefolder": 224}
#: Channels of each dataset's images (digits are grey).
DATA_CHANNELS = {"digits": 1, "cifar10": 3, "cifar100": 3, "imagefolder": 3}


def default_image_size(dataset: str) -> int:
    """Crop size used when ``--image-size`` is not given."""
    try:
        return _IMAGE_SIZE[dataset]
    except KeyError:
        raise ValueError(f"no image size for dataset {dataset!r}") from None


class _RepeatChannels(torch.nn.Module):
    """A grey image ``(1, H, W)`` as ``channels`` identical channels (a 3-channel model on
    digits)."""

    def __init__(self, channels: int):
        super().__init__()
        self.channels = channels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.expand(self.channels, *x.shape[1:]).contiguous()


def _channel_steps(dataset: str, channels: int | None) -> list:
    """What feeds a model of ``channels`` input channels (None: the data's own)."""
    own = DATA_CHANNELS[dataset]
    if channels is None or channels == own:
        return []
    if own == 1:
        return [_RepeatChannels(channels)]
    raise ValueError(f"{dataset} images have {own} channels; cannot feed {channels}")


def _to_float(mean, std) -> list:
    return [v2.ToImage(), v2.ToDtype(torch.float32, scale=True), v2.Normalize(mean, std)]


def simclr_transform(
    size: int,
    mean=NORMALISATION["cifar10"][0],
    std=NORMALISATION["cifar10"][1],
    *,
    min_scale: float = 0.08,
    jitter: tuple[float, float, float, float] = (0.4, 0.4, 0.4, 0.1),
    jitter_p: float = 0.8,
    grayscale_p: float = 0.2,
    blur_p: float = 0.5,
) -> v2.Compose:
    """SimCLR's view: crop, colour distortion, blur, flip (Chen et al. 2020, App. A).

    The blur kernel is about a tenth of the crop, odd (3 px at 32, 23 px at 224), as in
    SimCLR; sigma ~ U[0.1, 2].
    """
    kernel = max(3, (size // 10) | 1)
    b, c, s, h = jitter
    return v2.Compose(
        [
            v2.RandomResizedCrop(size, scale=(min_scale, 1.0), antialias=True),
            v2.RandomApply([v2.ColorJitter(b, c, s, h)], p=jitter_p),
            v2.RandomGrayscale(p=grayscale_p),
            v2.RandomApply([v2.GaussianBlur(kernel, sigma=(0.1, 2.0))], p=blur_p),
            v2.RandomHorizontalFlip(p=0.5),
            *_to_float(mean, std),
        ]
    )


class _ContrastScale(torch.nn.Module):
    """Multiply the image by a factor ~ U[low, high] (the ink of a grey digit varies)."""

    def __init__(self, low: float, high: float):
        super().__init__()
        self.low, self.high = low, high

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * (self.low + (self.high - self.low) * torch.rand(()))


def digits_transform(size: int = 8, channels: int = 1) -> v2.Compose:
    """A view of an 8x8 grey digit (input: float tensor ``(1, 8, 8)`` in [0, 1]), resized to
    ``size`` and repeated to ``channels``."""
    mean, std = NORMALISATION["digits"]
    return v2.Compose(
        [
            # One affine warp (shift, zoom, rotation, shear) does the work of a resized crop
            # at a third of the per-sample cost on 8x8 images.
            *([] if size == 8 else [v2.Resize(size, antialias=True)]),
            v2.RandomAffine(degrees=12, translate=(0.15, 0.15), scale=(0.8, 1.2), shear=8),
            _ContrastScale(0.6, 1.2),
            v2.GaussianNoise(mean=0.0, sigma=0.1, clip=True),
            v2.Normalize(mean, std),
            *_channel_steps("digits", channels),
        ]
    )


def train_transform(
    dataset: str, image_size: int | None = None, *, channels: int | None = None
) -> v2.Compose:
    """The training augmentation of ``dataset`` (one view; apply twice for two views);
    ``channels``: what the model takes (None: the data's own)."""
    size = image_size or default_image_size(dataset)
    if dataset == "digits":
        return digits_transform(size, channels or 1)
    mean, std = NORMALISATION[dataset]
    if dataset == "imagefolder" and size > 64:
        # SimCLR's ImageNet strength (paper-notes 7.1).
        return simclr_transform(size, mean, std, jitter=(0.8, 0.8, 0.8, 0.2))
    return simclr_transform(size, mean, std)


def eval_transform(
    dataset: str, image_size: int | None = None, *, channels: int | None = None
) -> v2.Compose:
    """The un-augmented view used for features: normalise (and, for large images,
    resize the short side to 8/7 of the crop and centre-crop, the ImageNet convention);
    ``channels``: what the model takes (None: the data's own)."""
    size = image_size or default_image_size(dataset)
    mean, std = NORMALISATION[dataset]
    if dataset == "digits":
        steps = [] if size == 8 else [v2.Resize(size, antialias=True)]
        return v2.Compose([*steps, v2.Normalize(mean, std), *_channel_steps(dataset, channels)])
    if dataset == "imagefolder":
        resize = [v2.Resize(round(size * 8 / 7), antialias=True), v2.CenterCrop(size)]
    elif size != 32:
        resize = [v2.Resize(size, antialias=True)]
    else:
        resize = []
    return v2.Compose([*resize, *_to_float(mean, std)])
