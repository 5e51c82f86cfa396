"""Running frozen encoders over images: two augmented views, or one un-augmented view.

The paper's protocol (Lee et al., ICML 2025, Sec. 6.1; paper-notes 8): training images with
the *training* augmentation twice, the projector output read; the probes read the backbone
output of un-augmented images (App. D). We encode in eval mode (the paper does not say), so a
view's embedding does not depend on its batch. One ``DataLoader`` pass feeds one or more
:class:`Taps` modules, so the trained model, its random-init twin and the raw pixels see the
same augmented batch. On CUDA: ``inference_mode``, fp16 autocast, channels_last, pinned
memory, non-blocking copies. Under ``torchrun`` the batches are dealt over the ranks and
gathered back in batch order, so the views equal the single-process ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from contextlib import nullcontext
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from cl_diag.errors import UserError
from cl_diag.runtime import SINGLE, Ranks, resolve_device

__all__ = [
    "FEATURE_KEYS",
    "Features",
    "Pixels",
    "Taps",
    "encode_images",
    "encode_two_views",
    "sample_indices",
]

#: Raw-pixel features of larger images are area-averaged down to this side, so the pixel
#: baseline stays a few thousand dimensions (CIFAR's 32x32 and digits' 8x8 are unchanged).
PIXEL_SIDE = 32


class Taps(nn.Module):
    """``x -> {"backbone": f(x), "projector": g(f(x))}`` (the projector entry only when given)."""

    def __init__(self, backbone: nn.Module, projector: nn.Module | None = None):
        super().__init__()
        self.backbone, self.projector = backbone, projector

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        features = self.backbone(x).flatten(1)
        out = {"backbone": features}
        if self.projector is not None:
            out["projector"] = self.projector(features)
        return out


#: the keys of a dict an encoder returns that are read as its features, in this order, when
#: no ``output_key`` is given (``pooler_output``: Hugging Face models' pooled features)
FEATURE_KEYS = ("features", "feats", "embedding", "embeddings", "pooler_output")


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


class Features(nn.Module):
    """A user's encoder whose output is made the (B, ...) float features :class:`Taps` reads:

    * a tensor is taken as it is;
    * a tuple or list gives its first element (``(features, logits)``, say);
    * a dict (or a Hugging Face ``ModelOutput``) gives ``output_key``'s value, else the first
      of :data:`FEATURE_KEYS` it holds, else its only tensor;

    and anything else -- one number per image (a 1-D output), integers, a batch of another
    size, a dict without a features key -- is a :class:`UserError` that says what came back.
    An encoder that fails on its input is one too, with the input's shape and its error. The
    projector a user passes is wrapped alike (its input: the encoder's features)."""

    def __init__(
        self,
        encoder: nn.Module,
        output_key: str | None = None,
        *,
        what: str = "encoder",
        fix: str = "Give an encoder that takes such a batch of images (image_size sets the crop).",
    ):
        super().__init__()
        self.encoder, self.output_key, self.what, self.fix = encoder, output_key, what, fix

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        try:
            output = self.encoder(x)
        except (RuntimeError, ValueError, TypeError, IndexError) as exc:
            raise UserError(
                f"The {self.what} failed on its input of shape {tuple(x.shape)}: "
                f"{_first_line(exc)}. {self.fix}"
            ) from None
        return self._features(output, len(x))

    def _features(self, output: Any, batch: int) -> torch.Tensor:
        what, key = self.what, self.output_key
        if isinstance(output, Mapping):
            keys = [str(k) for k in output]
            if key is not None:
                if key not in output:
                    raise UserError(
                        f"The {what} returned a dict without output_key {key!r} (its keys: "
                        f"{', '.join(keys)}). Give one of them as output_key."
                    )
                output = output[key]
            else:
                found = next((k for k in FEATURE_KEYS if k in output), None)
                tensors = [k for k, v in output.items() if isinstance(v, torch.Tensor)]
                if found is None and len(tensors) != 1:
                    raise UserError(
                        f"The {what} returned a dict (keys: {', '.join(keys)}) and none of them "
                        f"is a features key ({', '.join(FEATURE_KEYS)}). Pass output_key= to "
                        "name the one that holds the features."
                    )
                output = output[found if found is not None else tensors[0]]
        elif isinstance(output, (tuple, list)):
            if not output:
                raise UserError(f"The {what} returned an empty {type(output).__name__}.")
            output = output[0]
        if not isinstance(output, torch.Tensor):
            raise UserError(
                f"The {what} returned a {type(output).__name__}, not a tensor of features. Give "
                "an encoder that returns one (or a tuple or dict holding one)."
            )
        if not output.is_floating_point():
            raise UserError(
                f"The {what} returned {output.dtype} values; features must be floating point."
            )
        if output.dim() < 2 or output.shape[0] != batch:
            raise UserError(
                f"The {what} returned shape {tuple(output.shape)} for a batch of {batch} images; "
                f"it must return one feature vector per image, shape ({batch}, d). A 1-D output "
                "is one number per image (a classifier's score?): pass the feature extractor."
            )
        return output


class Pixels(nn.Module):
    """``x -> {"pixels": x flattened}``, larger images area-averaged to ``PIXEL_SIDE``."""

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        if x.dim() == 4 and max(x.shape[-2:]) > PIXEL_SIDE:
            x = F.adaptive_avg_pool2d(x.float(), PIXEL_SIDE)
        return {"pixels": x.flatten(1)}


def sample_indices(n: int, k: int | None, seed: int) -> torch.Tensor:
    """``min(k, n)`` distinct indices of ``range(n)``, uniformly at random under ``seed``,
    sorted; all of ``range(n)`` when ``k`` is None or >= n."""
    if k is None or k >= n:
        return torch.arange(n)
    generator = torch.Generator().manual_seed(int(seed))
    return torch.randperm(n, generator=generator)[:k].sort().values


def _prepare(taps: Mapping[str, nn.Module], device: torch.device) -> dict[str, nn.Module]:
    prepared = {}
    for name, module in taps.items():
        module = module.to(device).eval()
        if device.type == "cuda":
            module = module.to(memory_format=torch.channels_last)
        prepared[name] = module
    return prepared


def _run(
    taps: Mapping[str, nn.Module], x: torch.Tensor, device: torch.device, amp: bool
) -> dict[str, dict[str, torch.Tensor]]:
    x = x.to(device, non_blocking=True)
    if device.type == "cuda" and x.dim() == 4:
        x = x.contiguous(memory_format=torch.channels_last)
    autocast = (
        torch.autocast("cuda", dtype=torch.float16)
        if (amp and device.type == "cuda")
        else nullcontext()
    )
    out = {}
    with autocast:
        for name, module in taps.items():
            out[name] = {layer: y.float().cpu() for layer, y in module(x).items()}
    return out


def _loader(dataset, batch_size: int, workers: int, device: torch.device):
    return torch.utils.data.DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=False,
        num_workers=workers,
        pin_memory=device.type == "cuda",
        drop_last=False,
        persistent_workers=False,
    )


