"""Users' workflows, round three (issue 37): what a user running the documented commands one
after another sees."""

from __future__ import annotations

import shutil

import numpy as np
import pytest


@pytest.mark.slow
def test_the_default_output_folder_is_not_replaced_without_a_word(run_cli, tmp_path, pairs_file):
    """Before: the README's ``analyze pairs.npz --n-ref 50000`` then ``--pairs sampled`` put the
    second analysis over the first in pairs-analysis/ with nothing said."""
    source = tmp_path / "runs" / "pairs.npz"
    source.parent.mkdir()
    shutil.copy(pairs_file, source)
    first = run_cli("analyze", source, "--n-ref", "50000", "-q")
    assert first.code == 0 and "note:" not in first.err
    second = run_cli("analyze", source, "--pairs", "sampled", "-q")
    assert second.code == 0
    said = " ".join(second.err.split())
    assert f"note: replaced the earlier analysis in {tmp_path / 'runs' / 'pairs-analysis'}" in said
    assert "give --out to keep both" in said
    again = run_cli("analyze", source, "--out", tmp_path / "runs" / "pairs-analysis", "-q")
    assert again.code == 0 and "note:" not in again.err  # an --out given is the user's choice


def test_compare_in_a_notebook_needs_no_folder_and_takes_labels_as_a_list_or_by_place(
    tmp_path,
):
    """Before: compare needed out= (no comparison in memory), labelled results in memory
    "runs[0]" and renamed them only through an undocumented {"runs[0]": ...}; labels=[...] was an
    AttributeError and labels={0: ...} a TypeError."""
    import pytest
    import torch

    import cl_diag
    from cl_diag.errors import UserError

    g = torch.Generator().manual_seed(0)
    a = cl_diag.measure(torch.randn(40, 8, generator=g), torch.randn(40, 8, generator=g))
    b = cl_diag.measure(torch.randn(40, 8, generator=g), torch.randn(40, 8, generator=g))
    before = sorted(tmp_path.iterdir())
    memory = cl_diag.compare([a, b], labels=["base", "other"])
    assert memory.out is None and memory.files == [] and sorted(tmp_path.iterdir()) == before
    assert list(memory.frame["label"]) == ["base", "other"]
    assert "in memory" in repr(memory).splitlines()[0]
    assert cl_diag.compare([a, b], labels={1: "x"}).labels == {"runs[0]": "runs[0]", "runs[1]": "x"}
    written = cl_diag.compare([a, b], labels={0: "base"}, out=tmp_path / "cmp")
    assert (tmp_path / "cmp" / "report.html").is_file()
    assert "base" in (tmp_path / "cmp" / "report.md").read_text()
    assert written.frame.equals(cl_diag.compare([a, b], labels={0: "base"}).frame)
    for bad, fragment in (
        (["one"], "holds 1 item(s) for 2 run(s)"),
        ({5: "x"}, "names run 5, but there are 2 runs"),
        ({0: 3}, "is not a name"),
        ("ab", "labels is of type str"),
    ):
        with pytest.raises(UserError, match="give labels as a list of names") as raised:
            cl_diag.compare([a, b], labels=bad)
        assert fragment in str(raised.value)


@pytest.mark.slow
def test_the_api_feeds_a_colour_network_the_digits_in_three_channels(tmp_path):
    """Before: cl_diag.analyze(encoder=resnet, dataset="digits") ended in "expected 3
    channels, but got 1"; the command line repeats the grey channel for a foreign model. Now
    the API does too (the first convolution says how many channels it takes), records it, and
    warns that 8 px is far below what such a network is trained at."""
    import pytest
    import torch
    import torchvision

    import cl_diag
    from cl_diag.errors import InputWarning

    net = torchvision.models.resnet18(num_classes=10)
    net.fc = torch.nn.Identity()
    with pytest.warns(InputWarning, match=r"analysed at 8 px .* e\.g\. image_size=32"):
        res = cl_diag.analyze(
            encoder=net, dataset="digits", out=tmp_path / "a", num_images=16, probes="none"
        )
    size = res.result.source.image_size
    assert (size.value, size.channels) == (8, 3)
    assert res.result.layers["backbone"].d == 512


