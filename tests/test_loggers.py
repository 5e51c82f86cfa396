"""Where the monitor's rows go (cl_diag.io.loggers): CSV with no empty column, TensorBoard event
files that hold the rows' numbers, W&B against a fake ``wandb`` module (no network, no package),
and ``cl-diag train --logger`` end to end on the toy recipe."""

from __future__ import annotations

import csv
import math
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import torch

from cl_diag.errors import UserError
from cl_diag.io import loggers
from cl_diag.io.loggers import (
    CsvLogger,
    RowLogger,
    TensorBoardLogger,
    WandbLogger,
    csv_columns,
    require_logger,
    write_rows_csv,
)
from cl_diag.measurement.monitor import EXCESSIVE_COLUMNS, METRIC_COLUMNS, Monitor


def _read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _views(steps: int, b: int = 6, d: int = 4) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(3)
    out = []
    for _ in range(steps):
        z1 = torch.randn(b, d, generator=g)
        out.append((z1, z1 + 0.3 * torch.randn(b, d, generator=g)))
    return out


def _scalars(log_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar in the event files under ``log_dir``, read back with TensorBoard's own
    reader, as {tag: [(step, value), ...]}."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(log_dir))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


# --------------------------------------------------------------------------- CSV


def test_columns_no_row_fills_are_left_out():
    rows = [{"step": 1, "lr": None, "loss": 2.0}, {"step": 2, "loss": 1.0, "extra": 5}]
    assert csv_columns(rows, leading=("epoch", "step", "lr", "loss")) == ["step", "loss", "extra"]


def test_a_monitor_csv_has_no_empty_column(tmp_path):
    # the case: a Monitor given neither epoch, lr nor a contrastive term
    mon = Monitor(n_ref=30, log_every=2)
    for z1, z2 in _views(4):
        mon.update(z1, z2, loss=torch.tensor(0.5))
        mon.flush()
    rows = _read_csv(mon.to_csv(tmp_path / "metrics.csv"))
    header = list(rows[0])
    assert "epoch" not in header and "contrastive" not in header and "lr" not in header
    expected = [c for c in METRIC_COLUMNS if c not in ("epoch", "contrastive", "lr")]
    assert header == [*expected, *EXCESSIVE_COLUMNS]
    assert len(rows) == 2 and all(value != "" for row in rows for value in row.values())
    assert float(rows[1]["cross_neg_var"]) == mon.history[1]["cross_neg_var"]
    # given the epoch and lr, their columns are there, in metrics.csv's order, filled
    mon = Monitor(n_ref=30, log_every=1)
    z1, z2 = _views(1)[0]
    mon.update(z1, z2, lr=0.1, loss=torch.tensor(0.5), contrastive=torch.tensor(0.5))
    mon.flush(epoch=1)
    rows = _read_csv(mon.to_csv(tmp_path / "full.csv"))
    assert tuple(rows[0]) == (*METRIC_COLUMNS, *EXCESSIVE_COLUMNS)
    assert rows[0]["epoch"] == "1" and float(rows[0]["lr"]) == 0.1


def test_the_csv_logger_writes_what_to_csv_writes(tmp_path):
    logger = CsvLogger(tmp_path / "live.csv", leading=METRIC_COLUMNS + EXCESSIVE_COLUMNS)
    assert isinstance(logger, RowLogger)
    mon = Monitor(n_ref=30, log_every=2, logger=logger)
    for i, (z1, z2) in enumerate(_views(6)):
        mon.update(z1, z2, loss=torch.tensor(1.0 + i))
        if mon.flush() is not None:
            # the file is complete after every row
            assert len(_read_csv(logger.path)) == len(mon.history)
    logger.close()
    assert logger.path.read_bytes() == mon.to_csv(tmp_path / "after.csv").read_bytes()
    assert [float(r["loss"]) for r in _read_csv(logger.path)] == [1.5, 3.5, 5.5]


def test_a_row_missing_a_value_others_have_gets_one_empty_cell(tmp_path):
    path = write_rows_csv(tmp_path / "m.csv", [{"step": 1, "q": 0.5}, {"step": 2}])
    assert path.read_text() == "step,q\n1,0.5\n2,\n"


# --------------------------------------------------------------------------- TensorBoard


def test_tensorboard_event_files_hold_the_rows(tmp_path):
    pytest.importorskip("tensorboard")
    logger = TensorBoardLogger(tmp_path / "tb")
    mon = Monitor(n_ref=30, log_every=2, logger=logger)
    for i, (z1, z2) in enumerate(_views(6)):
        mon.update(z1, z2, lr=0.25, loss=torch.tensor(2.0 - 0.25 * i))
        mon.flush(epoch=1)
    logger.close()
    scalars = _scalars(tmp_path / "tb")
    assert "cl_diag/step" not in scalars  # the step is the x axis
    for key in ("loss", "lr", "epoch", "pos_mean", "cross_neg_var", "within_neg_excessive_ratio"):
        got = scalars[f"cl_diag/{key}"]
        assert [step for step, _ in got] == [2, 4, 6], key
        for (_, value), row in zip(got, mon.history, strict=True):
            assert value == pytest.approx(row[key], rel=1e-6, abs=1e-7), key  # float32 on disk
    assert [v for _, v in scalars["cl_diag/loss"]] == [1.875, 1.375, 0.875]


def test_tensorboard_hides_what_a_killed_attempt_logged_past_the_checkpoint(tmp_path):
    pytest.importorskip("tensorboard")
    first = TensorBoardLogger(tmp_path / "tb", purge_step=1)
    for step in (1, 2, 3, 4):
        first.log({"loss": float(step)}, step)
    first.close()
    # resumed from a checkpoint at step 2: steps 3 and 4 are trained again
    second = TensorBoardLogger(tmp_path / "tb", purge_step=3)
    for step in (3, 4):
        second.log({"loss": 10.0 * step}, step)
    second.close()
    assert _scalars(tmp_path / "tb")["cl_diag/loss"] == [(1, 1.0), (2, 2.0), (3, 30.0), (4, 40.0)]


# --------------------------------------------------------------------------- W&B (a fake module)


class FakeRun:
    def __init__(self, **init: Any) -> None:
        self.init = init
        self.logged: list[tuple[int, dict[str, float]]] = []
        self.finished = 0

    def log(self, data: dict[str, float], step: int) -> None:
        self.logged.append((step, dict(data)))

    def finish(self) -> None:
        self.finished += 1


@pytest.fixture
def fake_wandb(monkeypatch):
    """A stand-in ``wandb`` module in sys.modules: ``init`` returns a :class:`FakeRun` and
    remembers it (the mode is W&B's own business, read from the environment)."""
    module = types.ModuleType("wandb")
    module.runs = []  # type: ignore[attr-defined]

    def init(**kwargs: Any) -> FakeRun:
        run = FakeRun(**kwargs)
        module.runs.append(run)  # type: ignore[attr-defined]
        return run

    module.init = init  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "wandb", module)
    return module


