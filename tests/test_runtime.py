"""Runtime.close: after a normal end every rank meets at a barrier before it destroys the
process group; after an exception it leaves at once (CI aborted rank 1 of a torchrun analysis
at teardown with "terminate called without an active exception": rank 0 closed its gloo
sockets while rank 1 was still reading)."""

from __future__ import annotations

from typing import ClassVar

import pytest
import torch
import torch.distributed as dist

from cl_diag import runtime
from cl_diag.orchestration import analyze as analyze_module
from cl_diag.orchestration import train as train_module
from cl_diag.orchestration.analysis_config import AnalyzeConfig
from cl_diag.orchestration.train import TrainConfig
from cl_diag.runtime import Ranks, Runtime
from cl_diag.training import loop


@pytest.fixture
def fake_dist(monkeypatch):
    """torch.distributed with an initialised group that records its barrier and destroy."""
    calls: list[str] = []
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "barrier", lambda *a, **k: calls.append("barrier"))
    monkeypatch.setattr(dist, "destroy_process_group", lambda *a, **k: calls.append("destroy"))
    return calls


def test_a_rank_that_ended_normally_waits_for_the_others_before_it_closes(fake_dist):
    Runtime(torch.device("cpu"), Ranks(1, 2)).close(wait=True)
    assert fake_dist == ["barrier", "destroy"]


def test_cyclic_garbage_goes_before_the_group_does(fake_dist, monkeypatch):
    # DDP's reducers live in reference cycles; freed at interpreter finalisation, the gloo work
    # they hold aborts the process (CI: "terminate called without an active exception")
    monkeypatch.setattr(runtime.gc, "collect", lambda *a: fake_dist.append("collect") or 0)
    Runtime(torch.device("cpu"), Ranks(0, 2)).close(wait=True)
    assert fake_dist == ["collect", "barrier", "destroy"]


def test_a_rank_that_failed_closes_without_waiting(fake_dist):
    Runtime(torch.device("cpu"), Ranks(0, 2)).close(wait=False)
    assert fake_dist == ["destroy"]


def test_one_process_has_no_group_to_close(fake_dist):
    Runtime(torch.device("cpu")).close(wait=True)
    assert fake_dist == []


class _Recorded(Runtime):
    """A one-process runtime that records how each command closed it."""

    waits: ClassVar[list[bool]] = []

    @classmethod
    def start(cls, device_type: str) -> Runtime:
        return cls(torch.device(device_type))

    def close(self, *, wait: bool) -> None:
        type(self).waits.append(wait)
        super().close(wait=wait)


@pytest.fixture
def recorded(monkeypatch):
    _Recorded.waits = []
    monkeypatch.setattr(analyze_module, "Runtime", _Recorded)
    monkeypatch.setattr(runtime, "Runtime", _Recorded)  # train imports it when it runs
    return _Recorded.waits


def test_analyze_waits_only_when_it_succeeded(recorded, pairs_file, tmp_path, monkeypatch):
    config = AnalyzeConfig(input=pairs_file, out=tmp_path / "ok", device="cpu")
    analyze_module.analyze(config)
    assert recorded == [True]

    def broken(*args, **kwargs):
        raise RuntimeError("measuring failed")

    monkeypatch.setattr(analyze_module, "_analyze_embeddings", broken)
    with pytest.raises(RuntimeError, match="measuring failed"):
        analyze_module.analyze(AnalyzeConfig(input=pairs_file, out=tmp_path / "no", device="cpu"))
    assert recorded == [True, False]
    assert not (tmp_path / "no").exists()


def test_train_waits_only_when_it_succeeded(recorded, tmp_path, monkeypatch):
    toy = dict(dataset="toy", num_samples=16, dim=4, batch_size=8, epochs=1, quiet=True)
    train_module.train(TrainConfig(**toy, out=str(tmp_path / "ok"), device="cpu"))
    assert recorded == [True]
    assert (tmp_path / "ok" / "last.pt").is_file()

    def broken(*args, **kwargs):
        raise RuntimeError("training failed")

    monkeypatch.setattr(loop, "fit", broken)
    with pytest.raises(RuntimeError, match="training failed"):
        train_module.train(TrainConfig(**toy, out=str(tmp_path / "no"), device="cpu"))
    assert recorded == [True, False]
    assert not (tmp_path / "no").exists()  # and no empty folder is left behind
