"""The live view as markup: an SVG of the topology (switches by tier, hosts under their
leaves, one line per direction of each link, its width by load and its colour by its first
user) and a table of the same links, which is what a reader (or a test) reads exact figures
from. Pure functions of the topology, the loads, the users and the failed links."""
from __future__ import annotations

from html import escape

from fabricmodel.topology import Topology

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf",
           "#bcbd22")
IDLE, DOWN = "#b0b0b0", "#d62728"
ROW_GAP, NODE_GAP, MARGIN = 110, 70, 40


def positions(topo: Topology) -> dict[str, tuple[float, float]]:
    """Node -> (x, y): the highest tier at the top, hosts at the bottom, each row centred."""
    levels = sorted({s.level for s in topo.switches.values()}, reverse=True)
    rows = [[s.name for s in sorted(topo.switches.values(), key=lambda s: (s.pod or 0, s.index))
             if s.level == lv] for lv in levels]
    rows.append([h.name for h in sorted(topo.hosts.values(), key=lambda h: h.rank)])
    width = max(len(r) for r in rows) * NODE_GAP
    pos = {}
    for y, row in enumerate(rows):
        offset = MARGIN + (width - len(row) * NODE_GAP) / 2 + NODE_GAP / 2
        for x, name in enumerate(row):
            pos[name] = (offset + x * NODE_GAP, MARGIN + y * ROW_GAP)
    return pos


def _colours(users: dict[int, list[str]]) -> dict[str, str]:
    names = sorted({u for us in users.values() for u in us})
    return {u: PALETTE[i % len(PALETTE)] for i, u in enumerate(names)}


def _rate(bps: float) -> str:
    for unit, scale in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bps >= scale:
            return f"{bps / scale:.1f} {unit}"
    return f"{bps:.0f} bit/s"


def _width(bps: float, peak: float) -> float:
    return 1.5 + 6.0 * (bps / peak if peak > 0 else 0.0)


def svg(topo: Topology, loads: dict[tuple[int, str], float], users: dict[int, list[str]],
        failed: set[int]) -> str:
    pos = positions(topo)
    colour = _colours(users)
    peak = max(loads.values(), default=0.0)
    w = max(x for x, _ in pos.values()) + MARGIN + NODE_GAP / 2
    h = max(y for _, y in pos.values()) + MARGIN
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w:.0f}" height="{h:.0f}" '
           f'id="topology">']
    for lk in topo.links:
        (xa, ya), (xb, yb) = pos[lk.a], pos[lk.b]
        down = lk.index in failed
        first = (users.get(lk.index) or [None])[0]
        stroke = DOWN if down else colour.get(first, IDLE)
        for side, (src, dst) in ((-2.5, (lk.a, lk.b)), (2.5, (lk.b, lk.a))):
            bps = loads.get((lk.index, src), 0.0)
            dash = ' stroke-dasharray="6,4"' if down else ""
            out.append(
                f'<line x1="{xa + side:.1f}" y1="{ya:.1f}" x2="{xb + side:.1f}" y2="{yb:.1f}" '
                f'stroke="{stroke}" stroke-width="{_width(bps, peak):.1f}"{dash} '
                f'data-link="{escape(lk.name)}" data-from="{escape(src)}" '
                f'data-load-bps="{bps:.0f}">'
                f'<title>{escape(src)} to {escape(dst)}: {_rate(bps)}'
                f'{" (down)" if down else ""}</title></line>')
    for name, (x, y) in pos.items():
        is_switch = name in topo.switches
        shape = (f'<rect x="{x - 22:.1f}" y="{y - 12:.1f}" width="44" height="24" rx="4" '
                 f'fill="#f4f4f4" stroke="#333"/>' if is_switch else
                 f'<circle cx="{x:.1f}" cy="{y:.1f}" r="11" fill="#fff" stroke="#333"/>')
        out.append(f'<g data-node="{escape(name)}">{shape}<text x="{x:.1f}" y="{y + 4:.1f}" '
                   f'font-size="10" text-anchor="middle" font-family="sans-serif">'
                   f'{escape(name)}</text></g>')
    out.append("</svg>")
    return "\n".join(out)


def table(topo: Topology, loads: dict[tuple[int, str], float], users: dict[int, list[str]],
          failed: set[int]) -> str:
    colour = _colours(users)
    rows = ['<table id="links"><tr><th>link</th><th>state</th><th>a to b</th>'
            '<th>b to a</th><th>used by</th></tr>']
    for lk in topo.links:
        state = "down" if lk.index in failed else "up"
        ab, ba = loads.get((lk.index, lk.a), 0.0), loads.get((lk.index, lk.b), 0.0)
        who = ", ".join(f'<span style="color:{colour[u]}">{escape(u)}</span>'
                        for u in users.get(lk.index, []))
        rows.append(f'<tr data-link="{escape(lk.name)}" data-state="{state}" '
                    f'data-load-bps="{ab + ba:.0f}"><td>{escape(lk.name)}</td><td>{state}</td>'
                    f'<td>{_rate(ab)}</td><td>{_rate(ba)}</td><td>{who}</td></tr>')
    rows.append("</table>")
    return "\n".join(rows)


def fragment(topo, loads, users, failed) -> str:
    """What the page refreshes every second."""
    return svg(topo, loads, users, failed) + "\n" + table(topo, loads, users, failed)
