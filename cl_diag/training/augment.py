"""Two-view augmentation recipes (torchvision transforms v2) and the eval transforms.

* CIFAR / ImageFolder: the SimCLR recipe with the values of the paper's code (solo-learn
  ``pretrain_cifar.yaml``; paper-notes 7.1): RandomResizedCrop scale (0.08, 1), colour jitter
  (0.4, 0.4, 0.4, 0.1) with p 0.8 (ImageNet-size images: (0.8, 0.8, 0.8, 0.2)), grayscale p
  0.2, Gaussian blur p 0.5 with sigma ~ U[0.1, 2], horizontal flip p 0.5.
* digits (8x8 grey, too small for 8 % crops; a flipped digit is another digit): a random
  affine warp (shift 15 %, zoom 0.8-1.2, rotation 12°, shear 8°), a contrast scale and pixel
  noise. A 3-channel model sees the digit resized to its side and the grey channel repeated.
  :class:`DigitsViews` draws each image's numbers as torchvision's per-image pipeline did and
  warps a whole batch at once (``TwoViews.__getitems__``), with the same views to the bit.

Randomness comes from the global torch RNG, which :class:`cl_diag.training.data.TwoViews`
seeds per sample. torchvision is imported where a recipe needs it: the digits' steps at 8 px
need none, so neither does an analysis of a digits checkpoint (importing torchvision imports
``torch._dynamo``, over a second).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from torchvision.transforms import v2

__all__ = [
    "DATA_CHANNELS",
    "NORMALISATION",
    "DigitsViews",
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
        # one image (1, H, W) or a batch (N, 1, H, W): the channel axis is the third from last
        return x.expand(*x.shape[:-3], self.channels, *x.shape[-2:]).contiguous()


def _channel_steps(dataset: str, channels: int | None) -> list:
    """What feeds a model of ``channels`` input channels (None: the data's own)."""
    own = DATA_CHANNELS[dataset]
    if channels is None or channels == own:
        return []
    if own == 1:
        return [_RepeatChannels(channels)]
    raise ValueError(f"{dataset} images have {own} channels; cannot feed {channels}")


def _to_float(mean, std) -> list:
    from torchvision.transforms import v2

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
    from torchvision.transforms import v2

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


def _resize(size: int) -> v2.Resize:
    """Resize the short side to ``size`` (bilinear, antialiased)."""
    from torchvision.transforms import v2

    return v2.Resize(size, antialias=True)


class _Normalise:
    """``(x - mean) / std`` per channel, the operations of torchvision's ``normalize`` in its
    order (a float32 subtraction, then a division), so the bits are its bits."""

    def __init__(self, mean: tuple[float, ...], std: tuple[float, ...]):
        self.mean = torch.tensor(mean, dtype=torch.float32).view(-1, 1, 1)
        self.std = torch.tensor(std, dtype=torch.float32).view(-1, 1, 1)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return x.sub(self.mean).div_(self.std)


class _Steps:
    """Transforms applied in order (torchvision's ``Compose``, for the digits' own steps)."""

    def __init__(self, steps: list):
        self.steps = steps

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        for step in self.steps:
            x = step(x)
        return x


class DigitsViews:
    """The digits' view, drawn per image and applied to a whole batch at once.

    One view of an 8x8 grey digit (float ``(1, 8, 8)`` in [0, 1]): resized to ``size`` (bilinear,
    antialiased) when that is not 8, a random affine warp (rotation U[-12°, 12°], shift of a whole
    number of pixels up to 15 % of the side, zoom U[0.8, 1.2], shear U[-8°, 8°]; nearest
    neighbour, zero fill), a contrast scale ``x * U[0.6, 1.2]``, Gaussian pixel noise
    ``clamp(x + 0.1 z, 0, 1)``, the digits' normalisation, and the grey channel repeated to
    ``channels``.

    This is torchvision v2's ``Compose([Resize, RandomAffine(degrees=12, translate=(0.15, 0.15),
    scale=(0.8, 1.2), shear=8), contrast, GaussianNoise(sigma=0.1), Normalize])`` to the bit: the
    same draws from torch's default generator in the same order (:meth:`draw`), and the same float
    operations (:meth:`apply`). Per image, v2 spends about 0.37 ms in dispatch on an 8x8 image;
    drawing per image and warping a batch in one ``grid_sample`` costs a tenth of that, and that
    was most of a digits run. ``tests/test_training_units.py`` checks the equality against v2.
    """

    degrees, translate, zoom, shear = 12.0, 0.15, (0.8, 1.2), 8.0
    contrast, noise_sigma = (0.6, 1.2), 0.1

    def __init__(self, size: int = 8, channels: int = 1):
        self.size, self.channels = int(size), int(channels)
        self.resize = None if self.size == 8 else _resize(self.size)
        self.normalise = _Normalise(*NORMALISATION["digits"])
        self.channel_steps = _channel_steps("digits", self.channels)

    def draw(self) -> tuple[list[float], torch.Tensor, torch.Tensor]:
        """One view's random numbers, drawn as v2 draws them: the affine's inverse matrix, the
        contrast factor (a float32 scalar) and the noise ``(1, size, size)``."""
        side = self.size
        angle = torch.empty(1).uniform_(-self.degrees, self.degrees).item()
        max_shift = float(self.translate * side)
        tx = round(torch.empty(1).uniform_(-max_shift, max_shift).item())
        ty = round(torch.empty(1).uniform_(-max_shift, max_shift).item())
        zoom = torch.empty(1).uniform_(self.zoom[0], self.zoom[1]).item()
        shear = float(torch.empty(1).uniform_(-self.shear, self.shear).item())
        low, high = self.contrast
        factor = low + (high - low) * torch.rand(())
        noise = torch.randn(1, side, side)
        return _inverse_affine(angle, float(tx), float(ty), zoom, shear), factor, noise

    def apply(
        self, images: torch.Tensor, draws: list[tuple[list[float], torch.Tensor, torch.Tensor]]
    ) -> torch.Tensor:
        """The views of ``images`` ``(N, 1, 8, 8)`` under ``draws`` (one per image), ``(N,
        channels, size, size)``."""
        if self.resize is not None:
            images = self.resize(images)
        n, side = len(draws), self.size
        theta = torch.tensor([d[0] for d in draws], dtype=torch.float32).reshape(n, 2, 3)
        # torchvision's _affine_grid: pixel-centred coordinates, theta rescaled to [-1, 1].
        base = torch.empty(1, side, side, 3)
        line = torch.linspace((1.0 - side) * 0.5, (side - 1.0) * 0.5, steps=side)
        base[..., 0].copy_(line)
        base[..., 1].copy_(line.unsqueeze(-1))
        base[..., 2].fill_(1)
        rescaled = theta.transpose(1, 2).div_(torch.tensor([0.5 * side, 0.5 * side]))
        grid = base.view(1, side * side, 3).expand(n, -1, -1).bmm(rescaled).view(n, side, side, 2)
        # The fill is 0: a mask channel marks what came from outside the image.
        warped = torch.nn.functional.grid_sample(
            torch.cat((images, torch.ones_like(images)), dim=1),
            grid,
            mode="nearest",
            padding_mode="zeros",
            align_corners=False,
        )
        warped, mask = torch.tensor_split(warped, indices=(-1,), dim=-3)
        warped = torch.where(mask < 0.5, torch.zeros(1, 1, 1, 1).expand_as(warped), warped)
        factors = torch.stack([d[1] for d in draws]).view(n, 1, 1, 1)
        noise = torch.stack([d[2] for d in draws])
        out = torch.clamp(warped * factors + noise * self.noise_sigma, 0, 1)
        out = self.normalise(out)
        for step in self.channel_steps:
            out = step(out)
        return out

    def __call__(self, image: torch.Tensor) -> torch.Tensor:
        return self.apply(image.unsqueeze(0), [self.draw()])[0]


def _inverse_affine(angle: float, tx: float, ty: float, zoom: float, shear_x: float) -> list[float]:
    """The 2x3 matrix mapping an output pixel to its source for a warp about the image centre
    (rotation ``angle``, shift ``(tx, ty)``, ``zoom``, x-shear ``shear_x``; degrees, pixels).

    torchvision's ``_get_inverse_affine_matrix`` with centre (0, 0) and no y-shear, where its
    divisions by cos(0) = 1 and additions of 0 change no bit: with ``R = [[a, b], [c, d]]``
    the rotation times the shear, the inverse is ``R^-1 / zoom`` (det R = 1) and the shift
    ``-R^-1 t / zoom``.
    """
    rot, tan_shear = math.radians(angle), math.tan(math.radians(shear_x))
    a, c = math.cos(rot), math.sin(rot)
    b = -(a * tan_shear + c)
    d = a - c * tan_shear
    m = [d / zoom, -b / zoom, 0.0, -c / zoom, a / zoom, 0.0]
    # 0.0 + turns a -0.0 shift into +0.0, as torchvision's own sum does: the same bits.
    m[2] = 0.0 + (-m[0] * tx - m[1] * ty)
    m[5] = 0.0 + (-m[3] * tx - m[4] * ty)
    return m


def digits_transform(size: int = 8, channels: int = 1) -> DigitsViews:
    """A view of an 8x8 grey digit (input: float tensor ``(1, 8, 8)`` in [0, 1]), resized to
    ``size`` and repeated to ``channels`` (:class:`DigitsViews`)."""
    return DigitsViews(size, channels)


def train_transform(
    dataset: str, image_size: int | None = None, *, channels: int | None = None
) -> v2.Compose | DigitsViews:
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
) -> v2.Compose | _Steps:
    """The un-augmented view used for features: normalise (and, for large images,
    resize the short side to 8/7 of the crop and centre-crop, the ImageNet convention);
    ``channels``: what the model takes (None: the data's own)."""
    size = image_size or default_image_size(dataset)
    mean, std = NORMALISATION[dataset]
    if dataset == "digits":
        steps = [] if size == 8 else [_resize(size)]
        return _Steps([*steps, _Normalise(mean, std), *_channel_steps(dataset, channels)])
    from torchvision.transforms import v2

    if dataset == "imagefolder":
        resize = [v2.Resize(round(size * 8 / 7), antialias=True), v2.CenterCrop(size)]
    elif size != 32:
        resize = [v2.Resize(size, antialias=True)]
    else:
        resize = []
    return v2.Compose([*resize, *_to_float(mean, std)])
