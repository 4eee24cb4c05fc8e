"""`make report`: docs/ from the last runs' recorded tables and plots in out/."""
from __future__ import annotations

from pathlib import Path

import click

from results.pages import PageError, build
from results.record import ROOT


@click.command()
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              default=ROOT / "out", show_default=True, help="Where the runs wrote results.")
@click.option("--docs", type=click.Path(file_okay=False, path_type=Path),
              default=ROOT / "docs", show_default=True)
def main(out_dir, docs):
    """Render docs/src/*.md into docs/ with the tables and plots of the last runs."""
    try:
        pages = build(docs / "src", out_dir, docs)
    except (PageError, ValueError) as err:
        raise click.ClickException(str(err)) from None
    for page in pages:
        click.echo(f"report: {page}")


if __name__ == "__main__":
    main()
