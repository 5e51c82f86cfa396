"""Checkpoints: round trip, weights-only loading, atomic writes, RNG states, bad files."""

from __future__ import annotations

import pickle
import random
from collections import OrderedDict

import numpy as np
import pytest
import torch

from cl_diag.errors import UserError
from cl_diag.models import build_model
from cl_diag.training.checkpoint import (
    FORMAT,
    FORMAT_VERSION,
    capture_rng_state,
    check_plain_types,
    library_versions,
    load_checkpoint,
    restore_rng_state,
    save_checkpoint,
)


def _checkpoint(model, **extra):
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(4, 1, 8, 8)).sum().backward()
    opt.step()
    ck = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "config": {
            "dataset": "digits",
            "arch": "small-cnn",
            "lr": 0.1,
            "temperature": None,
            "seed": 0,
        },
        "backbone": model.backbone.state_dict(),
        "projector": model.projector.state_dict(),
        "optimizer": opt.state_dict(),
        "epoch": 3,
        "step": 30,
        "rng": capture_rng_state(torch.Generator().manual_seed(1)),
        "versions": library_versions(),
        "split": {"train_indices": torch.arange(5)},
    }
    ck.update(extra)
    return ck


def test_round_trip_rebuilds_the_same_model(tmp_path):
    model = build_model({"dataset": "digits"}, seed=0)
    ck = _checkpoint(model)
    path = tmp_path / "last.pt"
    save_checkpoint(path, ck)
    # loadable by plain torch with the weights-only unpickler
    raw = torch.load(path, weights_only=True)
    assert raw["format"] == FORMAT and raw["epoch"] == 3
    back = load_checkpoint(path)
    again = build_model(back["config"])
    again.backbone.load_state_dict(back["backbone"])
    again.projector.load_state_dict(back["projector"])
    for (k, a), b in zip(model.state_dict().items(), again.state_dict().values(), strict=True):
        assert torch.equal(a, b), k
    assert (
        back["optimizer"]["state"][0]["momentum_buffer"].shape
        == model.backbone.features[0].weight.shape
    )
    assert back["versions"]["torch"] == str(torch.__version__)
    assert type(back["versions"]["torch"]) is str
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left


def test_plain_type_check_names_the_offender():
    check_plain_types(
        {"a": [1, 2.0, "x", None, True, torch.zeros(1)], "b": OrderedDict(c=torch.ones(2))}
    )
    with pytest.raises(TypeError, match=r"\['v'\]"):
        check_plain_types({"v": torch.__version__})  # a str subclass would need its class to load
    with pytest.raises(TypeError, match="ndarray"):
        check_plain_types({"x": np.zeros(2)})
    with pytest.raises(TypeError):
        check_plain_types({1.5: 2})


def test_failed_write_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "last.pt"
    model = build_model({"dataset": "digits"}, seed=0)
    save_checkpoint(path, _checkpoint(model, epoch=1))
    before = path.read_bytes()

    def broken_save(obj, f):
        f.write(b"partial garbage")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", broken_save)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(path, _checkpoint(model, epoch=2))
    assert path.read_bytes() == before
    assert list(tmp_path.iterdir()) == [path]


def test_bad_files_become_user_errors(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        load_checkpoint(tmp_path / "nope.pt")
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"\x00\x01 not a torch file")
    with pytest.raises(UserError, match="not a cl-diag checkpoint"):
        load_checkpoint(junk)
    foreign = tmp_path / "foreign.pt"
    torch.save({"state_dict": {"w": torch.zeros(2)}}, foreign)
    with pytest.raises(UserError, match="no format marker"):
        load_checkpoint(foreign)
    evil = tmp_path / "evil.pt"
    torch.save({"format": FORMAT, "obj": _Arbitrary()}, evil)  # needs the full unpickler
    with pytest.raises(UserError, match="weights-only"):
        load_checkpoint(evil)
    pickled = tmp_path / "pickle.pt"
    pickled.write_bytes(pickle.dumps({"format": FORMAT}))
    with pytest.raises(UserError):
        load_checkpoint(pickled)
    newer = tmp_path / "newer.pt"
    torch.save({"format": FORMAT, "format_version": FORMAT_VERSION + 1}, newer)
    with pytest.raises(UserError, match=r"newer|Upgrade"):
        load_checkpoint(newer)
    partial = tmp_path / "partial.pt"
    torch.save({"format": FORMAT, "format_version": 1, "config": {}}, partial)
    with pytest.raises(UserError, match="lacks backbone"):
        load_checkpoint(partial)


class _Arbitrary:
    pass


def test_rng_states_round_trip(tmp_path):
    gen = torch.Generator().manual_seed(11)
    torch.manual_seed(1)
    np.random.seed(2)
    random.seed(3)
    np.random.standard_normal()  # leave a cached Gaussian in numpy's state
    random.gauss(0, 1)
    state = capture_rng_state(gen)
    path = tmp_path / "rng.pt"
    save_checkpoint(path, {"format": FORMAT, "rng": state})
    expected = (
        torch.rand(3),
        np.random.standard_normal(3),
        random.random(),
        random.gauss(0, 1),
        torch.rand(2, generator=gen),
    )
    torch.manual_seed(100)
    np.random.seed(100)
    random.seed(100)
    gen.manual_seed(100)
    restore_rng_state(torch.load(path, weights_only=True)["rng"], gen)
    got = (
        torch.rand(3),
        np.random.standard_normal(3),
        random.random(),
        random.gauss(0, 1),
        torch.rand(2, generator=gen),
    )
    assert torch.equal(got[0], expected[0])
    assert np.array_equal(got[1], expected[1])
    assert got[2] == expected[2] and got[3] == expected[3]
    assert torch.equal(got[4], expected[4])
