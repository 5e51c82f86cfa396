"""Cross-modal embeddings (issue 24, item 3): ``--keys`` / ``keys=``, retrieval in both
directions, the within-view negatives by view and the modality gap, each checked against a hand
computation or a brute-force numpy one."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
import torch

import cl_diag
from cl_diag.errors import UserError
from cl_diag.measurement.inputs import normalise_views
from cl_diag.measurement.modality import modality_gap, within_view_by_view
from cl_diag.measurement.probes import ranking
from cl_diag.measurement.probes import retrieval as rank_positives
from cl_diag.options import OptionError, split_keys
from cl_diag.report.claims import RunData, run_findings
from cl_diag.report.document import fmt, pct
from cl_diag.result import load
from cl_diag.runconfig import parse_run_config

# --------------------------------------------------------------------------- data


def two_encoders(n=240, latent=12, d=24, offset=3.0, noise=0.2, seed=0):
    """Held-out style cross-modal data: shared latents through two random linear maps (two
    "encoders") plus a constant offset vector per modality (the built-in gap), float32."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, latent))
    a, b = rng.standard_normal((latent, d)), rng.standard_normal((latent, d))
    shift_a, shift_b = rng.standard_normal(d), rng.standard_normal(d)
    image = z @ a + offset * math.sqrt(latent) * shift_a / np.linalg.norm(shift_a)
    text = z @ b + noise * rng.standard_normal((n, d))
    text += offset * math.sqrt(latent) * shift_b / np.linalg.norm(shift_b)
    return image.astype(np.float32), text.astype(np.float32)


def unit64(x):
    """Rows of float32 ``x`` normalised as cl-diag does (float64 norms, rounded once to
    float32), then in float64 for the brute-force sums."""
    x64 = x.astype(np.float64)
    return (x64 / np.linalg.norm(x64, axis=1, keepdims=True)).astype(np.float32).astype(np.float64)


def brute_cross(u, v):
    """Positive and cross-view negative mean and population variance, every pair visited."""
    s = u @ v.T
    off = ~np.eye(len(u), dtype=bool)
    return s.diagonal().mean(), s.diagonal().var(), s[off].mean(), s[off].var()


def views_of(u, v):
    return normalise_views(torch.from_numpy(u), torch.from_numpy(v))


# --------------------------------------------------------------------------- the modality gap


def test_the_gap_of_a_known_construction_matches_its_closed_form():
    """u_i = c e_0 + s x_i, v_i = c e_{d-1} + s x_i with x_i the 2k vectors +-e_1..+-e_k (mean 0):
    mu_1 = c e_0, mu_2 = c e_{d-1}, so ||mu_1 - mu_2|| = c sqrt 2 and the share is
    (2 c^2 / 4) / (1 - c^2 / 2) = c^2 / (2 - c^2). Removing the gap leaves u'_i = v'_i = x_i:
    positives all 1, negatives -1 (the one antipode) or 0, mean -1/(n-1)."""
    k, d, c = 5, 8, 0.6
    s = math.sqrt(1 - c * c)
    x = np.concatenate([np.eye(d)[1 : k + 1], -np.eye(d)[1 : k + 1]])
    u = c * np.eye(d)[0] + s * x
    v = c * np.eye(d)[d - 1] + s * x
    n = len(x)
    gap = modality_gap(views_of(u.astype(np.float32), v.astype(np.float32)))
    assert gap.centroid_distance == pytest.approx(c * math.sqrt(2), abs=1e-7)
    assert gap.centroid_norms.u == pytest.approx(c, abs=1e-7)
    assert gap.between_view_variance == pytest.approx(c * c / 2, abs=1e-7)
    assert gap.total_variance == pytest.approx(1 - c * c / 2, abs=1e-7)
    assert gap.variance_share == pytest.approx(c * c / (2 - c * c), abs=1e-7)
    # before: u_i . v_j = s^2 x_i . x_j
    assert gap.before.positive_mean == pytest.approx(s * s, abs=1e-7)
    assert gap.before.negative_mean == pytest.approx(-s * s / (n - 1), abs=1e-7)
    after = gap.after
    assert after is not None
    assert after.positive_mean == pytest.approx(1.0, abs=1e-7)
    assert after.positive_var == pytest.approx(0.0, abs=1e-7)
    assert after.negative_mean == pytest.approx(-1 / (n - 1), abs=1e-7)
    assert after.negative_var == pytest.approx(1 / (n - 1) - 1 / (n - 1) ** 2, abs=1e-7)


