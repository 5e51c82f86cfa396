"""The environment fingerprint: what a run's bits depend on besides its inputs, seed and options.

Floating-point training is exact only in one environment: when anything below changes, the
last bits differ and training amplifies them into a new replicate within a few hundred steps
(docs/reproducibility.md). The fingerprint records ``cpu`` (model, machine, the ATen CPU
capability torch dispatches to), ``threads`` (intra-/inter-op, loader workers, torchrun
processes), ``device`` (and for CUDA the GPU, capability, runtime, driver and cuDNN),
``libraries`` (Python, cl-diag, torch with its revision, torchvision, numpy, scipy, numba),
``builds`` (torch's BLAS, LAPACK, oneDNN and parallel backend; numpy's BLAS and SIMD),
``flags`` (determinism, cuDNN modes, TF32, matmul precision) and ``variables``
(:data:`VARIABLES`, None where unset). Nothing in it varies between runs on one machine (no
time, host or path), so an equal fingerprint promises equal bytes. :func:`fingerprint`
collects it; :func:`differences` names the fields two disagree on;
:mod:`cl_diag.report.environment` renders it.
"""

from __future__ import annotations

import functools
import os
import platform
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["VARIABLES", "cpu_model", "differences", "fingerprint", "flatten_fingerprint"]

#: Environment variables that select kernels or thread counts (the values are recorded as set).
VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "ATEN_CPU_CAPABILITY",  # torch's CPU kernel dispatch: default, avx2, avx512, ...
    "ONEDNN_MAX_CPU_ISA",  # oneDNN's own dispatch, which ATEN_CPU_CAPABILITY does not bind
    "DNNL_MAX_CPU_ISA",
    "MKL_CBWR",  # MKL's conditional numerical reproducibility (a fixed code path)
    "OPENBLAS_CORETYPE",
    "CUBLAS_WORKSPACE_CONFIG",  # deterministic cuBLAS needs :4096:8 or :16:8
    "CUDA_VISIBLE_DEVICES",
)


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo's ``model name``, else what the platform says)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as stream:
            for line in stream:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model", "cpu model") and value.strip():
                    return " ".join(value.split())
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _torch_builds(torch: Any) -> dict[str, Any]:
    """The BLAS, LAPACK, oneDNN and parallel backend torch was built with (from its own
    ``torch.__config__`` text, which is fixed for a given build)."""
    shown = torch.__config__.show()
    settings = dict(re.findall(r"\b([A-Z_]+)=([^,\s]*)", shown))
    onednn = re.search(r"MKL-DNN (v[0-9][0-9.]*)", shown)
    backend = re.search(r"ATen parallel backend: (.+)", torch.__config__.parallel_info())
    return {
        "torch_blas": settings.get("BLAS_INFO"),
        "torch_lapack": settings.get("LAPACK_INFO"),
        "torch_onednn": onednn.group(1) if onednn else None,
        "torch_parallel": backend.group(1).strip() if backend else None,
    }


def _numpy_builds() -> dict[str, Any]:
    """numpy's BLAS (name, version) and the SIMD extensions its dispatcher found on this CPU
    (``numpy.show_config(mode="dicts")``, numpy >= 1.26; None where it cannot say)."""
    import numpy as np

    try:
        config = np.show_config(mode="dicts")
    except TypeError:  # numpy < 1.26 only prints its configuration
        config = None
    if not isinstance(config, dict):
        return {"numpy_blas": None, "numpy_simd": None}
    blas = (config.get("Build Dependencies") or {}).get("blas") or {}
    name = " ".join(str(blas[k]) for k in ("name", "version") if blas.get(k))
    simd = (config.get("SIMD Extensions") or {}).get("found")
    return {
        "numpy_blas": name or None,
        "numpy_simd": list(simd) if isinstance(simd, (list, tuple)) else None,
    }


