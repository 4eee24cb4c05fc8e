"""fabricd's live view in a real browser: headless Chromium loads `fabricd --web` inside the
fabric's namespace while a ring all-reduce runs on the netns fabric; the page it rendered
shows a non-zero load on a link the collective uses, and after `fabricctl link ... down` it
shows that link down (table row and dashed line)."""
from __future__ import annotations

import re
import shutil
import threading
import time
from pathlib import Path

import pytest
from netns_fabric import build, sh

from collectives.launch import launch

pytestmark = [pytest.mark.netns, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
TOPO = REPO / "controller" / "topologies" / "leafspine-2x2.yaml"
WEB = "127.0.0.1:8088"
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync")


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("headless Chromium is not installed (apt-get install chromium)")
    return exe


def dump_dom(fab: str, exe: str, profile) -> str:
    """The page as Chromium rendered it, after its script has run for two seconds."""
    out = sh(fab, exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
             "--virtual-time-budget=2000", "--dump-dom", f"http://{WEB}/", check=False)
    assert "<table" in out.stdout, out.stderr[-2000:]
    return out.stdout


def rows(dom: str) -> dict[str, tuple[str, int, str]]:
    """link name -> (state, bits/s in both directions, users) from the page's link table."""
    return {m[0]: (m[1], int(m[2]), re.sub("<[^>]+>", "", m[3])) for m in re.findall(
        r'<tr data-link="([^"]+)" data-state="(\w+)" data-load-bps="(\d+)">'
        r'(?:<td>[^<]*</td>){4}<td>(.*?)</td></tr>', dom)}


def wait_for_load(fab: str, deadline_s: float = 30.0) -> None:
    """Until fabricd's own figures show traffic on a fabric link (polling /links.json)."""
    probe = ("import json, sys, urllib.request\n"
             f"links = json.load(urllib.request.urlopen('http://{WEB}/links.json'))\n"
             "sys.exit(0 if any(v > 0 for lk in links if 'spine' in lk['link'] "
             "for v in lk['bps'].values()) else 1)\n")
    deadline = time.monotonic() + deadline_s
    while sh(fab, "python3", "-c", probe, check=False).returncode != 0:
        assert time.monotonic() < deadline, "no load reached the live view's counters"
        time.sleep(0.2)


@pytest.fixture
def fabric(netns_factory, tmp_path):
    yield from build(netns_factory, tmp_path, TOPO.read_text(), fabricd_args=("--web", WEB))


def test_browser_shows_link_load_and_link_down(fabric, tmp_path):
    exe = chromium()
    hosts = ["h1", "h2", "h3", "h4"]
    fabric.ctl("group", "create", "g1", "h1", "h3", "h4")    # a tree the page colours
    plan = [{"collective": "allreduce", "algo": "ring", "dtype": "int32",
             "elements": 1 << 20}] * 6
    seen, failed = threading.Event(), []

    def traffic():
        """Launch after launch until the page was seen under load: on a busy machine
        Chromium can take longer to start than one launch's collectives last."""
        try:
            while not seen.is_set():
                got = launch([fabric.ip(h) for h in hosts], plan,
                             namespaces=[fabric.hosts[h] for h in hosts], timeout=240)
                assert all(r["ok"] for r in got)
        except Exception as exc:   # reported by the test's thread below
            failed.append(exc)

    runner = threading.Thread(target=traffic)
    runner.start()
    try:
        deadline = time.monotonic() + 300
        while True:         # a dump between two launches shows no load: the next one will
            assert not failed and time.monotonic() < deadline, failed
            wait_for_load(fabric.fab, deadline_s=120)
            during = rows(dump_dom(fabric.fab, exe, tmp_path / "profile"))
            loaded = [name for name, (_, bps, _) in during.items() if "spine" in name and bps]
            if loaded:
                break
    finally:
        seen.set()
        runner.join(600)
    assert not failed, failed
    assert set(during) == {lk.name for lk in fabric.topo.links}
    tree = {name for name, (_, _, users) in during.items() if "group g1" in users}
    assert {"h1-leaf1", "h3-leaf2", "h4-leaf2"} <= tree and "h2-leaf1" not in tree, during

    fabric.ctl("link", "leaf1-spine1", "down")
    dom = dump_dom(fabric.fab, exe, tmp_path / "profile")
    after = rows(dom)
    assert after["leaf1-spine1"][0] == "down"
    assert all(state == "up" for name, (state, _, _) in after.items() if name != "leaf1-spine1")
    assert re.search(r'stroke-dasharray="6,4" data-link="leaf1-spine1"', dom)


XSS = "<img src=x onerror=\"document.body.setAttribute('data-pwned','1')\">" \
      "<script>document.title='pwned'</script>"


def test_security_xss_name_rendered_inert(tmp_path):
    """An API client names the topology with markup: Chromium shows it as text, runs none of
    it, and every response carries the Content-Security-Policy."""
    import json
    import subprocess
    import urllib.request

    from test_fabricd_api import TOPO as TOPO_2X2
    from test_fabricd_api import Daemon, ctl, free_port

    exe = chromium()
    daemon = Daemon(tmp_path, {n: f"127.0.0.1:{free_port()}"
                               for n in ("leaf1", "leaf2", "spine1", "spine2")})
    try:
        server = daemon.start("--web", "127.0.0.1:0")
        web = re.search(r"live view on (http://\S+/)", daemon.log.read_text()).group(1)
        topo = tmp_path / "named.yaml"
        topo.write_text(TOPO_2X2.read_text().replace("name: leafspine-2x2",
                                                     f"name: {json.dumps(XSS)}"))
        code, out = ctl(server, "topology", "--set", str(topo))
        assert code == 0 and "document.title" in out, out
        with urllib.request.urlopen(web) as reply:
            csp = reply.headers["Content-Security-Policy"]
            assert "script-src 'self'" in csp and "unsafe-inline" not in csp.split(";")[1]
        dom = subprocess.run([exe, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
                              "--virtual-time-budget=2000", "--dump-dom", web],
                             capture_output=True, text=True, timeout=120).stdout
        assert "<table" in dom
        assert "&lt;img src=x" in dom and "<img" not in dom        # shown as text
        assert not re.search(r"<body[^>]*data-pwned", dom)            # the handler never ran
        assert "<title>pwned</title>" not in dom                       # nor the script
    finally:
        daemon.stop()