def test_two_encoders_gap_matches_a_hand_computation_and_brute_force():
    image, text = two_encoders()
    gap = modality_gap(views_of(image, text))
    u, v = unit64(image), unit64(text)
    mu1, mu2 = u.mean(axis=0), v.mean(axis=0)
    distance = np.linalg.norm(mu1 - mu2)
    pooled = np.concatenate([u, v])
    total = ((pooled - pooled.mean(axis=0)) ** 2).sum(axis=1).mean()  # E||z - mu||^2
    assert gap.centroid_distance == pytest.approx(distance, rel=1e-9)
    assert gap.total_variance == pytest.approx(total, rel=1e-9)
    assert gap.variance_share == pytest.approx(distance**2 / 4 / total, rel=1e-9)
    # the built-in offsets make the gap: without them the same encoders' centroids nearly meet
    without = modality_gap(views_of(*two_encoders(offset=0.0)))
    assert gap.variance_share > 0.1 > 10 * without.variance_share
    before = brute_cross(u, v)
    measured = gap.before
    assert (
        measured.positive_mean,
        measured.positive_var,
        measured.negative_mean,
        measured.negative_var,
    ) == pytest.approx(before, abs=1e-9)
    # removing the gap: centre each view on its centroid, re-normalise, every pair again
    uc = unit64((u - mu1).astype(np.float32))
    vc = unit64((v - mu2).astype(np.float32))
    after = gap.after
    assert after is not None
    assert (
        after.positive_mean,
        after.positive_var,
        after.negative_mean,
        after.negative_var,
    ) == pytest.approx(brute_cross(uc, vc), abs=1e-6)
    # centred, the cross-view negatives average about 0 (they were pulled apart by the offsets)
    assert abs(after.negative_mean) < abs(measured.negative_mean) + 1e-3


def test_one_encoder_without_offset_has_almost_no_gap():
    rng = np.random.default_rng(1)
    z = rng.standard_normal((400, 16)).astype(np.float32)
    w = (z + 0.1 * rng.standard_normal(z.shape)).astype(np.float32)
    gap = modality_gap(views_of(z, w))
    assert gap.variance_share < 0.01


def test_views_that_are_single_points_have_all_their_variance_in_the_gap():
    u = np.tile(np.array([[1.0, 0.0, 0.0]], np.float32), (6, 1))
    v = np.tile(np.array([[0.0, 1.0, 0.0]], np.float32), (6, 1))
    gap = modality_gap(views_of(u, v))
    assert gap.centroid_distance == pytest.approx(math.sqrt(2))
    assert gap.variance_share == pytest.approx(1.0)
    assert gap.after is None  # every centred row is zero: no direction to re-normalise


# --------------------------------------------------------------------------- within-view by view


def test_within_view_by_view_matches_brute_force_and_pools_to_the_exact_block():
    # the same latents, image with a large offset and text with a small one: the two views'
    # own negatives differ, which the pooled block hides
    image, _ = two_encoders(n=150, offset=3.0, seed=3)
    _, text = two_encoders(n=150, offset=0.3, seed=3)
    res = cl_diag.measure(image, text, probes="none")
    pooled = res.layers["embedding"].pairs["within_view_negative"]
    split = pooled.by_view
    assert split is not None
    for part, x in ((split.u, unit64(image)), (split.v, unit64(text))):
        s = (x @ x.T)[np.triu_indices(len(x), k=1)]
        assert part.count == len(s) == 150 * 149 // 2
        assert part.mean == pytest.approx(s.mean(), abs=1e-9)
        assert part.var == pytest.approx(s.var(), abs=1e-9)
        assert part.std == pytest.approx(math.sqrt(part.var))
    # pooled = the count-weighted combination (law of total variance)
    cu, cv = split.u.count, split.v.count
    assert pooled.count == cu + cv
    mean = (cu * split.u.mean + cv * split.v.mean) / (cu + cv)
    second = (cu * (split.u.var + split.u.mean**2) + cv * (split.v.var + split.v.mean**2)) / (
        cu + cv
    )
    assert pooled.mean == pytest.approx(mean, abs=1e-7)
    assert pooled.var == pytest.approx(second - mean**2, abs=1e-7)
    # the two encoders' views differ: the pooled numbers hide it
    assert abs(split.u.mean - split.v.mean) > 0.05


def test_within_view_by_view_is_exact_in_sampled_mode_too():
    image, text = two_encoders(n=80, seed=4)
    exact = within_view_by_view(views_of(image, text))
    sampled = cl_diag.measure(image, text, pairs="sampled", num_pairs=50, probes="none")
    assert sampled.layers["embedding"].pairs["within_view_negative"].by_view == exact


