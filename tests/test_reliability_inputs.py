"""Broken inputs, round two (issue 26, 4 and 6): no traceback and the right message.

Each case was a traceback, a hang or a wrong message before: an ``--out`` longer than a file
name may be, a resume whose optimizer state has the wrong shapes, a result.json nested 200,000
levels, the output forms of ``cl_diag.analyze(encoder=...)`` and modules on the meta device,
``Monitor.update`` with an empty batch or a queue of the wrong shape, a torch file named
``.npz``, numpy arrays inside a ``.pt``, big-endian and extended-precision arrays, a named
pipe in an image folder, and a bad file under torchrun.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import refused
from torch import nn

import cl_diag
from cl_diag.errors import UserError

ROOT = Path(__file__).resolve().parents[1]
TOY = ROOT / "trainers" / "rebuttal-toy.toml"


def views(n: int = 30, d: int = 5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    z1 = rng.standard_normal((n, d))
    return z1, z1 + 0.2 * rng.standard_normal((n, d))


def embedding_numbers(folder: Path) -> dict:
    result = cl_diag.load(folder / "result.json")
    layer = result.layers["embedding"]
    return {
        name: (stats.count, round(stats.mean, 6), round(stats.var, 6))
        for name, stats in layer.pairs.items()
    }


# --------------------------------------------------------------------------- 4. tracebacks


def test_an_out_longer_than_a_file_name_is_a_message(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    z1, z2 = views()
    np.savez(tmp_path / "e.npz", z1=z1, z2=z2)
    long = "x" * 300
    refused(run_cli("analyze", "e.npz", "--out", long, "-q"), "300 bytes", "shorter --out")
    refused(run_cli("compare", tmp_path, "--out", f"a/{long}"), "shorter --out")
    refused(run_cli("train", TOY, "--steps", "2", "--out", long, "--quiet"), "shorter")
    refused(run_cli("sweep", TOY, "--grid", "vrn=0,3", "--out", long), "shorter --out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.npz"]


def test_a_resume_whose_optimizer_state_has_the_wrong_shapes_is_refused(run_cli, tmp_path):
    run = tmp_path / "run"
    done = run_cli("train", TOY, "--steps", "4", "--momentum", "0.9", "--out", run, "--quiet")
    assert done.code == 0, done.err
    checkpoint = torch.load(run / "last.pt", weights_only=True)
    state = checkpoint["optimizer"]["state"]
    assert state, "SGD with momentum keeps a buffer per parameter"
    first = next(iter(state.values()))
    first["momentum_buffer"] = torch.zeros(3, 1)
    checkpoint.update(complete=False, epoch=1, step=2, metrics=checkpoint["metrics"][:1])
    torch.save(checkpoint, run / "last.pt")
    refused(
        run_cli("train", "--resume", run / "last.pt", "--quiet"),
        "its optimizer state does not fit",
        "momentum_buffer",
        "has shape (3, 1)",
    )


def test_a_result_nested_200000_levels_is_refused(run_cli, tmp_path):
    deep = tmp_path / "deep"
    deep.mkdir()
    nested = "[" * 200_000 + "]" * 200_000
    (deep / "result.json").write_text('{"schema": "cl-diag/result/1", "extra": ' + nested + "}")
    refused(run_cli("compare", deep, "--out", tmp_path / "c"), "nests JSON", "levels deep")
    with pytest.raises(UserError, match="levels deep"):
        cl_diag.load(deep / "result.json")
    assert not (tmp_path / "c").exists()


# ------------------------------------------------------------------ analyze(encoder=...) forms


class _Encoder(nn.Module):
    def __init__(self, form: str = "tensor"):
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(3, 4, 3, stride=4)
        self.fc = nn.Linear(4, 6)
        self.form = form

    def forward(self, x):
        f = self.fc(self.conv(x).mean(dim=(2, 3)))
        if self.form == "tuple":
            return f, f.sum(1)
        if self.form == "features":
            return {"logits": f[:, :2], "features": f}
        if self.form == "named":
            return {"a": f, "b": f * 2}
        if self.form == "scalar":
            return f.sum(1)
        return f


def _analyze(tmp_path, images, encoder, name, projector=None, **extra):
    return cl_diag.analyze(
        encoder=encoder,
        projector=projector,
        dataset="imagefolder",
        data_root=images,
        out=tmp_path / name,
        image_size=32,
        num_images=8,
        probes=("retrieval",),
        baselines=False,
        device="cpu",
        **extra,
    )


@pytest.mark.slow
def test_analyze_reads_the_common_output_forms_of_an_encoder(tmp_path, tiny_imagefolder):
    images = tiny_imagefolder[0]
    plain = _analyze(tmp_path, images, _Encoder(), "plain").result.layers["backbone"]
    for form, extra in (("tuple", {}), ("features", {}), ("named", {"output_key": "a"})):
        layer = _analyze(tmp_path, images, _Encoder(form), form, **extra).result.layers["backbone"]
        assert layer.d == plain.d == 6, form
        for kind, stats in plain.pairs.items():
            assert layer.pairs[kind].mean == pytest.approx(stats.mean, abs=1e-6), (form, kind)


@pytest.mark.parametrize(
    "make, fragment",
    [
        (lambda: {"encoder": _Encoder("named")}, "none of them is a features key"),
        (lambda: {"encoder": _Encoder("named"), "output_key": "c"}, "without output_key 'c'"),
        (lambda: {"encoder": _Encoder("scalar")}, "one feature vector per image"),
        (lambda: {"encoder": _Encoder().to("meta")}, "on the meta device"),
        (lambda: {"encoder": _Encoder(), "projector": nn.Linear(5, 3)}, "The projector failed"),
    ],
    ids=["dict-without-key", "missing-output-key", "1-D", "meta", "mismatched-projector"],
)
def test_analyze_refuses_an_encoder_it_cannot_read(tmp_path, tiny_imagefolder, make, fragment):
    given = make()
    with pytest.raises(UserError, match=fragment):
        _analyze(tmp_path, tiny_imagefolder[0], name="a", **given)
    assert not (tmp_path / "a").exists()


# --------------------------------------------------------------------------- Monitor


@pytest.mark.parametrize(
    "call, fragment",
    [
        (lambda m: m.update(torch.ones(0, 4), torch.ones(0, 4)), "at least one instance"),
        (lambda m: m.update(torch.ones(3, 4), torch.ones(3, 4, device="meta")), "meta tensor"),
        (lambda m: m.update(torch.ones(3, 4, dtype=torch.int64), torch.ones(3, 4)), "floating"),
        (
            lambda m: m.update(torch.ones(3, 4), torch.ones(3, 4), queue=(torch.ones(5, 3),) * 2),
            r"it must be \(K, 4\)",
        ),
        (
            lambda m: m.update(torch.ones(3, 4), torch.ones(3, 4), queue=torch.ones(2, 5, 4)),
            "queue must be a pair",
        ),
    ],
    ids=["B=0", "meta", "integers", "queue-dimension", "queue-not-a-pair"],
)
def test_monitor_refuses_what_it_cannot_measure(call, fragment):
    monitor = cl_diag.Monitor(n_ref=100, log_every=1)
    with pytest.raises(UserError, match=fragment) as raised:
        call(monitor)
    assert isinstance(raised.value, ValueError)  # what it raised before, for old callers
    monitor.update(torch.randn(3, 4), torch.randn(3, 4))  # the monitor still works
    assert monitor.flush()["pos_mean"] is not None


@pytest.mark.skipif(not torch.cuda.is_available(), reason="two devices need a GPU")
def test_views_on_two_devices_are_refused():
    z1, z2 = torch.randn(5, 3), torch.randn(5, 3, device="cuda")
    with pytest.raises(UserError, match="on one device"):
        cl_diag.measure(z1, z2)
    with pytest.raises(UserError, match="on one device"):
        cl_diag.Monitor(n_ref=10).update(z1, z2)


# --------------------------------------------------------------------------- 6. messages


@pytest.mark.slow
def test_files_are_read_by_content_and_numpy_arrays_in_a_pt_are_data(run_cli, tmp_path):
    z1, z2 = views()
    labels = np.arange(30) % 3
    np.savez(tmp_path / "plain.npz", z1=z1, z2=z2, labels=labels)
    assert run_cli("analyze", tmp_path / "plain.npz", "--out", tmp_path / "plain", "-q").code == 0
    reference = embedding_numbers(tmp_path / "plain")
    tensors = {"z1": torch.from_numpy(z1), "z2": torch.from_numpy(z2)}
    torch.save({**tensors, "labels": torch.from_numpy(labels)}, tmp_path / "torch.npz")
    torch.save({"z1": z1, "z2": z2, "labels": labels}, tmp_path / "arrays.pt")  # numpy inside
    torch.save({"z1": z1, "z2": list(map(list, z2)), "labels": labels}, tmp_path / "mixed.pt")
    for name in ("torch.npz", "arrays.pt", "mixed.pt"):
        done = run_cli("analyze", tmp_path / name, "--out", tmp_path / f"o-{name}", "-q")
        assert done.code == 0, (name, done.err)
        assert embedding_numbers(tmp_path / f"o-{name}") == reference, name


def test_other_byte_orders_and_precisions_are_converted_or_named(run_cli, tmp_path):
    z1, z2 = views(seed=1)
    labels = np.arange(30) % 4
    np.savez(tmp_path / "native.npz", z1=z1, z2=z2, labels=labels)
    assert run_cli("analyze", tmp_path / "native.npz", "--out", tmp_path / "n", "-q").code == 0
    reference = embedding_numbers(tmp_path / "n")
    np.savez(
        tmp_path / "odd.npz",
        z1=z1.astype(">f8"),
        z2=z2.astype(np.longdouble),
        labels=labels.astype(">u2"),
    )
    done = run_cli("analyze", tmp_path / "odd.npz", "--out", tmp_path / "o", "-q")
    assert done.code == 0, done.err
    assert embedding_numbers(tmp_path / "o") == reference
    np.savez(tmp_path / "dates.npz", z1=z1.astype("datetime64[s]"), z2=z2)
    refused(
        run_cli("analyze", tmp_path / "dates.npz", "--out", tmp_path / "d"),
        "'z1'",
        "dtype datetime64[s] (dates and times)",
    )
    np.savez(tmp_path / "text.npz", z1=z1, z2=z2, labels=np.array(["a", "b", "c"] * 10))
    refused(run_cli("analyze", tmp_path / "text.npz", "--out", tmp_path / "t"), "<U1 (text)")


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_named_pipe_in_an_image_folder_is_refused_never_opened(tmp_path, tiny_imagefolder):
    """A FIFO called x.png blocked train and analyze for ever (the test's timeout would fire);
    now it is refused by its file type, before anything opens it."""
    train, _ = tiny_imagefolder
    os.mkfifo(train / "class0" / "x.png")
    command = [
        sys.executable,
        "-m",
        "cl_diag",
        "train",
        "--dataset",
        "imagefolder",
        "--data-root",
        str(train),
        "--steps",
        "1",
        "--batch-size",
        "4",
        "--out",
        str(tmp_path / "run"),
        "--quiet",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, env=env)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "x.png is a named pipe (FIFO), not an image file" in " ".join(done.stderr.split())
    with pytest.raises(UserError, match="named pipe"):
        _analyze(tmp_path, train, _Encoder(), "a")


@pytest.mark.slow
def test_a_bad_file_under_torchrun_is_one_message_and_exit_2_on_every_rank(tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_text("not an archive")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            "2",
            "-m",
            "cl_diag",
            "analyze",
            str(bad),
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
        cwd=tmp_path,
    )
    output = done.stdout + done.stderr
    assert output.count("error: ") == 1, output[-3000:]  # rank 0's message only
    assert "[rank 1]" not in output and "interrupted:" not in output
    # no traceback of cl-diag's (torchrun prints its own ChildFailedError and exits 1); its
    # summary gives the ranks' statuses: 2, or SIGTERM for a rank torchrun stopped once the
    # first had failed, and the root cause is a rank's exit status 2
    assert f'File "{ROOT / "cl_diag"}' not in output
    statuses = re.findall(r"^\s*exitcode\s*:\s*(-?\d+)", output, flags=re.MULTILINE)
    assert len(statuses) == 2 and set(statuses) <= {"2", "-15", "143"}, output[-3000:]
    root_cause = output.split("Root Cause")[1]
    assert re.search(r"^\s*exitcode\s*:\s*2\b", root_cause, flags=re.MULTILINE), output[-3000:]
    assert not (tmp_path / "out").exists()
