"""A tiny fake of WebShop's Flask app (``web_agent_site/app.py``) for the HTTP adapter tests.

HAND-MADE TEST DOUBLE, not WebShop: the routes, URL shapes (``/<session>``,
``/search_results/<session>/<keywords>/<page>``, ``/item_page/<session>/<asin>/<keywords>/<page>/
<options>``, ``/item_sub_page/...``, ``/done/<session>/<asin>/<options>``), the ``fixed_<index>``
session convention and the page structure (ids, classes, forms) follow WebShop's published
``app.py`` and templates; the products, goals and the scoring rule are invented and much simpler
than WebShop's ``get_reward``: the right product with all goal options scores 1.0, the right
product with other options 0.5, any other product 0.0.
"""

from __future__ import annotations

import ast
import html
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, unquote


@dataclass(frozen=True)
class Product:
    asin: str
    title: str
    price: str
    options: dict[str, list[str]]
    description: str


PRODUCTS = [
    Product("B0RED00001", "Red cotton t-shirt for men", "$12.99",
            {"size": ["small", "large"], "color": ["red", "blue"]}, "A soft cotton shirt."),
    Product("B0MUG00002", "Ceramic coffee mug, 12 oz", "$8.50",
            {"color": ["white", "black"]}, "Dishwasher safe."),
    Product("B0SOX00003", "Wool hiking socks, 3 pairs", "$15.00", {}, "Warm socks."),
]  # fmt: skip
GOALS = [
    {"instruction": "i need a red cotton t-shirt in size large, and price lower than 20.00 dollars",
     "asin": "B0RED00001", "options": {"size": "large", "color": "red"}},
    {"instruction": "i am looking for a ceramic coffee mug in black",
     "asin": "B0MUG00002", "options": {"color": "black"}},
    {"instruction": "find me wool hiking socks", "asin": "B0SOX00003", "options": {}},
]  # fmt: skip

_HEAD = '<head><link rel="stylesheet" href="/static/style.css"><title>WebShop</title></head>'


def _instruction_block(instruction: str, keywords: str | None = None) -> str:
    query = f'<h4 style="padding:2px 10px;">Current Query: {keywords}</h4>' if keywords else ""
    return (
        '<div id="instruction-text">'
        f'<h4 style="padding:2px 10px;">Instruction: {html.escape(instruction)}</h4>{query}</div>'
    )


def _button(action: str, label: str, css: str = "btn btn-primary") -> str:
    return (
        f'<form method="post" action="{action}">'
        f'<button type="submit" class="{css}">{html.escape(label)}</button></form>'
    )


def search_page(session: str, instruction: str) -> str:
    return (
        f'<!DOCTYPE html><html>{_HEAD}<body><div class="container">'
        '<div id="logo" class="text-center"><h2>WebShop</h2></div>'
        f'<div id="instruction-text" class="text-center"><h4>Instruction: <br>'
        f"{html.escape(instruction)}</h4></div>"
        f'<form role="form" id="form-buscar" method="post" action="/{session}">'
        '<input id="search_input" class="form-control" type="text" name="search_query" '
        'placeholder="Search..." required/>'
        '<button class="btn btn-success" type="submit">Search</button></form>'
        "</div></body></html>"
    )


def _kw(keywords: list[str]) -> str:
    return quote(str(keywords), safe="")


def results_page(session: str, instruction: str, keywords: list[str], page: int) -> str:
    words = set(keywords)
    ranked = sorted(
        PRODUCTS,
        key=lambda p: (-len(words & set(p.title.lower().replace(",", "").split())), p.asin),
    )
    items = "".join(
        '<div class="grid-item">'
        '<h4 class="mt-0 font-weight-bold mb-2 product-asin">'
        f'<a class="product-link" href="/item_page/{session}/{p.asin}/{_kw(keywords)}/{page}/'
        f'{quote(str({}), safe="")}">{p.asin}</a></h4>'
        f'<h4 class="mt-0 font-weight-bold mb-2 product-title">{html.escape(p.title)}</h4>'
        f'<h5 class="font-weight-bold my-2 product-price">{p.price}</h5></div>'
        for p in ranked
    )
    return (
        f'<!DOCTYPE html><html>{_HEAD}<body><div class="container py-5">'
        + _instruction_block(instruction, " ".join(keywords))
        + f"<div><h1>Results</h1><p>Page {page} (1-10) of {len(PRODUCTS)} total results</p></div>"
        + _button(f"/{session}", "Back to Search", "btn btn-success")
        + f'<div class="grid-container">{items}</div></div></body></html>'
    )


