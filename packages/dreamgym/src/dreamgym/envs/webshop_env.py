"""WebShop adapter: plays the official WebShop Flask app over HTTP, in WebShop's text mode.

WebShop (Yao et al., 2022; ``princeton-nlp/WebShop``) is a simulated shop with real products and
crowd-sourced instructions. Its data lives outside the package index, so this adapter does not run
WebShop itself: it talks HTTP to a running ``web_agent_site.app`` server (``python -m
web_agent_site.app``, port 3000; docs/environments.md says how to run one) at ``base_url``
(default ``$DREAMGYM_WEBSHOP_URL`` or ``http://127.0.0.1:3000``), the way a browser does:

- ``reset`` opens ``/<session>`` with a session id ending in ``fixed_<goal index>``, which makes
  the app use that instruction (WebShop's own convention);
- ``search[query]`` posts the search form (``search_query``) and follows the redirect;
- ``click[button]`` posts the button's form, ``click[<asin>]`` follows the product link,
  ``click[<option>]`` follows the option's ``data-url``;
- ``click[buy now]`` opens the done page, whose ``Your score (min 0.0, max 1.0)`` is the reward.

Observation: WebShop's ``text`` observation mode (the page's visible strings joined by
``[SEP]``, as ``WebAgentTextEnv.convert_html_to_text(simple=True)``) without the instruction
block, which is the state's task, and without elements hidden by ``hidden`` or ``display:none``
(the done page's goal and reward details); on an item page the selected options follow as
``[SEP] Selected: large, red`` (WebShop's text mode does not show them, so the state would not
be Markov without). Actions follow WebShop's text environment: ``search[...]`` when
the page has a search bar, ``click[...]`` for every button (lower-cased), product link (the
lower-cased ASIN) and buying option. Admissible actions: all those clicks, and, since a search
query is free text, a bounded set of queries derived from the instruction: the instruction itself
and its product phrase (:func:`instruction_queries`). ``step`` accepts any ``search[...]``.

Splits follow WebShop's baselines: ``eval`` plays goals 0-499 (WebShop's test set) and ``train``
goals 1500 and up (500-1499 are WebShop's dev set, never played): ``seed mod 1,000,000`` selects
the goal within the split. ``num_goals`` must match the server's goal count (6,910 with the
1,000-product ``small`` data set, 12,087 with the full one).

Reward: outcome reward 1.0 when WebShop's score is 1.0 (success, the metric of DreamGym's Table 1),
else 0.0; the score itself is ``info["score"]`` and ``info["native_reward"]``. Buying ends the
episode (``won`` iff the score is 1.0; a lower score is a loss).

Expert: WebShop has no oracle. :meth:`WebShopEnv.expert_actions` returns the rule baseline of the
WebShop paper, extended with option matching: search the instruction's product phrase, open the
first result, click every option whose value appears in the instruction, buy. It is a heuristic
(``expert_is_oracle = False``), not an upper bound.

>>> env = WebShopEnv("http://127.0.0.1:3000", num_goals=6910)   # doctest: +SKIP
>>> state, info = env.reset(seed=0, split="eval")               # doctest: +SKIP
>>> state.admissible_actions[:1]                                # doctest: +SKIP
['search[3 ounce bottle of bright citrus deodorant for sensitive skin]']
"""

from __future__ import annotations

import os
import re
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urljoin

import httpx

from dreamgym.envs.accounting import record_real_step
from dreamgym.envs.base import StepResult
from dreamgym.envs.splits import SPLIT_SIZE
from dreamgym.types import AbstractState

__all__ = [
    "DEFAULT_MAX_STEPS",
    "DEFAULT_NUM_GOALS",
    "DEFAULT_URL",
    "ENVIRONMENT_ID",
    "GOAL_RANGES",
    "Page",
    "WebShopEnv",
    "instruction_queries",
    "parse_action",
    "parse_page",
    "rule_plan",
]

ENVIRONMENT_ID = "webshop"
DEFAULT_URL = "http://127.0.0.1:3000"
DEFAULT_MAX_STEPS = 15
DEFAULT_NUM_GOALS = 6910
# WebShop baselines: test = goals[0:500], dev = goals[500:1500], train = goals[1500:].
GOAL_RANGES: dict[str, tuple[int, int | None]] = {"eval": (0, 500), "train": (1500, None)}
_SEP = " [SEP] "
_REWARD_LABEL = "Your score (min 0.0, max 1.0)"
_INVISIBLE = frozenset({"style", "script", "head", "title", "meta", "[document]"})
_ACTION = re.compile(r"^\s*(search|click)\[(.*)\]\s*$", re.IGNORECASE | re.DOTALL)
_QUERY_PREFIX = re.compile(
    r"^(?:i(?:'m| am) (?:looking|searching|shopping) for"
    r"|i (?:want|need|would like)(?: to (?:buy|get|find))?"
    r"|find me|get me|buy me|please find|show me)\s+(?:an?\s+|some\s+)?",
    re.IGNORECASE,
)
_PRICE_SUFFIX = re.compile(r",?\s*(?:and\s+)?price\s+(?:lower|less)\s+than.*$", re.IGNORECASE)
_WIN_SCORE = 1.0 - 1e-9


