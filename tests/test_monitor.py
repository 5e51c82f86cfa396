"""cl_diag.Monitor: in-batch pair statistics of any training loop, a row every log_every steps,
no host sync in update, detached, fp32 under autocast, gathered over DDP ranks."""

from __future__ import annotations

import csv
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import cl_diag
import cl_diag.measurement.monitor as monitor_module
from cl_diag.measurement.monitor import EXCESSIVE_COLUMNS, METRIC_COLUMNS, Monitor
from cl_diag.training.loop import METRIC_COLUMNS as LOOP_COLUMNS

STATS = (
    "pos_mean",
    "pos_var",
    "cross_neg_mean",
    "cross_neg_var",
    "cross_neg_excessive_ratio",
    "within_neg_mean",
    "within_neg_var",
    "within_neg_excessive_ratio",
    "vrn",
)


def _batches(sizes, d, seed=0, shift=0.3):
    g = torch.Generator().manual_seed(seed)
    out = []
    for b in sizes:
        z1 = torch.randn(b, d, generator=g) + shift  # a common direction: negatives above 0 too
        out.append((z1, z1 + 0.8 * torch.randn(b, d, generator=g)))
    return out


def _direct(batches, delta):
    """Every pair of every batch in float64 (numpy): the definitions, spelled out."""
    pos, cross, within = [], [], []
    for z1, z2 in batches:
        u = torch.nn.functional.normalize(z1, dim=1).double().numpy()
        v = torch.nn.functional.normalize(z2, dim=1).double().numpy()
        b = len(u)
        s, su, sv = u @ v.T, u @ u.T, v @ v.T
        off, upper = ~np.eye(b, dtype=bool), np.triu(np.ones((b, b), dtype=bool), 1)
        pos += list(np.diag(s))
        cross += list(s[off])
        within += list(su[upper]) + list(sv[upper])
    return {name: np.array(x) for name, x in (("pos", pos), ("cross", cross), ("within", within))}


@pytest.mark.parametrize(
    "b, d, band",
    [(12, 3, None), (5, 16, None), (12, 3, 40)],
    ids=["one band", "d > B", "one row a band"],
)
def test_row_is_the_pooled_statistics_of_every_pair(b, d, band, monkeypatch):
    if band is not None:  # the B x B products a few rows at a time, as for a large batch
        monkeypatch.setattr(monitor_module, "_BAND_SIMILARITIES", (band, band))
    batches = _batches([b, b, b - 2], d)
    delta = 0.05  # a threshold among the values, so the counts are not all or nothing
    direct = _direct(batches, delta)
    for name in ("cross", "within"):  # no similarity so close to delta that fp32 could flip it
        assert np.abs(direct[name] - delta).min() > 1e-5
    mon = Monitor(delta=delta, log_every=3)
    rows = []
    for z1, z2 in batches:
        mon.update(z1, z2)
        rows.append(mon.flush())
    assert rows[:2] == [None, None] and rows[2] is not None
    row = rows[2]
    for key, name in (("pos", "pos"), ("cross_neg", "cross"), ("within_neg", "within")):
        assert row[f"{key}_mean"] == pytest.approx(direct[name].mean(), abs=1e-6)
        assert row[f"{key}_var"] == pytest.approx(direct[name].var(), abs=1e-6)
    for key, name in (("cross_neg", "cross"), ("within_neg", "within")):
        below = int((direct[name] < delta).sum())
        assert 0 < below < len(direct[name])
        assert row[f"{key}_excessive_ratio"] == below / len(direct[name])
    assert row["vrn"] == pytest.approx(np.mean((direct["cross"] - delta) ** 2), rel=1e-5)
    assert row["step"] == 3 and row["seconds"] > 0
    assert row["images_per_s"] == pytest.approx((3 * b - 2) / row["seconds"])


