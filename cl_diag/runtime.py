"""Where a command runs: its device, its DataLoader workers, and its place among the ranks of a
``torchrun`` job -- one module for what ``train``, ``analyze`` and the measurements share.

:func:`resolve_device` turns ``--device`` into a ``torch.device`` (a UserError when CUDA is
asked for and absent), :func:`resolve_workers` the DataLoader workers (none on a CPU, up to 8
on CUDA), :func:`amp_dtype` the autocast dtype. :class:`Runtime` is a process's device and
:class:`Ranks`; :meth:`Runtime.start` joins the process group torchrun describes (NCCL on
CUDA, gloo on CPU).

:class:`Ranks` spreads work so that the result does not depend on the number of ranks K: the
measurements that visit every pair and the encoding of the views are lists of independent
*tasks* (a tile, a batch), each identified by its place in the single-process order;
:meth:`Ranks.share` gives each rank a fixed subset, each computes its tasks as one process
would, :meth:`Ranks.gather` hands every rank all partial results, and the caller reduces them
*in task order* (float64 sums sorted by task key, integer counts, batches concatenated), so K
ranks give the same bits as one. Only picklable objects are exchanged; ``world == 1`` needs
no process group.
"""

from __future__ import annotations

import gc
import hashlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from cl_diag.errors import UserError
from cl_diag.options import DEVICES, MAX_WORKERS

__all__ = [
    "DEVICES",
    "MAX_WORKERS",
    "SINGLE",
    "Ranks",
    "RanksMismatch",
    "Runtime",
    "amp_dtype",
    "default_workers",
    "resolve_device",
    "resolve_workers",
    "tensor_fingerprint",
]

# --------------------------------------------------------------------------- device, workers


def resolve_device(device: str | torch.device | None) -> torch.device:
    """``None``/``"auto"``: CUDA when available, else CPU; ``"cuda"`` without a CUDA device
    is a :class:`UserError` (what ``--device cuda`` on a CPU machine gets)."""
    if device is None or str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    resolved = torch.device(device)
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise UserError(
            "--device cuda was given but torch sees no CUDA device; use --device cpu (or auto)."
        )
    return resolved


def default_workers(device_type: str) -> int:
    """DataLoader workers when none are given: up to 8 on CUDA (they feed the GPU), none on a
    CPU (the loading would take the cores the model computes on)."""
    return min(8, os.cpu_count() or 1) if device_type == "cuda" else 0


def resolve_workers(workers: int | None, device_type: str) -> int:
    """``--workers`` as given, or :func:`default_workers` of the device when None."""
    return workers if workers is not None else default_workers(device_type)


def amp_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype for ``--precision`` (None: full fp32).

    ``auto``: bf16 on CUDA devices that support it, fp16 (with a GradScaler) on older
    CUDA devices, fp32 on CPU.
    """
    if precision == "auto":
        if device.type != "cuda":
            return None
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]


# --------------------------------------------------------------------------- ranks


class RanksMismatch(ValueError):
    """The ranks of one job were given different inputs (they must all hold the same views)."""


@dataclass(frozen=True)
class Ranks:
    """This process's place in a job: ``rank`` of ``world`` processes (0 of 1 alone)."""

    rank: int = 0
    world: int = 1

    def __post_init__(self) -> None:
        if self.world < 1 or not 0 <= self.rank < self.world:
            raise ValueError(f"rank {self.rank} of world {self.world} is not a valid place.")

    @classmethod
    def of_process_group(cls) -> Ranks:
        """The default process group's rank and size, or 0 of 1 when none is initialised."""
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return cls(dist.get_rank(), dist.get_world_size())
        return cls()

    @property
    def distributed(self) -> bool:
        return self.world > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def share(self, costs: Sequence[float]) -> list[int]:
        """The indices of the tasks this rank runs, ascending.

        Tasks are dealt in order, each to the rank with the least cost so far (ties to the
        lowest rank): a pure function of ``costs`` and ``world``, so every rank computes the
        same deal without talking, and uneven tasks (a diagonal similarity tile does three
        matmuls, an off-diagonal one below it one) still spread evenly.
        """
        if self.world == 1:
            return list(range(len(costs)))
        load = [0.0] * self.world
        mine = []
        for index, cost in enumerate(costs):
            owner = min(range(self.world), key=lambda r: (load[r], r))
            load[owner] += float(cost)
            if owner == self.rank:
                mine.append(index)
        return mine

    def gather(self, obj: Any) -> list[Any]:
        """Every rank's ``obj``, in rank order, on every rank (``[obj]`` alone)."""
        if self.world == 1:
            return [obj]
        import torch.distributed as dist

        out: list[Any] = [None] * self.world
        dist.all_gather_object(out, obj)
        return out

    def check_same(self, what: str, fingerprint: Callable[[], Any]) -> None:
        """Raise :class:`RanksMismatch` on every rank unless ``fingerprint()`` (a digest of
        this rank's inputs, computed only when there are other ranks) is equal on all ranks
        (one collective; nothing alone).

        Work split over ranks assumes each rank holds the same inputs; different ones (each
        rank's own shard, say) would be merged into a silently wrong result.
        """
        if self.world == 1:
            return
        prints = self.gather(fingerprint())
        if any(p != prints[0] for p in prints[1:]):
            raise RanksMismatch(
                f"the {self.world} ranks hold different {what}; every rank must pass the same "
                "full inputs (the work is split over the ranks here, not by the caller)."
            )


