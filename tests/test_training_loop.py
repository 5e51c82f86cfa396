"""The loop: metrics rows every --log-every steps, no host sync in between, VRN logged from the
pair statistics, progress through a callback the caller supplies."""

from __future__ import annotations

import csv
import io
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from rich.console import Console

import cl_diag.measurement.monitor as monitor
import cl_diag.training.loop as loop
from cl_diag.cli.progress import TrainDisplay, progress_bar, row_line
from cl_diag.losses import LOSSES
from cl_diag.models import build_model
from cl_diag.orchestration.train import TrainConfig, train
from cl_diag.training.checkpoint import load_checkpoint
from cl_diag.training.loop import METRIC_COLUMNS, BatchPairMoments

ROOT = Path(__file__).resolve().parents[1]
# 8 free vectors in batches of 2: 4 steps an epoch, 8 steps = 2 epochs
TOY = dict(dataset="toy", num_samples=8, dim=3, batch_size=2, steps=8, lr=0.5, seed=1, vrn=3.0)


def _run(tmp_path: Path, name: str, **options) -> tuple:
    out = tmp_path / name
    result = train(TrainConfig(**{**TOY, **options, "out": str(out)}))
    return result, load_checkpoint(out / "last.pt"), out


def test_log_every_sets_the_rows_and_changes_nothing_computed(tmp_path):
    per_epoch, ck_epoch, _ = _run(tmp_path, "epoch")
    every3, ck3, out3 = _run(tmp_path, "every3", log_every=3)
    every1, ck1, _ = _run(tmp_path, "every1", log_every=1)
    assert [(r["epoch"], r["step"]) for r in per_epoch.history] == [(1, 4), (2, 8)]
    # a row every 3rd step and at each epoch end
    assert [(r["epoch"], r["step"]) for r in every3.history] == [(1, 3), (1, 4), (2, 6), (2, 8)]
    expected = [((s + 3) // 4, s) for s in range(1, 9)]
    assert [(r["epoch"], r["step"]) for r in every1.history] == expected
    with open(out3 / "metrics.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert tuple(rows[0]) == METRIC_COLUMNS and [int(r["step"]) for r in rows] == [3, 4, 6, 8]
    # how often the host looks changes no weight
    for ck in (ck3, ck1):
        assert torch.equal(ck["backbone"]["weight"], ck_epoch["backbone"]["weight"])
    # the epoch row is the mean of its steps' values (equal batches: pooled = mean of per-step)
    for epoch in (1, 2):
        row = per_epoch.history[epoch - 1]
        steps = [r for r in every1.history if r["epoch"] == epoch]
        for key in ("loss", "contrastive", "vrn", "cross_neg_mean", "pos_mean", "within_neg_mean"):
            mean = sum(r[key] for r in steps) / 4
            assert row[key] == pytest.approx(mean, rel=1e-12, abs=1e-15), key
        second = sum(r["cross_neg_var"] + r["cross_neg_mean"] ** 2 for r in steps) / 4
        pooled = second - row["cross_neg_mean"] ** 2
        assert row["cross_neg_var"] == pytest.approx(pooled, rel=1e-9)
        assert row["loss"] == pytest.approx(row["contrastive"] + 3 * row["vrn"], rel=1e-6)


@pytest.mark.parametrize("power", [2.0, 3.0])
def test_logged_vrn_without_the_regulariser_is_the_vrn_loss(tmp_path, power):
    """--vrn 0: for p = 2 the logged VRN comes from the pair statistics (var + (mean - delta)^2),
    otherwise it is computed; either way it is the loss library's VRN of the batch."""
    n = 6  # one full batch: the first step sees the initial vectors, in some order
    options = dict(
        dataset="toy", num_samples=n, dim=4, batch_size=n, steps=1, vrn=0.0, vrn_power=power, seed=2
    )
    result = train(TrainConfig(**options, out=str(tmp_path / "run")))
    z1, z2 = build_model(TrainConfig(**options), seed=2).backbone.views()
    expected = LOSSES["vrn"](z1, z2, delta=-1 / (n - 1), power=power)
    row = result.history[0]
    assert row["vrn"] == pytest.approx(float(expected), rel=1e-6)
    u, v = torch.nn.functional.normalize(z1, dim=1), torch.nn.functional.normalize(z2, dim=1)
    cross = (u @ v.T)[~torch.eye(n, dtype=torch.bool)].double()
    assert row["cross_neg_mean"] == pytest.approx(float(cross.mean()), abs=1e-7)
    assert row["cross_neg_var"] == pytest.approx(float(cross.var(unbiased=False)), abs=1e-7)


def test_fit_syncs_with_the_host_once_per_row_not_per_step(tmp_path, monkeypatch):
    calls: list[str] = []
    for name in ("tolist", "item", "__float__", "__int__", "__bool__", "numpy"):
        real = getattr(torch.Tensor, name)

        def counted(self, *args, _real=real, _name=name, **kwargs):
            caller = sys._getframe(1)
            # the sampler's per-epoch permutation is host data, not a wait for the device
            here = caller.f_globals.get("__name__") in (loop.__name__, monitor.__name__)
            if here and caller.f_code.co_name != "__iter__":
                calls.append(f"{_name} in {caller.f_code.co_name}")
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counted)
    result, _, _ = _run(tmp_path, "epoch")
    assert len(result.history) == 2
    # per row: the loss terms and the pair statistics, read together by the monitor (the one
    # reader of a training loop's rows); nothing per step
    assert calls == ["tolist in _close"] * 2
    calls.clear()
    result, _, _ = _run(tmp_path, "every2", log_every=2)
    assert len(result.history) == 4 and len(calls) == 4


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def start(self, *, total_steps: int, done_steps: int, epochs: int) -> None:
        self.calls.append(("start", total_steps, done_steps, epochs))

    def step(self, step: int, epoch: int) -> None:
        self.calls.append(("step", step, epoch))

    def row(self, row: dict) -> None:
        self.calls.append(("row", row))


def test_progress_goes_to_the_callback_and_nothing_is_printed(tmp_path, capsys):
    recorder = Recorder()
    options = TrainConfig(**{**TOY, "steps": 6, "log_every": 3}, out=str(tmp_path / "r"))
    result = train(options, progress=recorder)
    assert recorder.calls[0] == ("start", 6, 0, 2)
    steps = [c[1:] for c in recorder.calls if c[0] == "step"]
    assert steps == [(1, 1), (2, 1), (3, 1), (4, 1), (5, 2), (6, 2)]
    rows = [c[1] for c in recorder.calls if c[0] == "row"]
    assert rows == result.history and [r["step"] for r in rows] == [3, 4, 6]
    # a row is reported right after the step that closes it
    kinds = [c[0] if c[0] != "step" else c[1] for c in recorder.calls]
    assert kinds == ["start", 1, 2, 3, "row", 4, "row", 5, 6, "row"]
    assert capsys.readouterr().out == ""


def test_train_display_plain_lines_and_bar():
    row = {"epoch": 1, "step": 2, "loss": 1.23456, "vrn": 0.5, "lr": 0.25, "images_per_s": 99.6}
    assert row_line(row, 3) == "epoch 1/3  step 2  loss 1.2346  vrn 0.5  lr 0.25  100 img/s"
    console = Console(file=io.StringIO(), force_terminal=True, width=200)
    with progress_bar(console) as bar:
        display = TrainDisplay(bar, label="cell")
        display.start(total_steps=10, done_steps=4, epochs=5)
        (task,) = bar.tasks
        assert (task.total, task.completed) == (10, 4)
        display.step(5, 3)
        display.row(row)
        assert task.completed == 5 and task.description == "cell epoch 3/5"
        assert task.fields["details"] == "loss 1.2346  vrn 0.5  lr 0.25  100 img/s"
        display.finish()
        assert bar.tasks == []


def test_cli_log_every(run_cli, tmp_path):
    args = [
        "train",
        "--dataset",
        "toy",
        "--num-samples",
        "4",
        "--batch-size",
        "2",
        "--steps",
        "4",
        "--quiet",
    ]
    r = run_cli(*args, "--log-every", "1", "--out", tmp_path / "a")
    assert r.code == 0, r.err
    assert [line.split("  loss")[0] for line in r.out.splitlines() if line.startswith("epoch")] == [
        "epoch 1/2  step 1",
        "epoch 1/2  step 2",
        "epoch 2/2  step 3",
        "epoch 2/2  step 4",
    ]
    r = run_cli(*args, "--log-every", "-1", "--out", tmp_path / "b")
    assert (
        r.code == 2
        and "--log-every -1 must be in [0, 1000000000000]" in r.err
        and not (tmp_path / "b").exists()
    )


def test_one_progress_setup_and_no_display_in_training():
    sources = {p: p.read_text() for p in (ROOT / "cl_diag").rglob("*.py")}
    bars = [p.relative_to(ROOT).as_posix() for p, t in sources.items() if "rich.progress" in t]
    assert bars == ["cl_diag/cli/progress.py"]  # the one place a progress bar is built
    for path, text in sources.items():
        if "training" in path.parts:
            assert not re.search(r"(from|import) rich|\bprint\(|isatty", text), path


@pytest.mark.parametrize("b, d", [(8, 3), (4, 16)], ids=["d x d products", "B x B products"])
def test_pair_stats_both_ways_match_direct_computation_and_give_vrn(b, d):
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(b, d, generator=g), torch.randn(b, d, generator=g)) for _ in range(3)]
    stats = BatchPairMoments()
    cross, within, pos = [], [], []
    for z1, z2 in batches:
        stats.update(z1, z2)
        u = torch.nn.functional.normalize(z1, dim=1).double().numpy()
        v = torch.nn.functional.normalize(z2, dim=1).double().numpy()
        s, su, sv = u @ v.T, u @ u.T, v @ v.T
        off, upper = ~np.eye(b, dtype=bool), np.triu(np.ones((b, b), dtype=bool), 1)
        cross += list(s[off])
        within += list(su[upper]) + list(sv[upper])
        pos += list(np.diag(s))
    delta = -0.01
    r = stats.result(vrn_delta=delta)
    for key, values in (("pos", pos), ("cross_neg", cross), ("within_neg", within)):
        assert r[f"{key}_mean"] == pytest.approx(np.mean(values), abs=1e-6)
        assert r[f"{key}_var"] == pytest.approx(np.var(values), abs=1e-6)
    per_batch = [float(LOSSES["vrn"](z1, z2, delta=delta, power=2)) for z1, z2 in batches]
    assert r["vrn"] == pytest.approx(np.mean(per_batch), rel=1e-5)
    assert r["vrn"] == pytest.approx(np.var(cross) + (np.mean(cross) - delta) ** 2, rel=1e-6)


