"""figures.png: the one way the demo and sim/ write a plot."""
import matplotlib.pyplot as plt

from figures import png


def test_save_makes_the_folders_writes_a_png_and_closes_the_figure(tmp_path):
    fig, ax = png.subplots(figsize=(3, 2))
    ax.bar([0, 1], [1, 2])
    path = tmp_path / "a" / "b" / "plot.png"
    png.save(fig, path, suptitle="two bars")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [t.get_text() for t in fig.texts] == ["two bars"]
    assert fig.number not in plt.get_fignums()


def test_without_suptitle_the_figure_has_none(tmp_path):
    fig, _ = png.subplots()
    png.save(fig, tmp_path / "plot.png")
    assert fig.texts == []
    assert (tmp_path / "plot.png").stat().st_size > 0