def test_wandb_logger_logs_each_row_at_its_step(fake_wandb, tmp_path):
    logger = WandbLogger(project="p", name="n", dir=tmp_path / "w", config={"loss": "simclr"})
    (run,) = fake_wandb.runs
    assert run.init == {
        "project": "p",
        "name": "n",
        "dir": str(tmp_path / "w"),
        "config": {"loss": "simclr"},
    }
    assert (tmp_path / "w").is_dir()  # W&B writes there (offline: everything)
    logger.log({"step": 5, "loss": 1.5, "images_per_s": math.nan, "note": "x", "ok": True}, 5)
    logger.log({"step": 10, "loss": 1.25, "epoch": 1}, 10)
    assert run.logged == [
        (5, {"cl_diag/loss": 1.5}),
        (10, {"cl_diag/loss": 1.25, "cl_diag/epoch": 1.0}),
    ]
    logger.close()
    assert run.finished == 1
    # a run of the user's own is logged into and left open
    mine = FakeRun()
    own = WandbLogger(run=mine, prefix="")
    own.log({"loss": 0.5}, 3)
    own.close()
    assert mine.logged == [(3, {"loss": 0.5})] and mine.finished == 0 and len(fake_wandb.runs) == 1


def test_wandb_that_cannot_start_is_a_user_error(fake_wandb):
    def refuse(**kwargs: Any) -> None:
        raise RuntimeError("api_key not configured (no-tty)")

    fake_wandb.init = refuse
    with pytest.raises(UserError, match=r"api_key not configured.*WANDB_MODE=offline"):
        WandbLogger()