@pytest.mark.parametrize("d", [3, 24], ids=["d x d grams", "B x B products"])
def test_held_steps_give_every_pair_across_full_buffers_and_changing_batches(d, monkeypatch):
    """Without counting, steps are held and added several at a time: rows that span a full
    buffer, a change of batch size, a row boundary inside a buffer, and views the caller changes
    in place after update() all give the statistics of every pair as it was given."""
    monkeypatch.setattr(monitor_module, "_HELD_STEPS", 4)
    sizes = [12] * 6 + [9] * 3 + [12] * 4  # 13 steps: 4 + 2 | 3 (9 rows) | 4
    batches = _batches(sizes, d, seed=2)
    mon = Monitor(delta=-0.1, log_every=0, excessive=False)
    for k, (z1, z2) in enumerate(batches):
        z1, z2 = z1.clone(), z2.clone()
        mon.update(z1, z2, loss=torch.tensor(float(k)))
        z1.mul_(-1)  # the caller reuses its tensors: what was added must not change
        if k == 6:
            first = mon.flush(force=True)  # a row boundary inside a held buffer
    second = mon.flush(force=True)
    for row, part in ((first, batches[:7]), (second, batches[7:])):
        direct = _direct(part, -0.1)
        for key, name in (("pos", "pos"), ("cross_neg", "cross"), ("within_neg", "within")):
            assert row[f"{key}_mean"] == pytest.approx(direct[name].mean(), abs=1e-6)
            assert row[f"{key}_var"] == pytest.approx(direct[name].var(), abs=1e-6)
        assert row["vrn"] == pytest.approx(np.mean((direct["cross"] + 0.1) ** 2), rel=1e-5)
    assert first["loss"] == 3.0 and second["loss"] == 9.5  # means of 0..6 and 7..12
    assert first["step"] == 7 and second["step"] == 13


def test_hand_example_of_excessive_separation():
    # u = v = (e1, -e1, e2): positives 1; cross u0.v1 = u1.v0 = -1, the other four 0;
    # within (each view) u0.u1 = -1, u0.u2 = u1.u2 = 0. delta = -1/(5 - 1) = -0.25.
    z = torch.tensor([[1.0, 0.0], [-2.0, 0.0], [0.0, 3.0]])
    mon = Monitor(n_ref=5, log_every=1)
    mon.update(z, z.clone())
    row = mon.flush()
    assert row["pos_mean"] == 1.0 and row["pos_var"] == 0.0
    assert row["cross_neg_excessive_ratio"] == 2 / 6 and row["within_neg_excessive_ratio"] == 2 / 6
    assert row["cross_neg_mean"] == pytest.approx(-2 / 6)
    # vrn = mean (s + 1/4)^2 over the six cross-view negatives: (2 (3/4)^2 + 4 (1/4)^2) / 6
    assert row["vrn"] == pytest.approx((2 * 0.5625 + 4 * 0.0625) / 6)


def test_update_never_waits_for_the_device_and_flush_reads_once(monkeypatch):
    batches = _batches([8, 8, 8], 4)
    mon = Monitor(n_ref=100, log_every=3)
    calls: list[str] = []
    for name in ("tolist", "item", "__float__", "__int__", "__bool__", "numpy", "cpu"):
        real = getattr(torch.Tensor, name)

        def counted(self, *args, _real=real, _name=name, **kwargs):
            calls.append(_name)
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counted)
    for i, (z1, z2) in enumerate(batches):
        loss = (z1 - z2).pow(2).mean()
        mon.update(z1, z2, loss=loss, lr=0.1 * i)
        if i < 2:
            assert mon.flush() is None
    assert calls == []  # eight updates' worth of work, and not one host sync
    row = mon.flush()
    assert calls == ["tolist"] and row is not None and row["step"] == 3


def test_update_is_detached():
    z1, z2 = (t.requires_grad_() for t in _batches([6], 3)[0])
    mon = Monitor(n_ref=10, log_every=1)
    mon.update(z1, z2, loss=(z1 * z2).sum())
    assert not mon._stats.sums.requires_grad and not mon._stats.below.requires_grad
    (z1 * z2).sum().backward()  # the caller's graph is untouched
    assert z1.grad is not None
    assert not any(isinstance(v, torch.Tensor) for v in mon.flush().values())