#: one process, no communication
SINGLE = Ranks()


@dataclass
class Runtime:
    """Where this process computes: its ``device`` and its place among the ``ranks``."""

    device: torch.device
    ranks: Ranks = field(default_factory=Ranks)

    @property
    def rank(self) -> int:
        return self.ranks.rank

    @property
    def world(self) -> int:
        return self.ranks.world

    @property
    def distributed(self) -> bool:
        return self.ranks.distributed

    @property
    def is_main(self) -> bool:
        return self.ranks.is_main

    @classmethod
    def start(cls, device_type: str) -> Runtime:
        """The device, and (under ``torchrun``) an initialised process group.

        ``device_type`` is ``cpu`` or ``cuda`` (``--device`` resolved). torchrun's
        ``WORLD_SIZE``/``RANK``/``LOCAL_RANK`` select DDP (env:// init; NCCL on CUDA, gloo
        on CPU); a process group the caller initialised is joined as it is.
        """
        if device_type not in ("cpu", "cuda"):
            raise ValueError(f"device_type must be 'cpu' or 'cuda', got {device_type!r}")
        use_cuda = device_type == "cuda"
        world = int(os.environ.get("WORLD_SIZE", "1"))
        if world <= 1:
            return cls(torch.device(device_type))
        import torch.distributed as dist

        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        if use_cuda:
            torch.cuda.set_device(local_rank)
        if not dist.is_initialized():
            dist.init_process_group(backend="nccl" if use_cuda else "gloo", init_method="env://")
        dev = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
        return cls(dev, Ranks(dist.get_rank(), dist.get_world_size()))

    def close(self, *, wait: bool) -> None:
        """Leave the process group :meth:`start` joined (nothing for one process).

        ``wait``: the run ended normally on this rank, so every rank first meets at a barrier
        and none closes its sockets while another may still read from them (gloo aborts a
        process whose peer resets a connection mid-message: "terminate called without an
        active exception"). After an exception pass False: the other ranks may never arrive,
        and waiting for them would hang the job instead of ending it."""
        if self.distributed:
            import torch.distributed as dist

            if dist.is_initialized():
                # DDP's reducers sit in reference cycles; unless collected now they (and the
                # gloo work they hold) are freed during interpreter finalisation, when a gloo
                # thread that needs the interpreter aborts the process
                gc.collect()
                if wait:
                    dist.barrier()
                dist.destroy_process_group()


def tensor_fingerprint(*tensors: torch.Tensor | None) -> str:
    """A digest of the tensors' shapes, dtypes and bytes, to check that ranks agree.

    Hashing the bytes (moved to the CPU) is O(size) and exact: any differing element, or
    the same rows in another order, changes it.
    """
    digest = hashlib.sha256()
    for t in tensors:
        if t is None:
            digest.update(b"none")
            continue
        t = t.detach().contiguous().cpu()
        digest.update(f"{tuple(t.shape)}{t.dtype}".encode())
        digest.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()