@pytest.mark.parametrize("kind", ["tensorboard", "wandb"])
def test_a_logger_that_is_not_installed_names_the_extra(monkeypatch, kind):
    monkeypatch.setattr(loggers, "_installed", lambda module: False)
    with pytest.raises(UserError, match=rf"pip install 'cl-diag\[{kind}\]'"):
        require_logger(kind)
    require_logger("csv")  # needs nothing


# --------------------------------------------------------------------------- cl-diag train --logger

TOY = ["train", "--recipe", "rebuttal-toy", "--steps", "6", "--log-every", "1", "--quiet"]


def _no_empty_cells(rows: list[dict[str, str]]) -> None:
    assert rows and all(value != "" for row in rows for value in row.values())


def test_train_logger_tensorboard_end_to_end(run_cli, tmp_path):
    pytest.importorskip("tensorboard")
    out = tmp_path / "run"
    res = run_cli(*TOY, "--out", out, "--logger", "tensorboard")
    assert res.code == 0, res.err
    rows = _read_csv(out / "metrics.csv")
    assert tuple(rows[0]) == METRIC_COLUMNS and len(rows) == 6
    _no_empty_cells(rows)
    scalars = _scalars(out / "tensorboard")
    for key in ("loss", "contrastive", "vrn", "lr", "pos_mean", "cross_neg_var"):
        got = scalars[f"cl_diag/{key}"]
        assert [s for s, _ in got] == [int(r["step"]) for r in rows] == [1, 2, 3, 4, 5, 6]
        for (_, value), row in zip(got, rows, strict=True):
            assert value == pytest.approx(float(row[key]), rel=1e-6, abs=1e-7), key


def test_train_logger_wandb_end_to_end(run_cli, tmp_path, fake_wandb):
    out = tmp_path / "run"
    res = run_cli(*TOY, "--out", out, "--logger", "wandb")
    assert res.code == 0, res.err
    (run,) = fake_wandb.runs
    assert run.init["name"] == "run" and run.init["dir"] == str(out)
    assert run.init["config"]["loss"] == "simclr" and run.init["config"]["logger"] == "wandb"
    assert run.finished == 1
    rows = _read_csv(out / "metrics.csv")
    assert [step for step, _ in run.logged] == [int(r["step"]) for r in rows]
    for (_, data), row in zip(run.logged, rows, strict=True):
        assert data["cl_diag/loss"] == float(row["loss"])  # float64 both: the same number
        assert data["cl_diag/cross_neg_mean"] == float(row["cross_neg_mean"])


def test_train_logger_not_installed_exits_2_before_anything_is_written(
    run_cli, tmp_path, monkeypatch
):
    monkeypatch.setattr(loggers, "_installed", lambda module: False)
    out = tmp_path / "run"
    res = run_cli(*TOY, "--out", out, "--logger", "tensorboard")
    assert res.code == 2
    assert "pip install 'cl-diag[tensorboard]'" in res.err and "Traceback" not in res.err
    assert not out.exists()
    res = run_cli(*TOY, "--out", out, "--logger", "neptune")
    assert res.code == 2 and "--logger" in res.err and "tensorboard" in res.err


def test_train_help_names_the_extras(run_cli, monkeypatch):
    # rich markup would swallow an unescaped "[tensorboard]" from the help; a wide terminal,
    # since rich cuts a word that does not fit a narrow one's column
    monkeypatch.setenv("COLUMNS", "240")
    res = run_cli("train", "--help")
    text = "".join(res.out.replace("│", "").split())  # however rich wraps the lines
    assert "'cl-diag[tensorboard]'" in text and "'cl-diag[wandb]'" in text