def _shared_pass(
    dataset,
    step: Callable[[Any], Any],
    *,
    batch_size: int,
    workers: int,
    device: torch.device,
    ranks: Ranks,
    progress: Callable[[int], None] | None,
) -> list[Any]:
    """``step(batch)`` for every batch of ``dataset`` (in order, ``batch_size`` items each but
    the last), each rank running its share of the batches; every rank gets all the results,
    in batch order. ``progress`` is told about images so that it reaches ``len(dataset)``
    when this rank is done (ranks progress at about the same pace)."""
    total = len(dataset)
    starts = range(0, total, batch_size)
    mine = ranks.share([min(batch_size, total - start) for start in starts])
    if ranks.distributed:
        # the owned batches back to back: a loader with the same batch size cuts them again
        # exactly (only the very last batch can be short, and it stays last)
        items = [i for k in mine for i in range(starts[k], min(starts[k] + batch_size, total))]
        dataset = torch.utils.data.Subset(dataset, items)
    local = len(dataset)
    done = shown = 0
    results = []
    for batch in _loader(dataset, batch_size, workers, device):
        results.append(step(batch))
        if progress is not None:
            done += len(batch[-1])
            reach = done * total // local
            progress(reach - shown)
            shown = reach
    if not ranks.distributed:
        return results
    everyone = ranks.gather(list(zip(mine, results, strict=True)))
    return [result for _, result in sorted((p for own in everyone for p in own), key=_first)]