# --------------------------------------------------------------------------- pure page logic


@dataclass(frozen=True)
class Clickable:
    """How to activate one clickable element: an HTTP method and an absolute URL."""

    method: str
    url: str


@dataclass(frozen=True)
class Page:
    """A parsed WebShop page.

    Attributes:
        kind: ``"search"``, ``"results"``, ``"item"``, ``"item_sub"`` or ``"done"``.
        instruction: the instruction text shown on the page (``""`` if absent).
        text: the page in WebShop's ``text`` mode without the instruction block.
        search_url: where the search form posts, or ``None`` without a search bar.
        clickables: lower-cased click argument → :class:`Clickable`.
        products: ASINs of the product links, in page order (lower-cased).
        options: option group → option values (item pages).
        selected: option values selected on this page (from the options in the URL's last
            path segment, as WebShop encodes them).
        score: the done page's score, else ``None``.
    """

    kind: str
    instruction: str
    text: str
    search_url: str | None
    clickables: dict[str, Clickable] = field(default_factory=dict)
    products: list[str] = field(default_factory=list)
    options: dict[str, list[str]] = field(default_factory=dict)
    selected: frozenset[str] = frozenset()
    score: float | None = None


def _visible(node: Any) -> bool:
    from bs4.element import Comment

    return node.parent.name not in _INVISIBLE and not isinstance(node, Comment)


def parse_page(html: str, url: str) -> Page:
    """Parse a WebShop page (HTML as served by ``web_agent_site.app``).

    Args:
        html: the page's HTML.
        url: the page's URL (resolves relative links; the selected options are read from it).

    Returns:
        The :class:`Page`.
    """
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    instruction_node = soup.find(id="instruction-text")
    instruction = ""
    if instruction_node is not None and instruction_node.find("h4") is not None:
        first = instruction_node.find("h4").get_text(" ", strip=True)
        instruction = " ".join(first.removeprefix("Instruction:").split())
    hidden = [
        tag
        for tag in soup.find_all(True)
        if tag.has_attr("hidden") or "display:none" in str(tag.get("style", "")).replace(" ", "")
    ]
    if instruction_node is not None:
        hidden.append(instruction_node)
    texts = []
    for node in soup.find_all(string=True):
        if not _visible(node) or not node.strip():
            continue
        if any(tag in node.parents for tag in hidden):
            continue
        texts.append(node.strip())
    clickables: dict[str, Clickable] = {}
    for button in soup.find_all(class_="btn"):
        form = button.find_parent("form")
        if form is None or not button.get_text(strip=True) or form.find(id="search_input"):
            continue  # the search form's button is the search action, not a click
        target = urljoin(url, form.get("action") or url)
        clickables[button.get_text(strip=True).lower()] = Clickable(
            (form.get("method") or "get").upper(), target
        )
    products = []
    for link in soup.find_all("a", class_="product-link"):
        asin = link.get_text(strip=True).lower()
        products.append(asin)
        clickables[asin] = Clickable("GET", urljoin(url, link.get("href", "")))
    options: dict[str, list[str]] = {}
    for radio in soup.select('input[type="radio"]'):
        value = str(radio.get("value", ""))
        options.setdefault(str(radio.get("name", "")), []).append(value)
        clickables[value.lower()] = Clickable("GET", urljoin(url, radio.get("data-url", "")))
    search_form = soup.find(id="search_input")
    search_url = None
    if search_form is not None:
        form = search_form.find_parent("form")
        search_url = urljoin(url, form.get("action") or url) if form is not None else url
    score = _score(soup)
    kind = _page_kind(soup, clickables, score)
    decoded = unquote(httpx.URL(url).raw_path.decode("ascii", "replace").rsplit("/", 1)[-1])
    selected = frozenset(
        v for vs in options.values() for v in vs if f"'{v}'" in decoded or f'"{v}"' in decoded
    )
    return Page(
        kind=kind,
        instruction=instruction,
        text=_SEP.join(texts),
        search_url=search_url,
        clickables=clickables,
        products=products,
        options=options,
        selected=selected,
        score=score,
    )