def test_the_paper_notes_the_reports_cite_ship_with_the_docs():
    """Before: the README and every report cited "paper-notes §8 / 11.2 / 11.3", a file no
    user had. Every section a report or the README cites is in docs/paper-notes.md."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    notes = (root / "docs" / "paper-notes.md").read_text(encoding="utf-8")
    headings = set(re.findall(r"^#{2,3} (\d+(?:\.\d+)?)[. ]", notes, flags=re.M))
    sources = [*sorted((root / "cl_diag").rglob("*.py")), root / "README.md"]
    cited = {
        section
        for path in sources
        for section in re.findall(
            r"paper-notes\]?(?:\([^)]*\))? §?(\d+(?:\.\d+)?)", path.read_text()
        )
    }
    assert {"8", "11.2", "11.3", "11.4"} <= cited
    assert cited <= headings, sorted(cited - headings)


def test_a_clip_users_first_screen_leads_with_the_gap_and_retrieval(run_cli, tmp_path):
    """Before: the headline of image and text embeddings showed "excessive separation 98 %",
    almost all modality gap, with neither the gap nor R@1 on the first screen, and the terminal
    said "view 1 / 2→1" although --keys named the views."""
    import re

    import numpy as np

    rng = np.random.default_rng(0)
    image = rng.standard_normal((120, 16)).astype(np.float32) + 3
    text = (image - 3 + 0.5 * rng.standard_normal((120, 16))).astype(np.float32) - 3
    source = tmp_path / "clip.npz"
    np.savez(source, image_embeds=image, text_embeds=text)
    out = tmp_path / "a"
    run = run_cli("analyze", source, "--keys", "image_embeds,text_embeds", "--out", out)
    assert run.code == 0, run.err
    said = " ".join(run.out.split())
    assert "embedding: image_embeds vs text_embeds: modality gap" in said
    assert "R@1 (image_embeds → text_embeds)" in said and "(text_embeds → image_embeds)" in said
    assert "view 1" not in said and "2→1" not in said
    report = (out / "report.md").read_text()
    assert "**Findings: no prediction of the registry applies; consistency checks" in report
    headline = report.split("| headline | value |\n|---|---|\n", 1)[1].split("\n\n", 1)[0]
    quantities = [re.match(r"\| (.*?) \|", row).group(1) for row in headline.splitlines()]
    assert quantities[:5] == [
        "modality gap \\|\\|μ₁ − μ₂\\|\\|",
        "modality gap, share of the pooled variance",
        "retrieval R@1, image_embeds → text_embeds",
        "retrieval R@1, text_embeds → image_embeds",
        "cross-view negative mean, gap removed",
    ]


def test_no_empty_probes_table_when_no_probe_ran(run_cli, tmp_path, pairs_file):
    """Before: sampled pairs of an embeddings file printed an empty probes table above the
    lines saying why no probe ran."""
    run = run_cli("analyze", pairs_file, "--pairs", "sampled", "--out", tmp_path / "a")
    assert run.code == 0, run.err
    assert "probes on" not in run.out and "not run: the retrieval probe" in run.out


def test_key_value_overrides_are_options(run_cli, tmp_path, pairs_file):
    """``cl-diag train RECIPE steps=3 quiet=true`` as Hydra, solo-learn and Lightning users type
    overrides: a key=value word whose key is an option is that option; a file whose name holds
    "=" (solo-learn's simclr-ep=199.ckpt) stays a file; a switch takes true or false."""
    import shutil
    from pathlib import Path

    import torch
    from conftest import refused

    toy = Path(__file__).resolve().parents[1] / "trainers" / "rebuttal-toy.toml"
    out = tmp_path / "run"
    run = run_cli("train", toy, "steps=3", "quiet=true", "batch-size=4", f"out={out}")
    assert run.code == 0, run.err
    config = torch.load(out / "last.pt", weights_only=True)["config"]
    assert (config["steps"], config["batch_size"]) == (3, 4)
    named = tmp_path / "simclr-ep=199.npz"
    shutil.copy(pairs_file, named)
    run = run_cli("analyze", named, "pairs=sampled", "-q", "--out", tmp_path / "a")
    assert run.code == 0, run.err
    assert '"mode": "sampled"' in (tmp_path / "a" / "result.json").read_text()
    refused(run_cli("train", toy, "overwrite=maybe"), "--overwrite is a switch")


@pytest.mark.slow
def test_a_labelled_embeddings_file_gets_the_classification_probes(run_cli, tmp_path):
    """Before: an embeddings file with labels got retrieval only ("an embeddings file holds one
    set of rows"); now its view-1 rows are split per class (20 % held out, seeded) and the linear,
    kNN and k-means probes run on them, in result.json, the terminal and the report."""
    import json

    from cl_diag.measurement.probes import knn_probe, stratified_split

    rng = np.random.default_rng(0)
    labels = np.arange(300) % 5
    z1 = rng.standard_normal((300, 16)).astype(np.float32)
    z1[:, :5] += 2.0 * np.eye(5, dtype=np.float32)[labels]
    z2 = z1 + 0.3 * rng.standard_normal(z1.shape).astype(np.float32)
    np.savez(tmp_path / "lab.npz", z1=z1, z2=z2, labels=labels)
    out = tmp_path / "out"
    result = run_cli("analyze", tmp_path / "lab.npz", "--seed", "3", "--out", out)
    assert result.code == 0, result.err
    probes = json.loads((out / "result.json").read_text(encoding="utf-8"))["probes"]
    assert "skipped" not in probes
    assert probes["splits"] == {
        "train": {"images": 240, "of": 300},
        "test": {"images": 60, "of": 300},
    }
    fit, held = stratified_split(labels, 0.2, 3)
    expected = knn_probe(z1[fit], labels[fit], z1[held], labels[held], ks=(20, 200))
    assert probes["knn"]["k20"]["top1"] == expected.top1[20]
    assert 0.5 < probes["linear"]["top1"] <= 1.0 and len(probes["linear"]["top1_interval"]) == 2
    assert probes["clustering"]["settings"]["split"] == "test"
    said = " ".join(result.out.split())
    assert "linear top-1" in said and "kNN k=20 top-1" in said
    report = (out / "report.md").read_text(encoding="utf-8")
    assert (
        "| probe | view 1's rows |" in report and "240 rows fit them and 60 are held out" in report
    )

    # without labels, and in sampled mode, each probe says why it did not run
    np.savez(tmp_path / "plain.npz", z1=z1, z2=z2)
    plain = run_cli("analyze", tmp_path / "plain.npz", "--out", tmp_path / "plain", "-q")
    skipped = json.loads((tmp_path / "plain" / "result.json").read_text())["probes"]["skipped"]
    assert plain.code == 0 and set(skipped) == {"linear", "knn", "clustering"}
    assert "the file holds no labels" in skipped["linear"]
    sampled = run_cli(
        "analyze", tmp_path / "lab.npz", "--pairs", "sampled", "--out", tmp_path / "s"
    )
    skipped = json.loads((tmp_path / "s" / "result.json").read_text())["probes"]["skipped"]
    assert sampled.code == 0 and "run it with --pairs exact" in skipped["knn"]


def test_labelled_rows_one_per_class_say_why_no_probe_ran():
    import cl_diag

    rng = np.random.default_rng(1)
    z = rng.standard_normal((6, 4))
    res = cl_diag.measure(z, z + 0.1, np.arange(6))
    assert set(res.probes.skipped) == {"linear", "knn", "clustering"}
    assert "every class has one row" in res.probes.skipped["linear"]


def test_labels_named_with_the_labels_option(run_cli, tmp_path):
    """--labels NAME reads the class labels from another array (a CLIP export's class ids): the
    probes and the class collapse run on them; a name the file lacks, or the labels named as a
    view, is refused with the fix; the option is recorded only when given."""
    import json

    from conftest import refused

    rng = np.random.default_rng(2)
    ids = np.arange(120) % 3
    image = rng.standard_normal((120, 8)).astype(np.float32)
    image[:, :3] += 2.0 * np.eye(3, dtype=np.float32)[ids]
    text = image + 0.2 * rng.standard_normal(image.shape).astype(np.float32)
    path = tmp_path / "clip.npz"
    np.savez(path, image_embeds=image, text_embeds=text, class_ids=ids)
    keys = ("--keys", "image_embeds,text_embeds")
    out = tmp_path / "out"
    done = run_cli("analyze", path, *keys, "--labels", "class_ids", "--out", out, "-q")
    assert done.code == 0, done.err
    data = json.loads((out / "result.json").read_text(encoding="utf-8"))
    assert data["probes"]["linear"]["top1"] is not None and "skipped" not in data["probes"]
    assert data["layers"]["embedding"]["collapse"]["classes"] == 3
    assert data["commands"]["analyze"]["labels"] == "class_ids"
    unnamed = run_cli("analyze", path, *keys, "--out", tmp_path / "plain", "-q")
    assert unnamed.code == 0
    plain = json.loads((tmp_path / "plain" / "result.json").read_text(encoding="utf-8"))
    assert "labels" not in plain["commands"]["analyze"]  # recorded only when given
    assert "the file holds no labels" in plain["probes"]["skipped"]["linear"]
    missing = run_cli("analyze", path, *keys, "--labels", "classes", "--out", tmp_path / "m")
    refused(missing, "no 'classes' array", "'class_ids'", "--labels")
    as_view = run_cli(
        "analyze",
        path,
        "--keys",
        "image_embeds,class_ids",
        "--labels",
        "class_ids",
        "--out",
        tmp_path / "v",
    )
    refused(as_view, "names 'class_ids', the class labels' array, as a view")
    assert not (tmp_path / "m").exists() and not (tmp_path / "v").exists()


def test_the_headline_accuracy_stands_beside_the_raw_pixel_baseline():
    """Before: a checkpoint's best probe accuracy was shown alone; what training added is read
    against the same probe on raw pixels, so the headline shows both."""
    import dataclasses
    from pathlib import Path

    from cl_diag.report.overview import headline_rows
    from cl_diag.result import LinearProbe, ProbeSet, load

    path = "reports/digits-batch-study/batch-size=16_vrn=0_seed=11/analysis/result.json"
    result = load(Path(__file__).resolve().parents[1] / path)
    assert result.probes is not None and result.probes.baselines is None

    def best(res):
        return next(r[1] for r in headline_rows(res, "backbone") if "best probe" in str(r[0]))

    assert best(result) == "97.56 % [95.68, 98.63]"  # no baseline measured: the value alone
    pixels = ProbeSet(linear=LinearProbe(top1=0.9051))
    with_baseline = dataclasses.replace(
        result, probes=dataclasses.replace(result.probes, baselines={"raw_pixels": pixels})
    )
    assert best(with_baseline) == "97.56 % [95.68, 98.63]; raw pixels 90.51 %"