def _first(pair: tuple[int, Any]) -> int:
    return pair[0]


def _concat(chunks: list[dict[str, dict[str, torch.Tensor]]]) -> dict[str, dict[str, torch.Tensor]]:
    if not chunks:
        return {}
    return {
        name: {layer: torch.cat([c[name][layer] for c in chunks]) for layer in chunks[0][name]}
        for name in chunks[0]
    }


@torch.inference_mode()
def encode_two_views(
    taps: Mapping[str, nn.Module],
    two_views: torch.utils.data.Dataset,
    indices: Iterable[int],
    *,
    batch_size: int = 512,
    device: str | torch.device | None = None,
    workers: int = 0,
    amp: bool = True,
    progress: Callable[[int], None] | None = None,
    ranks: Ranks | None = None,
) -> tuple[dict[str, dict[str, tuple[torch.Tensor, ...]]], torch.Tensor]:
    """Encode both augmented views of the given instances through every tap.

    ``two_views[i]`` must return ``(index, view1, view2, label)`` with the views a pure
    function of ``i`` (cl-diag's ``TwoViews`` seeds each sample's augmentation), so the
    result does not depend on ``batch_size`` or ``workers``. Returns
    ``{tap: {layer: (z1, z2)}}`` with row k of ``z1`` and ``z2`` the two views of
    ``indices[k]``, and the labels in the same order. ``ranks``: under ``torchrun``, each
    rank encodes its share of the batches and every rank gets all rows (module docstring).
    Items ``(index, view1, ..., viewV, label)`` (``TwoViews(views=V)``) give V-tuples
    ``(z1, ..., zV)``.
    """
    device = resolve_device(device)
    modules = _prepare(taps, device)
    subset = torch.utils.data.Subset(two_views, [int(i) for i in indices])

    def step(batch):
        _, *images, y = batch
        return (*(_run(modules, x, device, amp) for x in images), torch.as_tensor(y))

    done = _shared_pass(
        subset,
        step,
        batch_size=batch_size,
        workers=workers,
        device=device,
        ranks=ranks or SINGLE,
        progress=progress,
    )
    count = len(done[0]) - 1 if done else 2
    per_view = [_concat([d[k] for d in done]) for k in range(count)]
    labels = [d[-1] for d in done]
    a = per_view[0]
    views = {
        name: {layer: tuple(z[name][layer] for z in per_view) for layer in a[name]} for name in a
    }
    return views, torch.cat(labels) if labels else torch.empty(0, dtype=torch.int64)


@torch.inference_mode()
def encode_images(
    taps: Mapping[str, nn.Module],
    dataset: torch.utils.data.Dataset,
    indices: Iterable[int] | None = None,
    *,
    batch_size: int = 512,
    device: str | torch.device | None = None,
    workers: int = 0,
    amp: bool = True,
    progress: Callable[[int], None] | None = None,
    ranks: Ranks | None = None,
) -> tuple[dict[str, dict[str, torch.Tensor]], torch.Tensor]:
    """Encode ``(image, label)`` items (e.g. the un-augmented eval view) through every tap.

    Returns ``{tap: {layer: features}}`` (float32, CPU) and the labels, in dataset order
    (or the order of ``indices``). ``ranks``: as for :func:`encode_two_views`.
    """
    device = resolve_device(device)
    modules = _prepare(taps, device)
    if indices is not None:
        dataset = torch.utils.data.Subset(dataset, [int(i) for i in indices])

    def step(batch):
        x, y = batch
        return _run(modules, x, device, amp), torch.as_tensor(y)

    done = _shared_pass(
        dataset,
        step,
        batch_size=batch_size,
        workers=workers,
        device=device,
        ranks=ranks or SINGLE,
        progress=progress,
    )
    chunks = [d[0] for d in done]
    labels = [d[1] for d in done]
    return _concat(chunks), torch.cat(labels) if labels else torch.empty(0, dtype=torch.int64)
