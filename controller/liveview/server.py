"""Serves the live view over HTTP (Starlette on uvicorn, in a thread of fabricd).

`/` is the page; `/view` the fragment it fetches every second (SVG and link table);
`/links.json` the same figures for scripts. The page's only script (`/live.js`) swaps the
fragment in. Every value a page shows is escaped (a topology's or a job's name comes from an
API client), and the Content-Security-Policy runs no script but that file, so markup that
slipped through would still be inert."""
from __future__ import annotations

import logging
import socket
import threading
from html import escape

import uvicorn
from starlette.applications import Starlette
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from controller.liveview import view
from controller.liveview.loads import LoadSampler
from controller.liveview.usage import link_users

log = logging.getLogger("fabricd")

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>mlfabric: {name}</title>
<style>body{{font-family:sans-serif;margin:1em}} table{{border-collapse:collapse;
font-size:12px}} td,th{{border:1px solid #ccc;padding:2px 6px}}
tr[data-state=down] td{{color:#d62728}}</style></head>
<body><h3>{name}: each direction's load over the last second</h3>
<div id="view">{fragment}</div>
<script src="live.js"></script></body></html>
"""
SCRIPT = """setInterval(async () => {
  const r = await fetch("view", {cache: "no-store"});
  if (r.ok) document.getElementById("view").innerHTML = await r.text();
}, 1000);
"""
# the page's own <style> and the link table's colours are inline styles; nothing else runs
HEADERS = {"Content-Security-Policy": "default-src 'none'; script-src 'self'; "
           "connect-src 'self'; style-src 'unsafe-inline'; img-src 'self'; base-uri 'none'; "
           "form-action 'none'; frame-ancestors 'none'",
           "X-Content-Type-Options": "nosniff"}


class LiveView:
    """What the pages show, read under fabricd's lock so a change is seen whole."""

    def __init__(self, fabric, sampler: LoadSampler) -> None:
        self.fabric, self.sampler = fabric, sampler

    def snapshot(self):
        with self.fabric.lock:
            intent = self.fabric.intent
            topo, users, failed = intent.topo, link_users(intent), set(intent.failed)
        return topo, self.sampler.link_loads(), users, failed

    def app(self) -> Starlette:
        async def page(request):
            topo, loads, users, failed = self.snapshot()
            return HTMLResponse(PAGE.format(name=escape(topo.name),
                                            fragment=view.fragment(topo, loads, users, failed)),
                                headers=HEADERS)

        async def fragment(request):
            return HTMLResponse(view.fragment(*self.snapshot()), headers=HEADERS)

        async def script(request):
            return Response(SCRIPT, media_type="text/javascript", headers=HEADERS)

        async def links(request):
            topo, loads, users, failed = self.snapshot()
            return JSONResponse([
                {"link": lk.name, "up": lk.index not in failed, "users": users.get(lk.index, []),
                 "bps": {src: loads.get((lk.index, src), 0.0) for src in (lk.a, lk.b)}}
                for lk in topo.links], headers=HEADERS)

        return Starlette(routes=[Route("/", page), Route("/view", fragment),
                                 Route("/live.js", script), Route("/links.json", links)])


def _bind(listen: str) -> socket.socket:
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"--web {listen!r}: expected HOST:PORT")
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), int(port)))
    except OSError as err:
        sock.close()
        raise ValueError(f"--web {listen}: cannot listen: {err.strerror}") from None
    return sock


class WebServer:
    """The sampler and the HTTP server, started together and stopped together."""

    def __init__(self, fabric, listen: str, period: float = 0.25) -> None:
        self.sock = _bind(listen)
        self.port = self.sock.getsockname()[1]
        self.sampler = LoadSampler(fabric, period)
        config = uvicorn.Config(LiveView(fabric, self.sampler).app(), log_level="warning",
                                lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]},
                                       name="liveview-http", daemon=True)

    def start(self) -> WebServer:
        self.sampler.start()
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=5)
        self.sampler.stop()
        self.sock.close()

