"""``cl-diag train --queue K``: the queue of keys, the key encoders, the queue statistics in the
Monitor and metrics.csv, and a resume that stays bit-exact."""

from __future__ import annotations

import math

import pytest
import torch

import cl_diag.training.loop as loop_module
from cl_diag.errors import UserError
from cl_diag.losses import LOSSES
from cl_diag.measurement.monitor import Monitor
from cl_diag.orchestration.train import TrainConfig, resolve_config, train, train_options
from cl_diag.training.checkpoint import load_checkpoint
from cl_diag.training.queue import KeyQueue, MomentumEncoder


def rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# --------------------------------------------------------------------------- the queue


def test_the_queue_is_a_ring_of_the_last_k_keys():
    q = KeyQueue(size=5, dim=1)
    for start in (0, 3, 6):  # batches of 3: 0 1 2 | 3 4 5 | 6 7 8
        b = torch.arange(start, start + 3, dtype=torch.float32)[:, None]
        q.push(b, -b)
    k1, k2 = q.negatives()
    assert sorted(k1[:, 0].tolist()) == [4.0, 5.0, 6.0, 7.0, 8.0]  # the last five keys
    assert torch.equal(k2, -k1) and int(q.pointer) == 4 and int(q.filled) == 5
    big = torch.arange(7, dtype=torch.float32)[:, None]
    q.push(big, big)  # a batch larger than the queue keeps its last five
    assert sorted(q.negatives()[0][:, 0].tolist()) == [2.0, 3.0, 4.0, 5.0, 6.0]


def test_momentum_update_is_the_moving_average():
    online = torch.nn.Linear(3, 2)
    enc = MomentumEncoder(online, momentum=0.9)
    before = enc.model.weight.clone()
    with torch.no_grad():
        online.weight.add_(1.0)
    enc.update(online)
    assert torch.allclose(enc.model.weight, 0.9 * before + 0.1 * online.weight)
    assert not enc.model.weight.requires_grad


# --------------------------------------------------------------------------- the monitor


def test_monitor_queue_stream_against_a_brute_force():
    z1, z2 = rand(6, 4, seed=1), rand(6, 4, seed=2)
    k1, k2 = rand(9, 4, seed=3), rand(9, 4, seed=4)
    mon = Monitor(n_ref=40, log_every=1)
    mon.update(z1, z2, queue=(k1, k2))
    row = mon.flush()
    n = torch.nn.functional.normalize
    s = torch.cat([(n(z1) @ n(k2).T).reshape(-1), (n(z2) @ n(k1).T).reshape(-1)]).double()
    assert row["queue_neg_mean"] == pytest.approx(float(s.mean()), abs=1e-7)
    assert row["queue_neg_var"] == pytest.approx(float(s.var(unbiased=False)), rel=1e-6)
    delta = -1 / 39
    assert row["queue_neg_excessive_ratio"] == pytest.approx(float((s < delta).double().mean()))
    # the in-batch statistics are those without a queue
    plain = Monitor(n_ref=40, log_every=1)
    plain.update(z1, z2)
    other = plain.flush()
    assert all(row[k] == other[k] for k in other if k not in ("seconds", "images_per_s"))
    assert not any(k.startswith("queue_") for k in other)


def test_monitor_pools_queue_steps_and_skips_steps_without_one():
    z1, z2 = rand(4, 3, seed=1), rand(4, 3, seed=2)
    k1, k2 = rand(5, 3, seed=3), rand(5, 3, seed=4)
    mon = Monitor(log_every=3)
    mon.update(z1, z2)  # the first step of a run: the queue is still empty
    mon.update(z1, z2, queue=(k1, k2))
    mon.update(z2, z1, queue=(k1[:2], k2[:2]))
    row = mon.flush()
    n = torch.nn.functional.normalize
    s = torch.cat(
        [
            (n(z1) @ n(k2).T).reshape(-1),
            (n(z2) @ n(k1).T).reshape(-1),
            (n(z2) @ n(k2[:2]).T).reshape(-1),
            (n(z1) @ n(k1[:2]).T).reshape(-1),
        ]
    ).double()
    assert row["queue_neg_mean"] == pytest.approx(float(s.mean()), abs=1e-7)
    assert row["queue_neg_var"] == pytest.approx(float(s.var(unbiased=False)), rel=1e-6)


# --------------------------------------------------------------------------- training

SMALL = dict(num_samples=64, batch_size=16, warmup_epochs=0.0, quiet=True)