def test_statistics_are_fp32_under_autocast():
    z1, z2 = (t.to(torch.bfloat16) for t in _batches([16], 8)[0])
    reference = Monitor(n_ref=50, log_every=1)
    reference.update(z1.float(), z2.float())
    expected = reference.flush()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        # autocast would run a plain matmul in bf16 here: the monitor must not
        assert (z1.float() @ z2.float().T).dtype == torch.bfloat16
        mon = Monitor(n_ref=50, log_every=1)
        mon.update(z1, z2)
    row = mon.flush()
    for key in STATS:
        assert row[key] == expected[key], key


def test_scalars_rows_and_forced_flush():
    mon = Monitor(log_every=3)  # no n_ref: means and variances only
    losses = [0.5, 0.25, 2.0, 1.0, 4.0, 8.0, 3.0]
    rows = []
    for step, ((z1, z2), loss) in enumerate(zip(_batches([4] * 7, 3), losses, strict=True)):
        mon.update(z1, z2, loss=torch.tensor(loss), lr=0.01 * step, accuracy=0.5)
        if (row := mon.flush()) is not None:
            rows.append(row)
    assert [r["step"] for r in rows] == [3, 6]
    assert rows[0]["loss"] == (0.5 + 0.25 + 2.0) / 3 and rows[1]["loss"] == (1.0 + 4.0 + 8.0) / 3
    assert rows[1]["lr"] == 0.05 and rows[1]["accuracy"] == 0.5
    assert [step for step, _ in mon.row_steps] == [4, 5, 6]
    assert mon.flush() is None  # nothing new since the last row
    last = mon.flush(force=True, epoch=2)
    assert last["step"] == 7 and last["epoch"] == 2 and last["loss"] == 3.0
    assert "vrn" not in last and "cross_neg_excessive_ratio" not in last
    assert mon.flush(force=True) is None and len(mon.history) == 3
    # a VRN term the caller computed wins over the statistic
    mon = Monitor(delta=-0.1, log_every=1)
    mon.update(*_batches([4], 3)[0], vrn=torch.tensor(0.75))
    assert mon.flush()["vrn"] == 0.75