# --------------------------------------------------------------------------- retrieval


def brute_ranks(u, v):
    """rank_i = 1 + #{j != i : s_ij >= s_ii} over the float32 cosine similarities."""
    uu = torch.nn.functional.normalize(torch.from_numpy(u), dim=1)
    vv = torch.nn.functional.normalize(torch.from_numpy(v), dim=1)
    s = (uu @ vv.T).numpy()
    pos = s.diagonal()
    return (s >= pos[:, None]).sum(axis=1)


def test_retrieval_both_ways_matches_brute_force_with_pessimistic_ties(monkeypatch):
    rng = np.random.default_rng(5)
    u = rng.standard_normal((37, 6)).astype(np.float32)
    v = (u + 0.8 * rng.standard_normal(u.shape)).astype(np.float32)
    v[3] = v[4] = v[5]  # ties: queries 3..5 each find three equal rows, their positive among them
    # blocks of one row, as for very large n
    monkeypatch.setattr(ranking, "_BLOCK_BYTES", 1)
    got = rank_positives(u, v, ks=(1, 5, 10), both_directions=True)
    forward, backward = brute_ranks(u, v), brute_ranks(v, u)
    assert forward[3] >= 3 and forward[4] >= 3  # the tied rows count against the positive
    for k in (1, 5, 10):
        assert got.recall[k] == pytest.approx((forward <= k).mean())
        assert got.reverse.recall[k] == pytest.approx((backward <= k).mean())
    assert got.median_rank == float(np.median(forward))
    assert got.reverse.median_rank == float(np.median(backward))


def test_retrieval_by_hand_with_ties_and_an_even_median():
    u = np.eye(4, dtype=np.float32)
    # v_1 leans towards u_0: every u_i finds v_i first, but v_1 finds u_0 before u_1
    v = np.array([[1, 0, 0, 0], [0.9, 0.1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]], np.float32)
    got = rank_positives(u, v, ks=(1, 5), both_directions=True)
    assert got.recall == {1: 1.0, 5: 1.0} and got.median_rank == 1.0
    assert got.reverse.recall == {1: 0.75, 5: 1.0} and got.reverse.median_rank == 1.0
    assert brute_ranks(v, u).tolist() == [1, 2, 1, 1]
    # u_0 . w_0 = 0 ties with u_0 . w_2 = u_0 . w_3 = 0 and loses to w_1: rank 4 (ties count
    # against the positive); likewise u_1; ranks 4, 4, 1, 1 -> median (1 + 4) / 2
    w = np.array([[0, 1, 0, 0], [1, 0, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]], np.float32)
    assert brute_ranks(u, w).tolist() == [4, 4, 1, 1]
    got = rank_positives(u, w, ks=(1, 4))
    assert got.recall == {1: 0.5, 4: 1.0} and got.median_rank == 2.5 and got.reverse is None


# --------------------------------------------------------------------------- --keys


def test_split_keys_takes_two_different_arrays():
    assert split_keys("image_embeds, text_embeds") == ("image_embeds", "text_embeds")
    assert split_keys(("a", "b")) == ("a", "b")
    assert split_keys(None) is None
    for bad, words in (
        ("image_embeds", "exactly two"),
        ("a,b,c", "exactly two"),
        ("a,", "exactly two"),
        ("a,a", "twice"),
        ("labels,b", "labels"),
    ):
        with pytest.raises(OptionError) as err:
            split_keys(bad)
        assert str(err.value).startswith("--keys ") and words in str(err.value)


@pytest.fixture
def clip_file(tmp_path):
    image, text = two_encoders(n=60, seed=7)
    path = tmp_path / "clip.npz"
    np.savez(path, image_embeds=image, text_embeds=text, ids=np.arange(60))
    return path


def test_a_missing_key_lists_the_arrays_present(run_cli, clip_file, tmp_path):
    out = tmp_path / "out"
    result = run_cli("analyze", clip_file, "--keys", "image_embeds,txt", "--out", out)
    assert result.code == 2 and "Traceback" not in result.err
    message = " ".join(result.err.split())
    assert "has no 'txt' array" in message
    assert "'ids', 'image_embeds', 'text_embeds'" in message
    assert "--keys" in message and not out.exists()
    # without --keys, the default z1, z2 are missing: the message offers --keys
    result = run_cli("analyze", clip_file, "--out", out)
    assert result.code == 2 and "--keys A,B" in " ".join(result.err.split())


