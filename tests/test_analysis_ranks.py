"""Analysis spread over ranks: K ranks give the same bits as one process.

In process: K threads play K ranks (their ``gather`` meets at a barrier), so the deal of the
tiles and the exact merge are checked for K = 2 and 3 in milliseconds. Under torchrun: two
gloo processes on CPU against one process, on an embeddings file and on a checkpoint (whose
views and probe splits are encoded batch by batch across the ranks); result.json and the
reports must be the same bytes. The checkpoint is encoded single-threaded on both sides (as
torchrun sets OMP_NUM_THREADS=1), since a convolution's last bits may depend on the threads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from fingerprint_free import assert_same_but_fingerprint

from cl_diag.measurement.geometry import geometry_of, uniformity
from cl_diag.measurement.inputs import label_codes, normalise_views
from cl_diag.measurement.pairs import _tile_cost, _tiles, pair_statistics_of
from cl_diag.runtime import Ranks, RanksMismatch, tensor_fingerprint

ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- in process


class _Exchange:
    """The meeting point of K threads that play K ranks."""

    def __init__(self, world: int):
        self.barrier = threading.Barrier(world, timeout=60)
        self.slots: list[Any] = [None] * world
        self.calls = 0


@dataclass(frozen=True)
class _ThreadRanks(Ranks):
    exchange: _Exchange = field(default=None, compare=False)  # type: ignore[assignment]

    def gather(self, obj: Any) -> list[Any]:
        ex = self.exchange
        ex.slots[self.rank] = obj
        ex.barrier.wait()
        out = list(ex.slots)
        if self.rank == 0:
            ex.calls += 1
        ex.barrier.wait()  # nobody overwrites a slot before everyone has read them all
        return out


def _on_ranks(world: int, fn) -> tuple[list[Any], _Exchange]:
    """``fn(ranks)`` on ``world`` threads at once; their results in rank order."""
    ex = _Exchange(world)
    results: list[Any] = [None] * world
    errors: list[BaseException] = []
    threads_before = torch.get_num_threads()

    def body(rank: int) -> None:
        try:
            results[rank] = fn(_ThreadRanks(rank, world, ex))
        except BaseException as exc:  # re-raised in the test's thread
            errors.append(exc)
            ex.barrier.abort()

    threads = [threading.Thread(target=body, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    torch.set_num_threads(threads_before)
    if errors:
        raise errors[0]
    return results, ex


def _views(n: int, d: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    z1 = torch.randn(n, d, generator=g)
    z2 = z1 + 0.7 * torch.randn(n, d, generator=g)
    return normalise_views(z1, z2)


def test_share_deals_every_task_to_exactly_one_rank_and_balances_the_cost():
    tiles = _tiles(1000, 96)  # 11 x 11 tiles, the last row and column short
    costs = [_tile_cost(t) for t in tiles]
    for world in (1, 2, 3, 5):
        shares = [Ranks(r, world).share(costs) for r in range(world)]
        assert sorted(k for s in shares for k in s) == list(range(len(tiles)))
        assert all(s == sorted(s) for s in shares)
        loads = [sum(costs[k] for k in s) for s in shares]
        # greedy least-loaded dealing: no rank ends more than one task above another
        assert max(loads) - min(loads) <= max(costs)
    assert Ranks(0, 2).share([5, 1, 1, 1, 1, 1]) == [0]  # the first task weighs as much
    with pytest.raises(ValueError, match="rank 2 of world 2"):
        Ranks(2, 2)


@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("labelled", [False, True], ids=["unlabelled", "labelled"])
def test_pair_statistics_over_ranks_equal_one_process_exactly(world, labelled):
    n = 301
    views = _views(n, 6, seed=world)
    labels = torch.arange(n) % 4 if labelled else None
    codes = label_codes(labels, n, "cpu")
    kwargs = dict(n_ref=50_000, codes=codes, block_size=40, hist_bins=50)
    alone = pair_statistics_of(views, **kwargs)
    results, ex = _on_ranks(world, lambda ranks: pair_statistics_of(views, ranks=ranks, **kwargs))
    for got in results:
        assert got == alone  # every float, count and bin: the merge is the single-process one
    assert ex.calls == 2  # the inputs' fingerprint, then one gather of all the tiles' parts
    assert alone["cross_view_negative"].count == n * (n - 1)
    assert alone["within_view_negative"].excessive_count > 0  # the counts are not vacuous


def test_more_ranks_than_tiles_leaves_some_idle_and_changes_nothing():
    views = _views(30, 4, seed=11)
    alone = pair_statistics_of(views, block_size=20)  # 2 x 2 tiles for 5 ranks
    geo_alone = geometry_of(views, n_ref=30, block_size=20)  # 3 uniformity tiles

    def both(ranks):
        return (
            pair_statistics_of(views, block_size=20, ranks=ranks),
            geometry_of(views, n_ref=30, block_size=20, ranks=ranks),
        )

    results, _ = _on_ranks(5, both)
    assert Ranks(4, 5).share([_tile_cost(t) for t in _tiles(30, 20)]) == []
    assert all(pairs == alone and geo == geo_alone for pairs, geo in results)


def test_geometry_over_ranks_equals_one_process_exactly():
    views = _views(250, 5, seed=7)
    alone = geometry_of(views, n_ref=1000, block_size=32)
    results, _ = _on_ranks(
        3, lambda ranks: geometry_of(views, n_ref=1000, block_size=32, ranks=ranks)
    )
    assert all(got == alone for got in results)
    # and the tiled uniformity is the one of a single tile (the whole Gram matrix at once)
    whole = uniformity(views.u, block_size=250)
    assert alone.uniformity.u == pytest.approx(whole, abs=1e-12)


def test_geometry_does_not_depend_on_the_number_of_threads():
    """One process with T threads must give the bits of K single-threaded ranks: the SVDs
    and float64 sums of the geometry used to change in the last bits with T."""
    g = torch.Generator().manual_seed(3)
    z1 = torch.randn(3000, 48, generator=g)
    views = normalise_views(z1, z1 + 0.5 * torch.randn(3000, 48, generator=g))
    before = torch.get_num_threads()
    try:
        results = []
        for threads in (1, 2, 3):
            torch.set_num_threads(threads)
            results.append(geometry_of(views, n_ref=10_000, block_size=1000))
            assert torch.get_num_threads() == threads  # restored after the single-threaded pass
    finally:
        torch.set_num_threads(before)
    assert results[1] == results[0] and results[2] == results[0]


def test_ranks_holding_different_views_are_refused_on_every_rank():
    a, b = _views(50, 4, seed=1), _views(50, 4, seed=2)

    def measure(ranks):
        with pytest.raises(RanksMismatch, match="2 ranks hold different views"):
            pair_statistics_of(a if ranks.rank == 0 else b, ranks=ranks)
        return "refused"

    results, _ = _on_ranks(2, measure)
    assert results == ["refused", "refused"]


def test_analyze_names_the_input_when_ranks_read_different_views(tmp_path):
    from cl_diag.errors import UserError
    from cl_diag.orchestration.analyze import AnalyzeConfig, measure_layer

    config = AnalyzeConfig(input=tmp_path / "x.npz", out=tmp_path / "out")
    a, b = _views(40, 3, seed=1), _views(40, 3, seed=2)

    def measure(ranks):
        u, v = a if ranks.rank == 0 else b
        with pytest.raises(UserError, match=r"2 torchrun ranks read different views from x\.npz"):
            measure_layer(
                u, v, None, n_ref=40, options=config.pair_options, where="x.npz", ranks=ranks
            )
        return "refused"

    assert _on_ranks(2, measure)[0] == ["refused", "refused"]


def test_tensor_fingerprint_sees_order_values_and_dtype():
    x = torch.arange(12.0).reshape(4, 3)
    assert tensor_fingerprint(x) == tensor_fingerprint(x.clone())
    assert tensor_fingerprint(x) != tensor_fingerprint(x[[1, 0, 2, 3]])
    assert tensor_fingerprint(x) != tensor_fingerprint(x.double())
    assert tensor_fingerprint(x, None) != tensor_fingerprint(x)


class _FixedViews(torch.utils.data.Dataset):
    """Two fixed views per digit image: the threads that play ranks must not share torch's
    global generator, which cl-diag's seeded augmentation draws from (torchrun's ranks are
    processes, and the torchrun test below runs the real augmentation)."""

    def __init__(self):
        from cl_diag.training.data import load_dataset

        self.base = load_dataset("digits", "train")
        g = torch.Generator().manual_seed(0)
        self.noise = torch.randn(len(self.base), 1, 8, 8, generator=g)

    def __len__(self) -> int:
        return len(self.base)

    def __getitem__(self, i: int):
        x, y = self.base[i]
        x = torch.as_tensor(np.asarray(x), dtype=torch.float32).reshape(1, 8, 8) / 16
        return i, x, x + 0.1 * self.noise[i], y


def test_encoding_over_ranks_equals_one_process_exactly():
    from cl_diag.measurement.views import Taps, encode_images, encode_two_views
    from cl_diag.models import build_model

    model = build_model({"dataset": "digits"}, seed=0).eval()
    views = _FixedViews()
    images = [(x1, y) for _, x1, _, y in (views[i] for i in range(40))]
    taps = {"m": Taps(model.backbone, model.projector)}
    idx = torch.arange(3, 80)  # 77 images: batches of 16, 16, 16, 16, 13
    alone, y_alone = encode_two_views(taps, views, idx, batch_size=16, device="cpu")
    feats_alone, _ = encode_images(taps, images, batch_size=16, device="cpu")
    counted: list[int] = []

    def run(ranks):
        progress = counted.append if ranks.is_main else None
        out = encode_two_views(
            taps, views, idx, batch_size=16, device="cpu", ranks=ranks, progress=progress
        )
        return out, encode_images(taps, images, batch_size=16, device="cpu", ranks=ranks)

    results, _ = _on_ranks(2, run)
    for (got, y), (feats, _) in results:
        assert torch.equal(y, y_alone)
        for layer in ("projector", "backbone"):
            assert torch.equal(got["m"][layer][0], alone["m"][layer][0])
            assert torch.equal(got["m"][layer][1], alone["m"][layer][1])
            assert torch.equal(feats["m"][layer], feats_alone["m"][layer])
    assert y_alone.tolist() == [views[i][3] for i in range(3, 80)]
    # rank 0 encoded 3 of the 5 batches but its bar still reaches all 77 images
    assert len(counted) == 3 and sum(counted) == 77


# --------------------------------------------------------------------------- torchrun


def _env(threads: int | None) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("OMP_NUM_THREADS", None)
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    return env


def _analyze(
    args: list[str], out: Path, ranks: int, threads: int | None = 1
) -> subprocess.CompletedProcess:
    """``cl-diag analyze`` alone or under torchrun (which makes each rank single-threaded
    unless OMP_NUM_THREADS says otherwise); ``threads`` None: torch's default."""
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    launcher = (
        [*torchrun, "--nproc-per-node", str(ranks), "-m", "cl_diag"]
        if ranks > 1
        else [sys.executable, "-m", "cl_diag"]
    )
    done = subprocess.run(
        [*launcher, "analyze", *args, "--out", str(out), "--device", "cpu"],
        env=_env(threads),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _same_outputs(a: Path, b: Path) -> None:
    """The same bytes but for the environment fingerprint, which records the processes and
    threads (issue 22): the numbers, reports and figures of K ranks are one process's."""
    names = sorted(p.name for p in a.iterdir())
    assert "result.json" in names and "report.html" in names
    assert_same_but_fingerprint(a, b)
    one, two = (json.loads((f / "result.json").read_text())["environment"] for f in (a, b))
    assert one["threads"]["processes"] == 1 and two["threads"]["processes"] == 2


@pytest.mark.slow  # end to end, in processes of its own: the full suite runs it
def test_two_gloo_ranks_analyse_an_embeddings_file_to_the_same_bytes(tmp_path):
    rng = np.random.default_rng(5)
    n = 1100  # two uniformity tiles per side (1024 on CPU) and 12 x 12 pair tiles of 96
    z1 = rng.standard_normal((n, 12)).astype(np.float32)
    z2 = (z1 + 0.6 * rng.standard_normal((n, 12))).astype(np.float32)
    path = tmp_path / "pairs.npz"
    np.savez(path, z1=z1, z2=z2, labels=np.arange(n) % 5)
    args = [str(path), "--block-size", "96", "--n-ref", "50000"]
    # one process with torch's default threads against two single-threaded ranks: for an
    # embeddings file nothing depends on the number of threads
    one = _analyze(args, tmp_path / "one", 1, threads=None)
    two = _analyze(args, tmp_path / "two", 2)
    _same_outputs(tmp_path / "one", tmp_path / "two")
    assert two.stdout.count("report:") == 1 and one.stdout.count("report:") == 1  # rank 0 only
    data = json.loads((tmp_path / "two" / "result.json").read_text())
    pairs = data["layers"]["embedding"]["pairs"]
    assert pairs["cross_view_negative"]["count"] == n * (n - 1)
    assert sum(pairs["within_view_negative"]["histogram"]["counts"]) == n * (n - 1)


@pytest.mark.slow
def test_two_gloo_ranks_analyse_a_checkpoint_to_the_same_bytes(tmp_path):
    """Views and probe splits encoded across the ranks, probes fitted on rank 0."""
    from cl_diag.orchestration.train import TrainConfig, train

    run = train(
        TrainConfig(
            dataset="digits",
            steps=2,
            batch_size=32,
            device="cpu",
            workers=0,
            quiet=True,
            out=str(tmp_path / "run"),
        )
    )
    args = [str(run.checkpoint), "--num-images", "150", "--encode-batch-size", "64"]
    args += ["--probes", "knn,retrieval", "--probe-train-images", "200"]
    args += ["--probe-test-images", "100", "-q"]
    _analyze(args, tmp_path / "one", 1)
    _analyze(args, tmp_path / "two", 2)
    _same_outputs(tmp_path / "one", tmp_path / "two")
    data = json.loads((tmp_path / "two" / "result.json").read_text())
    assert data["source"]["views"]["num_images"] == 150
    assert data["probes"]["splits"]["train"]["images"] == 200
    assert data["probes"]["knn"]["k20"]["top1"] > 0.1  # a real probe ran (10 classes)
