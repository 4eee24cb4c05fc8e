"""A figure on matplotlib's file-only backend, and how the project writes one: title, tight
layout, 120 dpi PNG, parent folders made, figure closed."""
from __future__ import annotations

from pathlib import Path


def subplots(*args, **kwargs):
    """`matplotlib.pyplot.subplots` on the Agg backend: the demo's hosts, CI and containers have
    no display. Imported here, not at the top, so that a run printing only tables does not pay
    matplotlib's import."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(*args, **kwargs)


def save(fig, path: Path, suptitle: str | None = None) -> None:
    """Write `fig` to `path` (making its folders) and close it; `suptitle` above all axes."""
    import matplotlib.pyplot as plt

    if suptitle is not None:
        fig.suptitle(suptitle, fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
