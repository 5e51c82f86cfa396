"""The distributed guarantee of cl_diag.losses.distributed, for real: two gloo
processes on CPU under DistributedDataParallel, uneven local batches (3 and 4
rows). For each loss, the loss value on every rank and the DDP-averaged
parameter gradient must equal the single-process loss and gradient on the
concatenated global batch.
"""

from __future__ import annotations

import faulthandler
import gc
import os
import sys

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from cl_diag.losses import LOSSES, gather_batch, global_indices, global_loss

SIZES = (3, 4)  # rows on rank 0 and rank 1
CASES = {
    "simclr": ("simclr", {"temperature": 0.3}, False),
    "dhel": ("dhel", {"temperature": 0.3}, False),
    "vrn": ("vrn", {"delta": -0.1, "power": 2}, False),
    "sigmoid-w": ("sigmoid", {"temperature": 2.0, "bias": 0.5, "within_view": True}, False),
    "supcon": ("supcon", {"temperature": 0.2}, True),
    "supcl": ("supcl", {"temperature": 0.2, "alpha": 0.3}, True),
    "triplet": ("triplet", {"margin": 0.5, "mining": "batch-hard"}, True),
    "contrastive": ("contrastive", {"margin": 0.8}, True),
}


def make_data():
    g = torch.Generator().manual_seed(123)
    n = sum(SIZES)
    x1 = torch.randn(n, 5, generator=g, dtype=torch.float64)
    x2 = torch.randn(n, 5, generator=g, dtype=torch.float64)
    y = torch.tensor([0, 1, 0, 2, 1, 2, 0])
    return x1, x2, y


def make_model():
    torch.manual_seed(7)  # identical initial weights in every process
    return torch.nn.Linear(5, 4, bias=False).double()


def worker(rank: int, world: int, init_file: str, out_dir: str):
    faulthandler.enable()  # should a rank abort in C++, its Python stack is in the test's output
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        x1, x2, y = make_data()
        lo = sum(SIZES[:rank])
        local = slice(lo, lo + SIZES[rank])
        results = {"index": global_indices(SIZES[rank]).tolist()}
        g = gather_batch(x1[local], x2[local], y[local])
        results["gathered_equal"] = bool(
            torch.equal(g.z1, x1) and torch.equal(g.z2, x2) and torch.equal(g.labels, y)
        )
        results["gather_index"] = g.index.tolist()
        del g
        for key, (name, hp, labelled) in CASES.items():
            model = torch.nn.parallel.DistributedDataParallel(make_model())
            z1, z2 = model(x1[local]), model(x2[local])
            loss = global_loss(LOSSES[name], z1, z2, y[local] if labelled else None, **hp)
            loss.backward()
            results[key] = (loss.item(), model.module.weight.grad.clone())
            del model, z1, z2, loss
        # DDP's reducers sit in reference cycles: free them, and the gloo work they hold, now,
        # while every rank's process group is alive, not during interpreter finalisation
        gc.collect()
        torch.save(results, os.path.join(out_dir, f"rank{rank}.pt"))
        # no rank closes its sockets while the other may still read from them (gloo aborts the
        # process when a peer resets a connection mid-message)
        dist.barrier()
    finally:
        dist.destroy_process_group()
    # Leave without interpreter finalisation. A gloo thread that drops the last reference to a
    # tensor while Python finalises is unwound mid-way by the interpreter ("terminate called
    # without an active exception", SIGABRT), which CI saw twice in this module. The results are
    # saved; nothing else of this process is needed.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ddp")
    mp.spawn(worker, args=(2, str(tmp / "init"), str(tmp)), nprocs=2, join=True)
    return [torch.load(tmp / f"rank{r}.pt", weights_only=True) for r in range(2)]


@pytest.mark.slow
def test_global_indices_and_gather(ranks):
    assert ranks[0]["index"] == [0, 1, 2] and ranks[1]["index"] == [3, 4, 5, 6]
    assert ranks[0]["gather_index"] == [0, 1, 2] and ranks[1]["gather_index"] == [3, 4, 5, 6]
    assert ranks[0]["gathered_equal"] and ranks[1]["gathered_equal"]


@pytest.mark.parametrize("key", list(CASES))
def test_ddp_equals_single_process_on_global_batch(ranks, key):
    name, hp, labelled = CASES[key]
    x1, x2, y = make_data()
    model = make_model()
    loss = LOSSES[name](model(x1), model(x2), y if labelled else None, **hp)
    loss.backward()
    want = model.weight.grad
    assert want.abs().sum() > 0
    for r in range(2):
        value, grad = ranks[r][key]
        assert value == pytest.approx(loss.item(), rel=1e-6), (key, r)
        # the losses run in fp32, so agreement is to fp32 precision
        assert torch.allclose(grad, want, rtol=1e-5, atol=1e-7), (key, r, (grad - want).abs().max())