def _cuda(torch: Any, device: Any) -> dict[str, Any] | None:
    """The GPU a CUDA run computed on: name, compute capability, CUDA runtime and driver,
    cuDNN. None for a CPU run."""
    if device is None or getattr(device, "type", str(device)) != "cuda":
        return None
    index = device.index if getattr(device, "index", None) is not None else 0
    major, minor = torch.cuda.get_device_capability(index)
    driver = None
    try:  # the driver's CUDA version (e.g. 12040), as the CUDA driver API reports it
        import ctypes

        version = ctypes.c_int()
        lib = ctypes.CDLL("libcuda.so.1")
        if lib.cuDriverGetVersion(ctypes.byref(version)) == 0:
            driver = f"{version.value // 1000}.{version.value % 1000 // 10}"
    except (OSError, AttributeError):
        driver = None
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {
        "device": torch.cuda.get_device_name(index),
        "capability": f"{major}.{minor}",
        "runtime": torch.version.cuda,
        "driver": driver,
        "cudnn": cudnn,
    }


@functools.cache
def _installed(distribution: str) -> str | None:
    """An installed distribution's version, read from its metadata (importing torchvision or
    scipy only to ask would cost an embeddings analysis seconds), once per process: the
    trainer fingerprints every epoch's checkpoint, and each metadata read walks sys.path
    (7 ms; a toy run's 50 epochs spent a CPU-second on it)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def fingerprint(
    *, device: Any = "cpu", workers: int | None = None, processes: int = 1
) -> dict[str, Any]:
    """The environment of this process as a JSON-ready dict (module docstring).

    ``device``: the ``torch.device`` (or "cpu"/"cuda") the run computes on; ``workers``: its
    data-loader worker processes (None: it has none, e.g. an embeddings file); ``processes``:
    the ranks of a torchrun job (1 otherwise). Keys are always present, in a fixed order, so
    that two fingerprints compare field by field.
    """
    import numpy as np
    import torch

    from cl_diag.version import __version__

    if isinstance(device, str):
        device = torch.device(device)
    matmul = torch.backends.cuda.matmul
    return {
        "cpu": {
            "model": cpu_model(),
            "machine": platform.machine(),
            "aten_capability": torch.backends.cpu.get_cpu_capability(),
        },
        "threads": {
            "intra_op": torch.get_num_threads(),
            "inter_op": torch.get_num_interop_threads(),
            "workers": workers,
            "processes": processes,
        },
        "device": device.type,
        "cuda": _cuda(torch, device),
        "libraries": {
            "python": platform.python_version(),
            "cl_diag": str(__version__),
            "torch": str(torch.__version__),
            "torch_git": str(torch.version.git_version),
            "torchvision": _installed("torchvision"),
            "numpy": str(np.__version__),
            "scipy": _installed("scipy"),
            # the exact pair pass's fused CPU loop is compiled by numba for this CPU
            "numba": _installed("numba"),
        },
        "builds": {**_torch_builds(torch), **_numpy_builds()},
        "flags": {
            "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
            "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
            "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
            "tf32_matmul": bool(matmul.allow_tf32),
            "tf32_cudnn": bool(torch.backends.cudnn.allow_tf32),
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
            "onednn": bool(torch.backends.mkldnn.enabled),
        },
        "variables": {name: os.environ.get(name) for name in VARIABLES},
    }


def flatten_fingerprint(environment: Mapping[str, Any] | None) -> dict[str, Any]:
    """``{"cpu.model": ..., "threads.intra_op": ..., ...}``: one entry per leaf, in order (a
    list stays one value); {} for None."""
    out: dict[str, Any] = {}

    def walk(value: Any, prefix: str) -> None:
        if isinstance(value, Mapping):
            for key, inner in value.items():
                walk(inner, f"{prefix}.{key}" if prefix else str(key))
        else:
            out[prefix] = value

    if environment:
        walk(environment, "")
    return out


def differences(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> list[str]:
    """The dotted fields (``threads.intra_op``, ``cpu.aten_capability``, ...) on which two
    fingerprints disagree, in order; [] when they are equal (and when both are missing)."""
    flat_a, flat_b = flatten_fingerprint(a), flatten_fingerprint(b)
    keys = list(flat_a) + [k for k in flat_b if k not in flat_a]
    return [k for k in keys if flat_a.get(k, _ABSENT) != flat_b.get(k, _ABSENT)]


_ABSENT = object()