def item_page(session: str, instruction: str, asin: str, keywords: str, page: str,
              options: dict[str, str]) -> str:  # fmt: skip
    product = next(p for p in PRODUCTS if p.asin == asin)
    radios = ""
    for name, values in product.options.items():
        radios += f'<div class="row top-buffer"><h4>{name}</h4><div class="radio-toolbar">'
        for i, value in enumerate(values):
            chosen = {**options, name: value}
            url = f"/item_page/{session}/{asin}/{keywords}/{page}/{quote(str(chosen), safe='')}"
            radios += (
                f'<input type="radio" id="radio_{name}{i}" name="{name}" value="{value}" '
                f'data-url="{url}"><label for="radio_{name}{i}">{value}</label>'
            )
        radios += "</div></div>"
    opts = quote(str(options), safe="")
    return (
        f'<!DOCTYPE html><html>{_HEAD}<body><div class="container py-5">'
        + _instruction_block(instruction, unquote(keywords))
        + _button(f"/{session}", "Back to Search", "btn btn-success")
        + _button(f"/search_results/{session}/{keywords}/{page}", "< Back to Results")
        + f"<div>{radios}</div><h2>{html.escape(product.title)}</h2>"
        + f"<h4>Price: {product.price}</h4><h4>Rating: N.A.</h4>"
        + _button(
            f"/item_sub_page/{session}/{asin}/{keywords}/{page}/Description/{opts}", "Description"
        )  # fmt: skip
        + _button(f"/done/{session}/{asin}/{opts}", "Buy Now", "btn btn-lg purchase")
        + "<script>console.log('options');</script></div></body></html>"
    )


def description_page(session: str, instruction: str, asin: str, keywords: str, page: str,
                     options: str) -> str:  # fmt: skip
    product = next(p for p in PRODUCTS if p.asin == asin)
    return (
        f'<!DOCTYPE html><html>{_HEAD}<body><div class="container py-5">'
        + _instruction_block(instruction, unquote(keywords))
        + _button(f"/{session}", "Back to Search", "btn btn-success")
        + _button(f"/item_page/{session}/{asin}/{keywords}/{page}/{options}", "< Back to Item Page")
        + f'<p class="product-info">{html.escape(product.description)}</p></div></body></html>'
    )


def done_page(asin: str, options: dict[str, str], goal: dict[str, Any], reward: float) -> str:
    return (
        f'<!DOCTYPE html><html>{_HEAD}<body><div class="container">'
        '<div id="thankyou" class="text-center"><h1>Thank you for shopping with us!</h1></div>'
        '<div id="stats" class="text-center"><h3 align="mturk_code">Your code: </h3>'
        "<p><pre>abc</pre> (Paste it in your MTurk interface.)</p>"
        '<div style="display:none"><h2 align="left">Purchased</h2>'
        f'<h4 id="asin">asin<pre>{asin}</pre></h4>'
        f'<h4 id="options">options<pre>{html.escape(str(options))}</pre></h4>'
        f'<h4 id="goal-asin">asin<pre>{goal["asin"]}</pre></h4></div>'
        f'<h3 id="reward">Your score (min 0.0, max 1.0)<pre>{reward}</pre></h3>'
        f'<h4 hidden>Reward Details <div id="reward_info"><pre>{{}}</pre></div></h4>'
        "</div></div></body></html>"
    )


class _Handler(BaseHTTPRequestHandler):
    server: _FakeWebShop

    def log_message(self, *args: Any) -> None:  # keep test output clean
        pass

    def do_GET(self) -> None:
        self._route(form={})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode() if length else ""
        self._route(form={k: v[0] for k, v in parse_qs(body).items()})

    def _send(self, status: int, body: str = "", location: str | None = None) -> None:
        self.send_response(status)
        if location:
            self.send_header("Location", location)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        data = body.encode()
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _route(self, form: dict[str, str]) -> None:
        self.server.requests.append((self.command, self.path))
        parts = [p for p in self.path.split("/") if p]
        try:
            if len(parts) == 1:
                session = parts[0]
                goal = self.server.goal(session)
                if "search_query" in form:
                    keywords = form["search_query"].lower().split(" ")
                    self._send(302, location=f"/search_results/{session}/{_kw(keywords)}/1")
                    return
                self._send(200, search_page(session, goal["instruction"]))
            elif parts[0] == "search_results":
                _, session, keywords, page = parts
                goal = self.server.goal(session)
                words = ast.literal_eval(unquote(keywords))
                self._send(200, results_page(session, goal["instruction"], words, int(page)))
            elif parts[0] == "item_page":
                _, session, asin, keywords, page, options = parts
                goal = self.server.goal(session)
                opts = ast.literal_eval(unquote(options))
                self._send(200, item_page(session, goal["instruction"], asin, keywords, page, opts))
            elif parts[0] == "item_sub_page":
                _, session, asin, keywords, page, _sub, options = parts
                goal = self.server.goal(session)
                self._send(200, description_page(session, goal["instruction"], asin, keywords,
                                                 page, options))  # fmt: skip
            elif parts[0] == "done":
                _, session, asin, options = parts
                goal = self.server.goal(session)
                opts = ast.literal_eval(unquote(options))
                if asin != goal["asin"]:
                    reward = 0.0
                else:
                    reward = (
                        1.0 if all(opts.get(k) == v for k, v in goal["options"].items()) else 0.5
                    )
                self._send(200, done_page(asin, opts, goal, reward))
            else:
                self._send(404, "not found")
        except (KeyError, ValueError, StopIteration, SyntaxError) as exc:
            self._send(500, f"server error: {exc}")


class _FakeWebShop(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[tuple[str, str]] = []

    def goal(self, session: str) -> dict[str, Any]:
        return GOALS[int(session.split("_")[-1]) % len(GOALS)]


@contextmanager
def fake_webshop() -> Iterator[_FakeWebShop]:
    """Serve the fake WebShop on a free loopback port; yields the server (``server_address``)."""
    server = _FakeWebShop()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