@pytest.mark.slow
def test_the_second_step_sees_the_first_steps_keys(tmp_path):
    # lr ~ 0 and --key-encoder same: the model does not move, so step 2's logged loss is the loss
    # of batch 2 with batch 1's unit embeddings as the queue, recomputed here from the data.
    from cl_diag.models import build_model
    from cl_diag.training.data import training_data
    from cl_diag.training.loop import EpochBatchSampler

    options = TrainConfig(
        loss="infonce",
        queue=32,
        key_encoder="same",
        steps=2,
        lr=1e-12,
        schedule="constant",
        log_every=1,
        seed=5,
        out=str(tmp_path),
        **SMALL,
    )
    r = train(options)
    c = resolve_config(options)
    data = training_data("digits", seed=5, num_samples=64)
    model = build_model(c, seed=5)
    model.train()
    batches = iter(EpochBatchSampler(64, 16, 5))
    z = []
    for keys in (next(batches), next(batches)):
        items = [data.train_set[k] for k in keys]
        x = torch.cat([torch.stack([it[v] for it in items]) for v in (1, 2)])
        z.append(model(x).float().chunk(2))
    first = LOSSES["infonce"](*z[0], temperature=0.2).item()
    queue = tuple(torch.nn.functional.normalize(t.detach(), dim=1) for t in z[0])
    second = LOSSES["infonce"](*z[1], temperature=0.2, queue=queue).item()
    assert [row["loss"] for row in r.history] == pytest.approx([first, second], rel=1e-5)
    assert "queue_neg_mean" not in r.history[0] and "queue_neg_mean" in r.history[1]
    ck = load_checkpoint(tmp_path / "last.pt")
    assert int(ck["queue"]["filled"]) == 32 and "key_encoder" not in ck


@pytest.mark.parametrize("loss", ["infonce", "simclr", "dcl", "hcl"])
def test_queue_losses_train_with_vrn_seeing_the_queue(tmp_path, loss):
    r = train(TrainConfig(loss=loss, queue=24, vrn=2.0, steps=3, out=str(tmp_path), **SMALL))
    row = r.history[-1]
    assert math.isfinite(row["loss"]) and math.isfinite(row["queue_neg_mean"])
    assert row["loss"] == pytest.approx(row["contrastive"] + 2 * row["vrn"], rel=1e-5)
    header = (tmp_path / "metrics.csv").read_text().splitlines()[0].split(",")
    assert header[-2:] == ["queue_neg_mean", "queue_neg_var"]
    ck = load_checkpoint(tmp_path / "last.pt")
    assert set(ck["key_encoder"]) == {"backbone", "projector"}
    assert ck["config"]["queue"] == 24 and ck["config"]["key_encoder"] == "momentum"


def test_queue_option_errors():
    with pytest.raises(UserError, match="no cross-view negatives"):
        resolve_config(TrainConfig(loss="dhel", queue=8))
    with pytest.raises(UserError, match="two views"):
        resolve_config(TrainConfig(queue=8, views=3))
    with pytest.raises(UserError, match="--key-encoder"):
        resolve_config(TrainConfig(queue=8, key_encoder="ema"))
    with pytest.raises(UserError, match="--queue -1"):
        resolve_config(TrainConfig(queue=-1))


@pytest.mark.slow  # end to end: the full suite runs it
@pytest.mark.parametrize("key_encoder", ["momentum", "same"])
def test_a_crash_and_resume_end_bit_identical(tmp_path, monkeypatch, key_encoder):
    # 4 steps an epoch, 3 epochs, a queue of 40 (it wraps); run B stops right after writing
    # epoch 2's checkpoint and is resumed: its last.pt equals the uninterrupted run A's.
    opts = dict(
        loss="infonce",
        queue=40,
        key_encoder=key_encoder,
        key_momentum=0.9,
        epochs=3,
        log_every=2,
        seed=7,
        **SMALL,
    )
    train(TrainConfig(out=str(tmp_path / "a"), **opts))

    real_save = loop_module._save

    class Crash(Exception):
        pass

    def save_then_crash(config, data, parts, out_dir, epoch, step, monitor, env):
        real_save(config, data, parts, out_dir, epoch, step, monitor, env)
        if epoch == 2:
            raise Crash

    monkeypatch.setattr(loop_module, "_save", save_then_crash)
    monkeypatch.setattr(loop_module, "CHECKPOINT_STEPS", 1)  # every epoch end writes
    with pytest.raises(Crash):
        train(TrainConfig(out=str(tmp_path / "b"), **opts))
    monkeypatch.setattr(loop_module, "_save", real_save)
    partial = load_checkpoint(tmp_path / "b" / "last.pt")
    assert partial["epoch"] == 2 and int(partial["queue"]["filled"]) == 40
    assert int(partial["queue"]["pointer"]) == (8 * 16) % 40  # it wrapped
    train(train_options({"resume": str(tmp_path / "b" / "last.pt"), "quiet": True}, {"quiet"}))

    a, b = load_checkpoint(tmp_path / "a" / "last.pt"), load_checkpoint(tmp_path / "b" / "last.pt")
    assert a["complete"] and b["complete"] and a["step"] == b["step"] == 12
    for part in ("backbone", "projector"):
        for k in a[part]:
            assert torch.equal(a[part][k], b[part][k]), f"{part}.{k}"
    for k in ("keys", "pointer", "filled"):
        assert torch.equal(a["queue"][k], b["queue"][k]), k
    if key_encoder == "momentum":
        for part in ("backbone", "projector"):
            for k in a["key_encoder"][part]:
                assert torch.equal(a["key_encoder"][part][k], b["key_encoder"][part][k]), k
    timing = {"seconds", "images_per_s"}
    for ra, rb in zip(a["metrics"], b["metrics"], strict=True):
        assert {k: v for k, v in ra.items() if k not in timing} == {
            k: v for k, v in rb.items() if k not in timing
        }
