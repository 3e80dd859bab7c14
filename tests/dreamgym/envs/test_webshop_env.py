"""WebShop adapter (dreamgym.envs.webshop_env): page parsing on hand-made fixtures, HTTP on a fake.

The fixtures in ``fixtures/webshop/`` and the server in ``fake_webshop.py`` are hand-made from
WebShop's published templates and routes (see their headers); no real WebShop runs here.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from dreamgym.envs import WebShopEnv, make_env
from dreamgym.envs.accounting import real_steps_total
from dreamgym.envs.webshop_env import (
    admissible_actions,
    goal_index,
    instruction_queries,
    parse_action,
    parse_page,
    rule_plan,
)
from dreamgym.testing.checkers import check_real_env

from .fake_webshop import GOALS, fake_webshop
from .helpers import play_expert

FIXTURES = Path(__file__).parent / "fixtures" / "webshop"
SESSION_URL = "http://webshop.test/dgfixturefixed_7"
ITEM_URL = (
    "http://webshop.test/item_page/dgfixturefixed_7/B07DKJQ1ZR/dark+chocolate/1/"
    "%7B%27size%27%3A%20%2712%20pack%27%7D"
)
NUM_GOALS = 1500 + len(GOALS)  # train goals 1500.. map onto the fake's goals in order


def fixture_page(name: str, url: str = SESSION_URL):
    return parse_page((FIXTURES / f"{name}.html").read_text(), url)


# --------------------------------------------------------------------------- parsing (fixtures)


def test_parse_search_page_splits_off_instruction_and_offers_search_not_click():
    page = fixture_page("search_page")

    assert page.kind == "search"
    assert page.instruction.startswith("i am looking for a gluten free dark chocolate bar")
    assert "Instruction" not in page.text and "gluten" not in page.text
    assert page.text == "WebShop [SEP] Search"
    assert page.search_url == SESSION_URL
    assert "search" not in page.clickables
    assert all(a.startswith("search[") for a in admissible_actions(page))


def test_parse_results_page_lists_products_as_lowercased_clicks():
    page = fixture_page("results_page", "http://webshop.test/search_results/s/q/1")

    assert page.kind == "results"
    assert page.products == ["b07dkjq1zr", "b01n5txda1"]
    assert page.clickables["b07dkjq1zr"].method == "GET"
    assert page.clickables["b07dkjq1zr"].url.startswith("http://webshop.test/item_page/")
    assert page.clickables["next >"].method == "POST"
    assert admissible_actions(page) == [
        "click[b01n5txda1]",
        "click[b07dkjq1zr]",
        "click[back to search]",
        "click[next >]",
    ]
    assert rule_plan(page) == ["click[b07dkjq1zr]"]


def test_parse_item_page_reads_options_and_selected_options_from_the_url():
    page = fixture_page("item_page", ITEM_URL)

    assert page.kind == "item"
    assert page.options == {"size": ["6 pack", "12 pack"], "flavor name": ["Sea Salt", "Almond"]}
    assert page.selected == {"12 pack"}
    assert "click[sea salt]" in admissible_actions(page)
    assert page.clickables["sea salt"].url.endswith("%27Sea%20Salt%27%7D")
    assert "radio handlers" not in page.text  # script text is invisible
    assert rule_plan(page) == ["click[sea salt]", "click[buy now]"]


def test_parse_done_page_reads_score_and_hides_goal_details():
    page = fixture_page("done_page", "http://webshop.test/done/s/a/o")

    assert page.kind == "done"
    assert page.score == pytest.approx(2 / 3)
    assert "Your score (min 0.0, max 1.0)" in page.text
    assert "goal" not in page.text.lower() and "r_type" not in page.text
    assert admissible_actions(page) == [] and rule_plan(page) == []


@pytest.mark.parametrize(
    ("instruction", "expected"),
    [
        ("i need a red shirt, and price lower than 40.00 dollars", "red shirt"),
        ("I'm looking for some sea salt chocolate", "sea salt chocolate"),
        ("find me wool socks", "wool socks"),
        ("blue jeans for men", "blue jeans for men"),
    ],
)
def test_instruction_queries_first_query_is_the_product_phrase(instruction, expected):
    queries = instruction_queries(instruction)

    assert queries[0] == expected
    assert queries[-1] == " ".join(instruction.lower().split())


def test_parse_action_accepts_search_and_click_only():
    assert parse_action("search[ red shoes ]") == ("search", "red shoes")
    assert parse_action("CLICK[Buy Now]") == ("click", "Buy Now")
    assert parse_action("buy now") is None
    assert parse_action("think[hmm]") is None


def test_goal_index_follows_webshop_splits():
    assert [goal_index(s, "eval", 6910) for s in (1_000_000, 1_000_499, 1_000_500)] == [0, 499, 0]
    assert goal_index(0, "train", 6910) == 1500
    assert goal_index(6910 - 1500, "train", 6910) == 1500
    assert all(1500 <= goal_index(s, "train", 6910) < 6910 for s in range(0, 10_000, 97))
    with pytest.raises(ValueError, match="split"):
        goal_index(0, "dev", 6910)
    with pytest.raises(ValueError, match="num_goals"):
        WebShopEnv("http://webshop.test", num_goals=1500)


# --------------------------------------------------------------------------- HTTP (fake server)


@pytest.fixture
def env(webshop_url):
    with WebShopEnv(webshop_url, num_goals=NUM_GOALS) as adapter:
        yield adapter


@pytest.mark.parametrize(("seed", "split"), [(0, "train"), (1_000_000, "eval")])
def test_check_real_env_webshop_passes(env, seed, split):
    check_real_env(env, seed=seed, split=split)


@pytest.mark.parametrize("seed", range(len(GOALS)))
def test_webshop_rule_expert_buys_the_goal_product_with_its_options(env, seed):
    results = play_expert(env, seed)

    assert results[-1].won and results[-1].reward == 1.0 and results[-1].info["score"] == 1.0
    assert [r.reward for r in results[:-1]] == [0.0] * (len(results) - 1)
    assert env.environment_id == "webshop" and env.expert_is_oracle is False


def test_webshop_wrong_options_end_the_episode_as_a_loss_with_partial_score(env):
    state, _ = env.reset(0)
    env.step(env.expert_actions()[0])  # search
    env.step(env.expert_actions()[0])  # open the product

    result = env.step("click[buy now]")  # without choosing size and colour

    assert result.terminated and not result.won and not result.truncated
    assert result.reward == 0.0 and result.info["score"] == 0.5 and result.info["lost"]
    assert result.state.admissible_actions == []
    with pytest.raises(RuntimeError, match="ended"):
        env.step("click[back to search]")


def test_webshop_selected_options_appear_in_the_observation(env):
    env.reset(0)
    env.step(env.expert_actions()[0])
    env.step(env.expert_actions()[0])

    result = env.step("click[large]")

    assert result.state.observation.endswith("[SEP] Selected: large")
    assert "click[buy now]" in result.state.admissible_actions


def test_webshop_unavailable_action_costs_a_step_and_changes_nothing(env):
    state, _ = env.reset(1)
    before = real_steps_total()

    result = env.step("click[buy now]")  # no buy button on the search page

    assert result.info["valid"] is False and not result.terminated
    assert result.state.observation == state.observation
    assert result.state.admissible_actions == state.admissible_actions
    assert result.state.step == 1 and env.num_steps_total >= 1
    assert real_steps_total() - before == 1


def test_webshop_any_search_query_is_accepted(env):
    env.reset(2)

    result = env.step("search[socks]")

    assert result.info["valid"] is True
    assert "click[b0sox00003]" in result.state.admissible_actions


def test_webshop_reset_opens_a_fixed_goal_session_and_is_deterministic(env):
    first, info = env.reset(1_000_001, "eval")
    second, info2 = env.reset(1_000_001, "eval")

    assert first == second
    assert info["goal_index"] == 1 and info["session"].endswith("fixed_1")
    assert info["session"] != info2["session"]
    assert first.task == GOALS[1]["instruction"]


def test_webshop_train_and_eval_goals_are_disjoint():
    train = {goal_index(s, "train", 12087) for s in range(0, 20_000, 7)}
    held_out = {goal_index(s, "eval", 12087) for s in range(1_000_000, 1_010_000, 3)}

    assert train.isdisjoint(held_out)
    assert max(held_out) < 500 <= 1500 <= min(train)


def test_webshop_http_path_follows_the_apps_routes():
    with fake_webshop() as server:
        host, port = server.server_address[:2]
        with WebShopEnv(f"http://{host}:{port}", num_goals=NUM_GOALS) as adapter:
            play_expert(adapter, 2)

    paths = [path.split("/")[1] for _, path in server.requests]
    assert paths[0].endswith("fixed_1502")
    assert ("POST", server.requests[1][1]) == server.requests[1]  # the search form is posted
    assert paths[2:] == ["search_results", "item_page", "done"]


def test_webshop_unreachable_server_raises_http_error():
    with (
        WebShopEnv("http://127.0.0.1:9", num_goals=NUM_GOALS, timeout_s=2) as adapter,
        pytest.raises(httpx.HTTPError),
    ):
        adapter.reset(0)


def test_make_env_webshop_takes_url_from_environment(monkeypatch):
    monkeypatch.setenv("DREAMGYM_WEBSHOP_URL", "http://shop.example:3000/")

    env = make_env("webshop", max_steps=9, num_goals=12087)

    assert isinstance(env, WebShopEnv)
    assert env.base_url == "http://shop.example:3000" and env.max_steps == 9
    assert env.num_goals == 12087
