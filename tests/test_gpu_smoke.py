"""benchmarks/gpu_smoke.py cannot rot: its tiny version runs here on the CPU, every phase."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_smoke.py"


def _module():
    spec = importlib.util.spec_from_file_location("gpu_smoke", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_smoke"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_tiny_smoke_runs_every_phase_on_cpu(tmp_path):
    out = tmp_path / "figures.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--tiny", "--device", "cpu", "--json", str(out)],
        env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(out.read_text())
    assert figures["failed"] == [] and figures["sizes"] == "tiny"
    tiny = _module().TINY
    for name in ("train", "train_vrn"):
        run = figures[name]
        assert run["steps"] == tiny.steps and run["batch_size"] == tiny.batch_size
        assert run["precision"] == "fp32"  # autocast is CUDA's; on CPU the trainer runs fp32
        assert run["instances_per_s"] > 0 and run["peak_mib"] >= 0
    # two views of 40 images, then the 40 + 8 probe images by the trained and random-init encoders
    assert figures["analyze"]["images_encoded"] == 2 * 40 + 2 * (40 + 8)
    loops = figures["loops"]
    assert loops["epochs"] == tiny.loop_epochs and loops["precision"] == "fp32"
    assert len(loops["plain_instances_per_s"]) == len(loops["cl_diag_instances_per_s"]) == 2
    assert loops["ratio"] == max(loops["cl_diag_instances_per_s"]) / max(
        loops["plain_instances_per_s"]
    )
    exact = figures["exact"]
    assert exact["n"] == tiny.exact_n and exact["tile"] == tiny.exact_n  # one tile on CPU
    assert exact["fraction_of_gemm"] > 0 and exact["gemm_tflops"] > 0
    assert 0.0 <= exact["excessive_ratio"] <= 1.0
    assert exact["target_seconds"] == 30.0
    sampled = figures["sampled"]
    assert sampled["n"] == tiny.sampled_n and sampled["num_pairs"] == tiny.num_pairs
    moments = figures["moments"]
    assert moments["n"] == tiny.moments_n and moments["num_pairs"] == tiny.num_pairs
    for line in (
        "train_vrn",
        "loops      ResNet-18-CIFAR",
        "analyze",
        "exact      n = 400",
        "sampled    n = 20,000",
        "moments    n = 30,000",
    ):
        assert line in done.stdout, line


def test_a_failing_phase_is_reported_and_the_others_still_run(capsys):
    smoke = _module()
    figures: dict = {}
    failed: list[str] = []

    def broken() -> dict:
        smoke.check(1 + 1 == 3, "arithmetic")
        return {}

    smoke._run_phase("broken", figures, failed, broken)
    smoke._run_phase("fine", figures, failed, lambda: {"pairs_per_s": 1.0})
    assert failed == ["broken"] and figures["fine"] == {"pairs_per_s": 1.0}
    assert "AssertionError: arithmetic" in figures["broken"]["error"]
    assert "[broken] FAILED" in capsys.readouterr().err


def test_synthetic_cifar_reads_through_torchvision_and_the_checksums_are_restored(tmp_path):
    import torchvision

    smoke = _module()
    root = smoke.write_synthetic_cifar10(tmp_path, train=23, test=7)
    official = torchvision.datasets.CIFAR10.train_list
    with smoke.cifar_checksums(root):
        train = torchvision.datasets.CIFAR10(str(root), train=True)
        test = torchvision.datasets.CIFAR10(str(root), train=False)
    assert torchvision.datasets.CIFAR10.train_list == official
    assert len(train) == 23 and len(test) == 7
    assert train.data.shape == (23, 32, 32, 3) and train.targets[:7] == [
        0,
        1,
        2,
        3,
        4,
        0,
        1,
    ]  # 5 per batch
    with pytest.raises(RuntimeError):  # without the patch torchvision refuses the files
        torchvision.datasets.CIFAR10(str(root), train=True)
