"""Tests of agent_trainer.policy: the prompt, constrained decoding and the loss log-probs."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_trainer.policy import Decision, HistoryItem, build_agent_prompt
from agent_trainer.value_head import ValueHead

from .factories import ACTIONS, PREFIX_ACTIONS, action_probabilities, make_state, trie_decision

pytestmark = pytest.mark.model

FAST = settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
WORDS = st.text(alphabet="abcdefghlmnortuw ", min_size=1, max_size=14).map(str.strip).filter(bool)
ACTION_LISTS = st.lists(
    st.one_of(st.sampled_from(PREFIX_ACTIONS), WORDS), min_size=1, max_size=6, unique=True
)
HISTORY = [HistoryItem(f"observation {i}", f"action {i}") for i in range(5)]


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# -- build_agent_prompt ------------------------------------------------------------------------


def test_build_agent_prompt_shows_task_step_observation_actions_and_ends_with_action():
    state = make_state(
        ["move north", "take coin"],
        task="Find  the\ncoin.",
        step=3,
        observation="You are in\nthe kitchen.",
    )

    prompt = build_agent_prompt(state, [], history_length=2)

    assert prompt.splitlines() == [
        "Task: Find the coin.",
        "Step: 3",
        "Observation: You are in the kitchen.",
        "Actions: move north | take coin",
        "Action:",
    ]


def test_build_agent_prompt_long_history_shows_only_last_history_length_items():
    prompt = build_agent_prompt(make_state(), HISTORY, history_length=2)

    assert "Recent:\n- observation 3 -> action 3\n- observation 4 -> action 4\n" in prompt
    assert "action 2" not in prompt
    assert prompt.endswith("Action:")


def test_build_agent_prompt_history_length_zero_shows_no_history():
    prompt = build_agent_prompt(make_state(), HISTORY, history_length=0)

    assert "Recent:" not in prompt
    assert "observation 4" not in prompt


def test_build_agent_prompt_history_shorter_than_length_shows_all_in_order():
    prompt = build_agent_prompt(make_state(), HISTORY[:2], history_length=4)

    assert "Recent:\n- observation 0 -> action 0\n- observation 1 -> action 1\n" in prompt


def test_prompt_ids_follow_policy_history_length(make_policy):
    policy = make_policy(history_length=1)

    text = policy.tokenizer.decode(policy.prompt_ids(make_state(), HISTORY))

    assert text == build_agent_prompt(make_state(), HISTORY, history_length=1)


# -- act: constrained decoding -----------------------------------------------------------------


@FAST
@given(actions=ACTION_LISTS, seed=st.integers(0, 2**16))
def test_act_random_action_lists_returns_admissible_action_with_its_token_ids(
    policy, actions, seed
):
    state = make_state(actions)

    (decision,) = policy.act([state], [[]], generator=gen(seed))

    assert decision.action in actions
    assert decision.completion_ids == policy.action_token_ids(decision.action)
    assert decision.completion_ids[-1] == policy.eos
    assert decision.allowed == trie_decision(policy, state, decision.action).allowed


@FAST
@given(actions=ACTION_LISTS, seed=st.integers(0, 2**16))
def test_act_forced_positions_have_logprob_zero_and_choice_positions_are_negative(
    policy, actions, seed
):
    (decision,) = policy.act([make_state(actions)], [[]], generator=gen(seed))

    for allowed, token, log_prob in zip(
        decision.allowed, decision.completion_ids, decision.sampled_log_probs, strict=True
    ):
        assert token in allowed
        if len(allowed) == 1:
            assert log_prob == 0.0
        else:
            assert log_prob <= 0.0


@FAST
@given(actions=ACTION_LISTS)
def test_action_probabilities_over_admissible_actions_sum_to_one(policy, actions):
    probabilities = action_probabilities(policy, make_state(actions), HISTORY)

    assert sum(probabilities.values()) == pytest.approx(1.0, abs=1e-5)
    assert all(0.0 < p <= 1.0 for p in probabilities.values())


def test_act_single_action_state_is_fully_forced(policy):
    (decision,) = policy.act([make_state(["look around"])], [[]], generator=gen(0))

    assert decision.action == "look around"
    assert decision.sampled_log_probs == [0.0] * len(decision.completion_ids)
    assert all(len(a) == 1 for a in decision.allowed)


def test_act_token_prefix_action_can_end_where_longer_action_continues(policy):
    state = make_state(["go", "go north"])
    go, go_north = policy.action_token_ids("go"), policy.action_token_ids("go north")
    assert go_north[: len(go) - 1] == go[:-1]  # " go" is a token prefix of " go north"

    chosen = {policy.act([state], [[]], generator=gen(s))[0].action for s in range(40)}

    assert chosen == {"go", "go north"}
    decision = trie_decision(policy, state, "go")
    assert decision.allowed[len(go) - 1] == sorted({policy.eos, go_north[len(go) - 1]})


def test_act_sampling_frequencies_follow_action_probabilities(policy):
    state = make_state(PREFIX_ACTIONS[:4])
    probabilities = action_probabilities(policy, state)
    draws = 400

    counts = dict.fromkeys(probabilities, 0)
    for decision in policy.act([state] * draws, [[]] * draws, generator=gen(7)):
        counts[decision.action] += 1

    for action, p in probabilities.items():
        assert counts[action] / draws == pytest.approx(p, abs=4 * math.sqrt(p * (1 - p) / draws))


def test_act_greedy_is_deterministic_and_picks_most_likely_allowed_token(policy):
    state = make_state(PREFIX_ACTIONS)

    first = policy.act([state], [HISTORY], temperature=0.0)[0]
    second = policy.act([state], [HISTORY], temperature=0.0, generator=gen(123))[0]

    assert first == second
    for log_prob, allowed in zip(first.sampled_log_probs, first.allowed, strict=True):
        assert log_prob >= math.log(1 / len(allowed)) - 1e-6  # the most likely allowed token


def test_act_same_generator_seed_reproduces_decisions(policy):
    states, histories = [make_state(PREFIX_ACTIONS)] * 6, [HISTORY] * 6

    first = policy.act(states, histories, generator=gen(5))
    second = policy.act(states, histories, generator=gen(5))

    assert first == second


def test_act_different_generator_seeds_sample_different_actions(policy):
    state = make_state(PREFIX_ACTIONS)

    actions = {policy.act([state], [[]], generator=gen(s))[0].action for s in range(20)}

    assert len(actions) > 1


def test_act_state_without_admissible_actions_raises_value_error_naming_it(policy):
    states = [make_state(), make_state([])]

    with pytest.raises(ValueError, match=r"states\[1\] has no admissible actions"):
        policy.act(states, [[], []])


def test_act_batch_with_different_prompt_lengths_matches_acting_alone(policy):
    states = [
        make_state(PREFIX_ACTIONS),
        make_state(["go", "open door"], observation="Hi."),
        make_state(ACTIONS, observation="A much longer observation " * 12, step=4),
    ]
    histories = [HISTORY, [], HISTORY[:1]]
    assert len({len(policy.prompt_ids(s, h)) for s, h in zip(states, histories, strict=True)}) == 3

    batch = policy.act(states, histories, temperature=0.0)
    alone = [
        policy.act([s], [h], temperature=0.0)[0] for s, h in zip(states, histories, strict=True)
    ]

    for b, a in zip(batch, alone, strict=True):
        assert b.completion_ids == a.completion_ids
        torch.testing.assert_close(
            torch.tensor(b.sampled_log_probs), torch.tensor(a.sampled_log_probs), atol=1e-4, rtol=0
        )


def test_act_records_temperature_one_log_probs_when_sampling_colder(policy):
    decisions = policy.act(
        [make_state(PREFIX_ACTIONS)] * 4, [HISTORY] * 4, temperature=0.3, generator=gen(1)
    )

    with torch.no_grad():
        log_probs, _ = policy.completion_log_probs(decisions)

    for row, d in zip(log_probs, decisions, strict=True):
        torch.testing.assert_close(
            row[: len(d.sampled_log_probs)], torch.tensor(d.sampled_log_probs), atol=1e-4, rtol=0
        )


# -- completion_log_probs ----------------------------------------------------------------------


def sampled_batch(policy, seed: int = 0):
    states = [
        make_state(PREFIX_ACTIONS),
        make_state(["go", "go north"]),
        make_state(ACTIONS),
        make_state(["look around"]),
    ]
    return policy.act(states, [HISTORY, [], HISTORY[:1], []], generator=gen(seed))


def padded(rows: list[list[float]], width: int) -> torch.Tensor:
    return torch.tensor([r + [0.0] * (width - len(r)) for r in rows])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_completion_log_probs_equal_sampled_log_probs(policy, seed):
    decisions = sampled_batch(policy, seed)

    with torch.no_grad():
        log_probs, _ = policy.completion_log_probs(decisions)

    expected = padded([d.sampled_log_probs for d in decisions], log_probs.shape[1])
    torch.testing.assert_close(log_probs, expected, atol=1e-4, rtol=0)


def test_completion_log_probs_mask_is_true_exactly_on_choice_positions(policy):
    decisions = sampled_batch(policy)

    _, mask = policy.completion_log_probs(decisions)

    expected = torch.zeros(mask.shape, dtype=torch.bool)
    for i, d in enumerate(decisions):
        for j, allowed in enumerate(d.allowed):
            expected[i, j] = len(allowed) > 1
    assert torch.equal(mask, expected)
    assert not mask[3].any()  # the single-action state carries no choice


def test_completion_log_probs_only_forced_tokens_gives_zeros_and_empty_mask(policy):
    decisions = policy.act([make_state(["look around"])], [[]])

    log_probs, mask = policy.completion_log_probs(decisions)

    assert not mask.any()
    assert torch.equal(log_probs, torch.zeros_like(log_probs))


def test_completion_log_probs_match_brute_force_masked_full_vocabulary_log_softmax(policy):
    decisions = sampled_batch(policy, seed=3)

    with torch.no_grad():
        log_probs, mask = policy.completion_log_probs(decisions)
        for i, d in enumerate(decisions):
            ids = torch.tensor([d.prompt_ids + d.completion_ids])
            logits = policy.model(input_ids=ids).logits[0].float()  # (L, V)
            for j, (token, allowed) in enumerate(zip(d.completion_ids, d.allowed, strict=True)):
                row = logits[len(d.prompt_ids) + j - 1]
                masked = torch.full_like(row, -math.inf)
                masked[allowed] = row[allowed]
                expected = torch.log_softmax(masked, dim=-1)[token]
                torch.testing.assert_close(log_probs[i, j], expected, atol=1e-5, rtol=0)
    assert mask.any()


def test_completion_log_probs_are_differentiable_into_the_model(make_policy):
    policy = make_policy(seed=4)
    decisions = sampled_batch(policy)

    log_probs, mask = policy.completion_log_probs(decisions)
    (-(log_probs * mask).sum()).backward()

    grads = {n: p.grad for n, p in policy.model.named_parameters()}
    assert all(g is not None and bool(g.abs().sum() > 0) for g in grads.values()), [
        n for n, g in grads.items() if g is None or not bool(g.abs().sum() > 0)
    ]


def test_completion_log_probs_forced_tail_positions_are_exact_zeros(policy):
    decision = trie_decision(policy, make_state(["take coin", "look around"]), "take coin")

    with torch.no_grad():
        base, mask = policy.completion_log_probs([decision])

    assert mask[0, 0] and not mask[0, 1:].any()
    assert torch.equal(base[0, 1:], torch.zeros(len(decision.completion_ids) - 1))


# -- free decoding -----------------------------------------------------------------------------


def test_act_free_decoding_log_probs_match_full_softmax_scoring(make_policy):
    policy = make_policy(seed=0, decoding="free", max_action_tokens=4)

    decisions = policy.act([make_state(), make_state(["x"])], [HISTORY, []], generator=gen(0))
    with torch.no_grad():
        log_probs, mask = policy.completion_log_probs(decisions)

    for row, m, d in zip(log_probs, mask, decisions, strict=True):
        assert 1 <= len(d.completion_ids) <= 4
        assert d.allowed == [[]] * len(d.completion_ids)
        assert m[: len(d.completion_ids)].all()
        torch.testing.assert_close(
            row[: len(d.completion_ids)], torch.tensor(d.sampled_log_probs), atol=1e-4, rtol=0
        )


# -- evaluate: entropy and values for PPO ------------------------------------------------------


def test_evaluate_entropy_is_brute_force_entropy_over_allowed_tokens(policy):
    decisions = sampled_batch(policy, seed=5)

    with torch.no_grad():
        out = policy.evaluate(decisions, with_entropy=True)
        for i, d in enumerate(decisions):
            ids = torch.tensor([d.prompt_ids + d.completion_ids])
            logits = policy.model(input_ids=ids).logits[0].float()  # (L, V)
            for j, allowed in enumerate(d.allowed):
                row = logits[len(d.prompt_ids) + j - 1][allowed]
                p = torch.softmax(row, dim=-1)
                expected = -(p * torch.log(p)).sum() if len(allowed) > 1 else torch.tensor(0.0)
                torch.testing.assert_close(out.entropy[i, j], expected, atol=1e-5, rtol=0)
    assert bool((out.entropy[out.action_mask] > 0).all())
    assert torch.equal(out.entropy[~out.action_mask], torch.zeros(int((~out.action_mask).sum())))


def test_evaluate_entropy_gradient_is_finite(make_policy):
    policy = make_policy(seed=4)
    decisions = sampled_batch(policy)

    out = policy.evaluate(decisions, with_entropy=True)
    out.entropy[out.action_mask].sum().backward()

    assert all(
        torch.isfinite(p.grad).all() for p in policy.model.parameters() if p.grad is not None
    )


def test_evaluate_value_reads_the_last_prompt_token_not_the_action(policy):
    head = ValueHead.for_model(policy.model)
    torch.nn.init.normal_(head.linear.weight, generator=gen(0))
    state = make_state()
    decisions = [trie_decision(policy, state, a) for a in ACTIONS]
    prompt_only = Decision("", decisions[0].prompt_ids, [], [])

    with torch.no_grad():
        values = policy.evaluate([*decisions, prompt_only], value_head=head).values
        hidden = policy.model.get_decoder()(
            input_ids=torch.tensor([prompt_only.prompt_ids])
        ).last_hidden_state[0, -1]

    assert values.shape == (len(ACTIONS) + 1,)
    torch.testing.assert_close(values, head(hidden[None]).expand(len(ACTIONS) + 1))
    assert float(values.abs().max()) > 0