def test_bad_keys_are_refused_before_reading(run_cli, clip_file, tmp_path):
    out = tmp_path / "out"
    result = run_cli("analyze", clip_file, "--keys", "image_embeds", "--out", out)
    assert result.code == 2 and "exactly two" in result.err and not out.exists()


def test_keys_and_cross_modal_are_refused_for_a_checkpoint(run_cli, make_checkpoint, tmp_path):
    ckpt = make_checkpoint(tmp_path / "last.pt")
    out = tmp_path / "out"
    result = run_cli("analyze", ckpt, "--cross-modal", "--out", out)
    assert result.code == 2 and "--cross-modal" in result.err and "checkpoint" in result.err
    assert not out.exists()


def test_a_torch_dict_with_named_keys_is_read(run_cli, tmp_path):
    image, text = two_encoders(n=40, seed=8)
    path = tmp_path / "clip.pt"
    torch.save({"img": torch.from_numpy(image), "txt": torch.from_numpy(text)}, path)
    out = tmp_path / "out"
    result = run_cli("analyze", path, "--keys", "img,txt", "--out", out, "-q")
    assert result.code == 0, result.err
    assert load(out).layers["embedding"].modality_gap is not None


def test_measure_takes_a_dict_with_keys():
    image, text = two_encoders(n=50, seed=9)
    arrays = {"image_embeds": image, "text_embeds": text}
    res = cl_diag.measure(arrays, keys=("image_embeds", "text_embeds"))
    assert res.layers["embedding"].modality_gap is not None
    assert res.source.views == {
        "view 1": "image_embeds",
        "view 2": "text_embeds",
        "encoders": "two (cross-modal: the modality gap is measured)",
    }
    same = cl_diag.measure(image, text, cross_modal=True)
    assert same.layers == res.layers and same.probes == res.probes
    with pytest.raises(UserError, match=r"has no 'text' array; it holds 'image_embeds'"):
        cl_diag.measure(arrays, keys="image_embeds,text")
    with pytest.raises(UserError, match="drop z2"):
        cl_diag.measure(arrays, text, keys=("image_embeds", "text_embeds"))
    with pytest.raises(OptionError, match=r"^keys="):
        cl_diag.measure(arrays, keys=("image_embeds",))
    # one encoder (the default): no gap block, and the within-view split still there
    plain = cl_diag.measure(image, text)
    assert plain.layers["embedding"].modality_gap is None
    assert plain.layers["embedding"].pairs["within_view_negative"].by_view is not None


# --------------------------------------------------------------------------- end to end


def test_a_cross_modal_npz_with_named_keys_gets_retrieval_and_the_modality_gap(
    run_cli, clip_file, tmp_path
):
    """The issue's "Done when" path of the CLIP user."""
    out = tmp_path / "out"
    result = run_cli("analyze", clip_file, "--keys", "image_embeds,text_embeds", "--out", out)
    assert result.code == 0, result.err
    # the terminal names the views by their keys (it said "2→1" before issue 37)
    said = " ".join(result.out.split())
    assert "modality gap" in said and "R@1 (text_embeds → image_embeds)" in said
    data = json.loads((out / "result.json").read_text())
    layer = data["layers"]["embedding"]
    assert set(layer["modality_gap"]) >= {"centroid_distance", "variance_share", "before", "after"}
    assert set(layer["pairs"]["within_view_negative"]["by_view"]) == {"u", "v"}
    retrieval = data["probes"]["retrieval"]["embedding"]
    assert {"recall_at_1", "recall_at_5", "recall_at_10", "median_rank"} <= set(retrieval)
    assert {"recall_at_1", "median_rank"} <= set(retrieval["reverse"])
    assert set(data["probes"]["skipped"]) == {"linear", "knn", "clustering"}
    res = load(out)
    image, text = np.load(clip_file)["image_embeds"], np.load(clip_file)["text_embeds"]
    assert res.probes.retrieval["embedding"].recall[5] == pytest.approx(
        (brute_ranks(image, text) <= 5).mean()
    )
    report = (out / "report.md").read_text()
    assert "### Modality gap of 'embedding'" in report
    assert "view 2 → view 1 (v_i among all u)" in report
    assert "Within-view negative by view" in report
    # the rebuttal's SimCLR-on-CIFAR-100 figure is not a yardstick for these embeddings: a
    # file records no training config, so the registry tests only the consistency checks
    flat = " ".join(report.split())
    assert "No prediction applies: the runs record no training config" in flat
    assert "Over 57 %" not in report and "| contradicted |" not in report