@pytest.mark.slow
def test_checkpoints_of_one_step_epochs_are_written_every_fifty_steps(tmp_path, monkeypatch):
    # free embeddings on their full batch train one step an epoch: last.pt is written after the
    # first epoch, once 50 steps have passed since the last write, at every save_every epoch
    # and at the end, the same epochs on every machine, and the weights do not depend on it
    written: list[tuple[str, int]] = []
    real = loop.save_checkpoint

    def save(path, checkpoint):
        written.append((Path(path).name, checkpoint["epoch"]))
        real(path, checkpoint)

    monkeypatch.setattr(loop, "save_checkpoint", save)
    assert loop.CHECKPOINT_STEPS == 50
    full = dict(num_samples=4, batch_size=4, steps=130, vrn=0.0)
    _, ck, out = _run(tmp_path, "full", **full)
    assert written == [("last.pt", e) for e in (1, 51, 101, 130)]
    assert ck["epoch"] == 130 and ck["complete"]
    with open(out / "metrics.csv") as handle:
        assert len(list(csv.DictReader(handle))) == 130  # every epoch's row, written at the end
    written.clear()
    _, again, _ = _run(tmp_path, "every40", **full, save_every=40)
    assert written == [
        ("last.pt", 1), ("last.pt", 40), ("epoch_0040.pt", 40), ("last.pt", 80),
        ("epoch_0080.pt", 80), ("last.pt", 120), ("epoch_0120.pt", 120), ("last.pt", 130),
    ]  # fmt: skip
    assert torch.equal(again["embeddings"]["z1"], ck["embeddings"]["z1"])
    # an epoch of 50 steps or more (any data set) writes at every end
    written.clear()
    _run(tmp_path, "long", num_samples=100, batch_size=2, steps=150, vrn=0.0)
    assert written == [("last.pt", e) for e in (1, 2, 3)]