def _score(soup: Any) -> float | None:
    node = soup.find(id="reward")
    if node is None:
        return None
    pre = node.find("pre")
    value = pre.get_text(strip=True) if pre is not None else node.get_text(strip=True)
    value = value.replace(_REWARD_LABEL, "").strip()
    try:
        return float(value)
    except ValueError:
        return None


def _page_kind(soup: Any, clickables: dict[str, Clickable], score: float | None) -> str:
    if score is not None:
        return "done"
    if soup.find(id="search_input") is not None:
        return "search"
    if "buy now" in clickables:
        return "item"
    if "< back to item page" in clickables:
        return "item_sub"
    return "results"


def instruction_queries(instruction: str) -> list[str]:
    """Search queries derived from an instruction: the product phrase, then the full text.

    >>> instruction_queries("i need a red shirt, and price lower than 40.00 dollars")
    ['red shirt', 'i need a red shirt, and price lower than 40.00 dollars']
    """
    full = " ".join(instruction.lower().split())
    core = _PRICE_SUFFIX.sub("", _QUERY_PREFIX.sub("", full)).strip(" ,.")
    return list(dict.fromkeys(q for q in (core, full) if q))


def parse_action(action: str) -> tuple[str, str] | None:
    """``("search" | "click", argument)`` of a WebShop action, or ``None`` if malformed.

    >>> parse_action("click[Buy Now]")
    ('click', 'Buy Now')
    """
    match = _ACTION.match(action)
    if match is None:
        return None
    return match.group(1).lower(), match.group(2).strip()


def admissible_actions(page: Page) -> list[str]:
    """WebShop's available actions on ``page`` with the bounded search queries (sorted)."""
    actions = {f"click[{name}]" for name in page.clickables}
    if page.search_url is not None:
        actions.update(f"search[{q}]" for q in instruction_queries(page.instruction))
    return sorted(actions)


def rule_plan(page: Page) -> list[str]:
    """The rule baseline's remaining actions on this page (module docstring); ``[]`` if none."""
    if page.kind == "search":
        queries = instruction_queries(page.instruction)
        return [f"search[{queries[0]}]"] if queries else []
    if page.kind == "results":
        return [f"click[{page.products[0]}]"] if page.products else []
    if page.kind == "item_sub":
        return ["click[< back to item page]"]
    if page.kind == "item":
        wanted = " ".join(page.instruction.lower().split())
        plan = []
        for values in page.options.values():
            for value in values:
                if value not in page.selected and re.search(
                    r"(?<![a-z0-9])" + re.escape(value.lower()) + r"(?![a-z0-9])", wanted
                ):
                    plan.append(f"click[{value.lower()}]")
                    break
        return [*plan, "click[buy now]"]
    return []


# --------------------------------------------------------------------------- the adapter


def _default_url() -> str:
    return os.environ.get("DREAMGYM_WEBSHOP_URL", DEFAULT_URL)


def goal_index(seed: int, split: str, num_goals: int) -> int:
    """The WebShop goal index played for ``(split, seed)`` (module docstring).

    Raises:
        ValueError: unknown split or ``num_goals`` too small for the split.
    """
    if split not in GOAL_RANGES:
        raise ValueError(f"split must be one of {sorted(GOAL_RANGES)}, got {split!r}")
    start, stop = GOAL_RANGES[split]
    stop = num_goals if stop is None else min(stop, num_goals)
    if stop <= start:
        raise ValueError(f"num_goals={num_goals} leaves no {split} goals (need > {start})")
    return start + (int(seed) % SPLIT_SIZE) % (stop - start)