@pytest.mark.slow
def test_cross_modal_is_opt_in_and_opt_out(run_cli, pairs_file, clip_file, tmp_path):
    on = tmp_path / "on"
    assert run_cli("analyze", pairs_file, "--cross-modal", "--out", on, "-q").code == 0
    assert load(on).layers["embedding"].modality_gap is not None
    off = tmp_path / "off"
    args = ("--keys", "image_embeds,text_embeds", "--no-cross-modal", "--out", off, "-q")
    assert run_cli("analyze", clip_file, *args).code == 0
    assert load(off).layers["embedding"].modality_gap is None


def test_retrieval_is_not_silently_dropped_in_sampled_mode(run_cli, pairs_file, tmp_path):
    out = tmp_path / "out"
    args = ("--probes", "retrieval", "--pairs", "sampled", "--num-pairs", "100", "--out", out)
    result = run_cli("analyze", pairs_file, *args)
    assert result.code == 0, result.err
    probes = load(out).probes
    assert probes.retrieval is None and "--pairs exact" in probes.skipped["retrieval"]
    assert "not run: the retrieval probe" in " ".join(result.out.split())
    none = tmp_path / "none"
    assert run_cli("analyze", pairs_file, "--probes", "none", "--out", none, "-q").code == 0
    assert load(none).probes is None


def test_the_excessive_claim_gets_no_verdict_on_embeddings_but_does_on_a_simclr_run():
    """The rebuttal's "over 57 % below δ" (SimCLR on CIFAR-100) is judged only at its scope: an
    embeddings file or arrays (no training config) is outside the registry's domain and gets
    only the consistency checks; the same statistics with a SimCLR run's config get a verdict."""
    image, text = two_encoders(n=40, seed=10)
    res = cl_diag.measure(image, text, probes="none")
    data = RunData.of(res)
    assert data is not None and not data.recorded
    found = run_findings([data])
    assert found and {f.kind for f in found} == {"consistency"}
    simclr = replace(data, config=parse_run_config({"loss": "simclr", "vrn": 0.0}))
    (excessive,) = [f for f in run_findings([simclr]) if f.claim == "excessive_share"]
    assert excessive.verdict in ("supported", "contradicted", "inconclusive")


def test_the_short_form_shows_the_gap_and_retrieval_both_ways():
    """A notebook's ``print(res)`` of a cross-modal result: the modality gap and Recall@1 in
    both directions among the headline numbers (the figures a CLIP user reads first)."""
    image, text = two_encoders(n=60, seed=11)
    res = cl_diag.measure(
        {"image_embeds": image, "text_embeds": text}, keys="image_embeds,text_embeds"
    )
    rows = {line[:30].strip(): line[30:].strip() for line in repr(res).splitlines()}
    gap, retrieval = res.layers["embedding"].modality_gap, res.probes.retrieval["embedding"]
    assert rows["modality gap ‖μ₁ − μ₂‖"] == fmt(gap.centroid_distance)
    assert rows["modality gap's var share"] == fmt(gap.variance_share)
    assert rows["retrieval embedding R@1"] == pct(retrieval.recall[1])
    assert rows["retrieval embedding R@1 (2→1)"] == pct(retrieval.reverse.recall[1])
    # one encoder and no probes: neither block, as before
    plain = repr(cl_diag.measure(image, text, probes="none"))
    assert "modality gap" not in plain and "R@1" not in plain


def test_reproduce_checks_the_gap_and_both_retrieval_directions():
    """cl-diag reproduce compares every number a report prints: for a cross-modal result the
    modality gap and the reverse retrieval too (exact against themselves; a moved gap differs)."""
    from cl_diag.report.reproduction import DIFFERS, EXACT, check_reproduction

    image, text = two_encoders(n=60, seed=12)
    res = cl_diag.measure({"a": image, "b": text}, keys="a,b")
    rep = check_reproduction([("clip", res)], [res])
    quantities = {c.quantity for c in rep.checks}
    assert {"embedding / modality gap ‖μ₁ − μ₂‖", "embedding / modality gap's var share"} <= (
        quantities
    )
    assert {"retrieval embedding R@1 (2→1)", "retrieval embedding R@10 (2→1)"} <= quantities
    assert rep.outcome == EXACT
    layer = res.layers["embedding"]
    gap = replace(layer.modality_gap, centroid_distance=layer.modality_gap.centroid_distance + 0.5)
    moved = replace(res, layers={"embedding": replace(layer, modality_gap=gap)})
    check = next(
        c
        for c in check_reproduction([("clip", res)], [moved]).checks
        if c.quantity == "embedding / modality gap ‖μ₁ − μ₂‖"
    )
    assert check.status == DIFFERS and check.difference == pytest.approx(0.5)
