"""course_utils.runtime and course_utils.plots: setup is reproducible, plots draw what they are given."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # no display in tests

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from course_utils import init, is_grading, seed_everything  # noqa: E402
from course_utils.plots import bar_weights, heatmap  # noqa: E402


def test_is_grading_follows_nbgrader_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    assert not is_grading()
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert is_grading()


def test_seed_everything_makes_runs_repeat() -> None:
    seed_everything(3)
    first = torch.randn(4)
    seed_everything(3)
    assert torch.equal(first, torch.randn(4))


def test_init_reports_the_setup_and_returns_the_device(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    backend = plt.get_backend()
    with plt.rc_context():  # init changes plot defaults; keep them to this test
        device = init(seed=1)
        grading_backend = plt.get_backend()
    plt.switch_backend(backend)
    torch.set_printoptions(profile="default")
    assert grading_backend == "template"  # while grading, figures are not drawn
    assert device.type in ("cpu", "cuda")
    line = capsys.readouterr().out
    assert f"torch {torch.__version__}" in line and "seed: 1" in line and "grading" in line


def test_heatmap_draws_every_cell_and_rejects_non_matrices() -> None:
    ax = heatmap(torch.tensor([[0.25, 0.75], [1.0, 0.0]]), ["q0", "q1"], ["k0", "k1"], title="w")
    assert [t.get_text() for t in ax.texts] == ["0.25", "0.75", "1.00", "0.00"]
    assert ax.get_title() == "w" and [t.get_text() for t in ax.get_xticklabels()] == ["k0", "k1"]
    with pytest.raises(ValueError, match="2-D matrix"):
        heatmap(torch.zeros(2, 2, 2))
    plt.close("all")


def test_heatmap_labels_stay_readable_and_masked_cells_are_marked() -> None:
    # viridis runs from dark purple (0) to light yellow (1): white text on the dark end, black on the light end,
    # also when vmin/vmax stretch the scale; a fully masked (NaN) row is grey and labelled, not left blank.
    weights = torch.tensor([[0.0, 1.0], [float("nan"), float("nan")]])
    ax = heatmap(weights, vmin=0, vmax=1, missing_label="masked")
    assert [(t.get_text(), t.get_color()) for t in ax.texts] == [
        ("0.00", "white"),
        ("1.00", "black"),
        ("masked", "black"),
        ("masked", "black"),
    ]
    assert ax.images[0].cmap.get_bad()[:3] == pytest.approx((0.827, 0.827, 0.827), abs=1e-3)  # light grey
    stretched = heatmap(torch.tensor([[0.9, 1.0]]), vmin=0, vmax=10)  # both values are dark on a 0..10 scale
    assert [t.get_color() for t in stretched.texts] == ["white", "white"]
    plt.close("all")


def test_bar_weights_labels_each_bar() -> None:
    ax = bar_weights(torch.tensor([0.125, 0.25, 0.625]), ["a", "b", "c"])
    assert [round(p.get_height(), 3) for p in ax.patches] == [0.125, 0.25, 0.625]
    assert [t.get_text() for t in ax.texts] == ["0.12", "0.25", "0.62"]
    plt.close("all")


@pytest.mark.parametrize("n_q, n_k, block_q, block_k", [(8, 8, 32, 32), (6, 3, 16, 32), (3, 5, 32, 16)])
def test_causal_tile_status_agrees_with_the_element_mask(n_q, n_k, block_q, block_k) -> None:
    from course_utils.plots import FULL, MASKED, SKIPPED, causal_tile_status

    visible = torch.ones(n_q * block_q, n_k * block_k, dtype=torch.bool).tril()  # query i sees keys 0..i
    tiles = visible.reshape(n_q, block_q, n_k, block_k).transpose(1, 2).flatten(2)
    expected = torch.where(~tiles.any(-1), SKIPPED, torch.where(tiles.all(-1), FULL, MASKED))
    assert torch.equal(causal_tile_status(n_q, n_k, block_q, block_k), expected)


def test_roofline_places_each_point_under_the_roof() -> None:
    from course_utils.plots import roofline

    peak, bandwidth = 100.0, 10.0  # ridge at 10 FLOP/byte
    ax = roofline(peak, bandwidth, {"memory-bound": 2.0, "compute-bound": 50.0})
    roof, *points = ax.get_lines()[:1] + ax.get_lines()[2:]
    xs, ys = roof.get_data()
    assert ys.max() == peak and abs(ys[0] - xs[0] * bandwidth) < 1e-9 * ys[0]
    assert [(float(p.get_xdata()[0]), float(p.get_ydata()[0])) for p in points] == [(2.0, 20.0), (50.0, 100.0)]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "roofline (ridge 10 FLOP/B)",
        "memory-bound (2 FLOP/B)",
        "compute-bound (50 FLOP/B)",
    ]
    plt.close("all")