def test_to_csv_writes_the_trainers_columns_first(tmp_path):
    assert LOOP_COLUMNS is METRIC_COLUMNS  # one definition
    mon = Monitor(n_ref=20, log_every=2)
    for z1, z2 in _batches([5] * 4, 3):
        mon.update(z1, z2, loss=torch.tensor(1.5), top1=torch.tensor(0.25))
        mon.flush()
    path = mon.to_csv(tmp_path / "metrics.csv")
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    # metrics.csv's columns first, those the rows have (no epoch, contrastive or lr was given:
    # no empty column for them), then the others
    absent = ("epoch", "contrastive", "lr")
    kept = tuple(c for c in METRIC_COLUMNS if c not in absent)
    assert tuple(rows[0]) == (*kept, *EXCESSIVE_COLUMNS, "top1")
    assert [r["step"] for r in rows] == ["2", "4"]
    assert float(rows[1]["loss"]) == 1.5 and float(rows[1]["top1"]) == 0.25
    assert float(rows[1]["cross_neg_var"]) == mon.history[1]["cross_neg_var"]


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: Monitor(n_ref=10, delta=-0.1), "give n_ref or delta, not both"),
        (
            lambda: Monitor(n_ref=1),
            r"n_ref=1 must be at least 2 \(the number of training instances",
        ),
        (lambda: Monitor(delta=2.0), r"delta=2.0 must be in \[-1, 1\] \(a cosine similarity\)"),
        (lambda: Monitor(log_every=-1), r"log_every=-1 must be in \[0, 1000000000000\]"),
        (lambda: Monitor(excessive=True), "excessive=True needs n_ref"),
        (lambda: Monitor().update(torch.ones(4, 3), torch.ones(3, 3)), "the same shape"),
        (lambda: Monitor().update(torch.ones(4), torch.ones(4)), "2-D tensor"),
        (
            lambda: Monitor().update(torch.ones(2, 3), torch.ones(2, 3), loss=torch.ones(2)),
            "single",
        ),
    ],
)
def test_monitor_mistakes(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_a_batch_of_one_has_no_negatives():
    mon = Monitor(n_ref=10, log_every=1)
    mon.update(torch.ones(1, 3), torch.ones(1, 3))
    row = mon.flush()
    assert row["pos_mean"] == pytest.approx(1.0) and math.isnan(row["cross_neg_mean"])
    assert math.isnan(row["cross_neg_excessive_ratio"]) and math.isnan(row["vrn"])


def test_cl_diag_monitor_is_the_monitor():
    assert cl_diag.Monitor is Monitor


# --------------------------------------------------------------------------- DDP (two gloo ranks)

GLOBAL, STEPS = 10, 3


def _ddp_worker(rank: int, world: int, init_file: str, out_dir: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        mon = Monitor(n_ref=100, log_every=STEPS)
        local = slice(rank * GLOBAL // world, (rank + 1) * GLOBAL // world)
        weight = torch.nn.Parameter(torch.eye(4))
        for z1, z2 in _batches([GLOBAL] * STEPS, 4, seed=5):
            p1, p2 = z1[local] @ weight, z2[local] @ weight
            mon.update(p1, p2)  # gathered without gradients: the backward stays local
            (p1 * p2).sum().backward()
        torch.save({"row": mon.flush(), "grad": weight.grad}, os.path.join(out_dir, f"{rank}.pt"))
        dist.barrier()  # neither rank closes its sockets while the other may still read
    finally:
        dist.destroy_process_group()


@pytest.mark.slow  # end to end: the full suite runs it
def test_ddp_rows_are_the_global_batchs(tmp_path):
    mp.spawn(_ddp_worker, args=(2, str(tmp_path / "init"), str(tmp_path)), nprocs=2, join=True)
    ranks = [torch.load(tmp_path / f"{r}.pt", weights_only=True) for r in range(2)]
    single = Monitor(n_ref=100, log_every=STEPS)
    for z1, z2 in _batches([GLOBAL] * STEPS, 4, seed=5):
        single.update(z1, z2)
    expected = single.flush()
    for r in range(2):
        row = ranks[r]["row"]
        assert row["step"] == STEPS and row["images_per_s"] * row["seconds"] == pytest.approx(30)
        for key in STATS:
            assert row[key] == expected[key], (r, key)  # the same rows, so the same numbers
    # each rank's gradient is its own rows' (no gradient through the monitor's gather)
    assert not torch.allclose(ranks[0]["grad"], ranks[1]["grad"])


# --------------------------------------------------------------------------- the lightly example


@pytest.mark.slow
def test_the_lightly_example_logs_rows(tmp_path):
    pytest.importorskip("lightly")
    root = Path(__file__).resolve().parents[1]
    example = root / "docs" / "examples" / "lightly_monitor.py"
    args = ["--steps", "3", "--log-every", "1", "--batch-size", "8", "--images", "16"]
    run = subprocess.run(
        [sys.executable, str(example), *args, "--csv", str(tmp_path / "metrics.csv")],
        capture_output=True,
        text=True,
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = [line for line in run.stdout.splitlines() if line.startswith("step")]
    assert [int(line.split()[1]) for line in lines] == [1, 2, 3]
    with open(tmp_path / "metrics.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    # the example gives the loss only: the trainer's columns it has, none of them empty
    columns = tuple(c for c in METRIC_COLUMNS if c not in ("epoch", "contrastive", "lr"))
    assert tuple(rows[0])[: len(columns)] == columns and len(rows) == 3
    assert all(value != "" for row in rows for value in row.values())
    for row in rows:
        # 8 instances a batch: 56 cross-view negatives, a fraction of them below -1/15
        assert 0 <= float(row["cross_neg_excessive_ratio"]) <= 1 and float(row["loss"]) > 0