class WebShopEnv:
    """WebShop over HTTP behind the :class:`~dreamgym.envs.base.RealEnv` interface.

    Args:
        base_url: the WebShop server (default ``$DREAMGYM_WEBSHOP_URL`` or
            ``http://127.0.0.1:3000``).
        max_steps: truncation limit in actions (default 15, as in Verl-Agent).
        num_goals: number of goals the server has (see the module docstring).
        timeout_s: HTTP timeout per request in seconds.
        client: an ``httpx.Client`` to use (tests); by default one is created and owned.

    Attributes:
        environment_id: ``"webshop"``.
        expert_is_oracle: ``False``: :meth:`expert_actions` is a rule baseline.
        num_steps_total: real environment steps over this adapter's lifetime.

    Raises:
        ValueError: ``max_steps < 1`` or ``num_goals`` <= 1500 (no train goals).
    """

    expert_is_oracle = False

    def __init__(
        self,
        base_url: str | None = None,
        *,
        max_steps: int | None = None,
        num_goals: int = DEFAULT_NUM_GOALS,
        timeout_s: float = 30.0,
        client: httpx.Client | None = None,
    ):
        self.environment_id = ENVIRONMENT_ID
        self.base_url = (base_url or _default_url()).rstrip("/")
        self.max_steps = DEFAULT_MAX_STEPS if max_steps is None else int(max_steps)
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {self.max_steps}")
        goal_index(0, "train", num_goals)  # validates num_goals
        self.num_goals = int(num_goals)
        self.num_steps_total = 0
        self._owns_client = client is None
        self._client = client or httpx.Client(timeout=timeout_s, follow_redirects=True)
        self._page: Page | None = None
        self._url = ""
        self._task = ""
        self._step = 0
        self._done = False

    def reset(self, seed: int, split: str = "train") -> tuple[AbstractState, dict[str, Any]]:
        """Open a new session on the goal selected by ``(split, seed)``.

        Returns:
            ``(state, info)`` with ``info`` keys ``raw_observation`` (the page text, instruction
            included), ``seed``, ``split``, ``goal_index``, ``session`` and ``url``.

        Raises:
            ValueError: unknown split.
            httpx.HTTPError: the server is unreachable or answers with an error.
        """
        index = goal_index(seed, split, self.num_goals)
        session = f"dg{uuid.uuid4().hex[:12]}fixed_{index}"
        page, url = self._request("GET", f"{self.base_url}/{session}")
        self._page, self._url, self._step, self._done = page, url, 0, False
        self._task = page.instruction or "Buy the product described by the instruction."
        info = {
            "raw_observation": f"Instruction: {page.instruction}{_SEP}{page.text}",
            "seed": int(seed),
            "split": split,
            "goal_index": index,
            "session": session,
            "url": url,
        }
        return self._state(page, terminated=False), info

    def step(self, action: str) -> StepResult:
        """Apply a WebShop action; invalid or unavailable actions cost a step and change nothing.

        Returns:
            A :class:`StepResult` (reward 1.0 iff the purchase scores 1.0); ``info`` holds
            ``raw_observation``, ``native_reward`` and ``score`` (the purchase's score, 0.0 before
            buying), ``valid`` (whether the action was available) and ``lost``.

        Raises:
            RuntimeError: before :meth:`reset` or after the episode ended.
            httpx.HTTPError: the server is unreachable or answers with an error.
        """
        if self._page is None:
            raise RuntimeError(f"{self.environment_id}: call reset() before step()")
        if self._done:
            raise RuntimeError(f"{self.environment_id}: the episode has ended; call reset()")
        page, url, valid = self._transition(self._page, action)
        self.num_steps_total += 1
        record_real_step()
        self._step += 1
        self._page, self._url = page, url
        score = page.score if page.score is not None else 0.0
        terminated = page.kind == "done"
        won = terminated and score >= _WIN_SCORE
        truncated = not terminated and self._step >= self.max_steps
        self._done = terminated or truncated
        info = {
            "raw_observation": page.text,
            "native_reward": float(score),
            "score": float(score),
            "valid": valid,
            "lost": terminated and not won,
        }
        return StepResult(
            state=self._state(page, terminated=terminated),
            reward=1.0 if won else 0.0,
            terminated=terminated,
            truncated=truncated,
            won=won,
            info=info,
        )

    def expert_actions(self) -> list[str]:
        """The rule baseline's next actions on the current page (``[]`` once ended)."""
        if self._page is None or self._done:
            return []
        return rule_plan(self._page)

    def close(self) -> None:
        """Close the HTTP client if this adapter created it."""
        self._page = None
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> WebShopEnv:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ helpers

    def _request(
        self, method: str, url: str, data: dict[str, str] | None = None
    ) -> tuple[Page, str]:
        response = self._client.request(method, url, data=data)
        response.raise_for_status()
        final_url = str(response.url)
        return parse_page(response.text, final_url), final_url

    def _transition(self, page: Page, action: str) -> tuple[Page, str, bool]:
        parsed = parse_action(action)
        if parsed is not None:
            kind, argument = parsed
            if kind == "search" and argument and page.search_url is not None:
                next_page, url = self._request(
                    "POST", page.search_url, data={"search_query": argument}
                )
                return next_page, url, True
            target = page.clickables.get(argument.lower()) if kind == "click" else None
            if target is not None:
                next_page, url = self._request(target.method, target.url)
                return next_page, url, True
        return page, self._url, False

    def _state(self, page: Page, *, terminated: bool) -> AbstractState:
        observation = page.text
        if page.selected:
            observation += f"{_SEP}Selected: {', '.join(sorted(page.selected))}"
        return AbstractState(
            task=self._task,
            observation=observation,
            admissible_actions=[] if terminated else admissible_actions(page),
            step=self._step,
        )
