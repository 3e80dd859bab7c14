"""The agent policy: a Hugging Face causal LM that writes its action as tokens.

Prompt (after the Verl-Agent template that DreamGym follows, arXiv 2511.03773 §4.1): the task, the
step count, the last ``history_length`` (observation, action) pairs, the current observation and
the admissible actions, then ``Action:``. The completion is ``" <action>"`` plus EOS.

Decoding modes:

- ``"constrained"`` (default): token-level constrained decoding over the admissible actions (a
  trie of their token sequences). At each position the logits are renormalised over the tokens
  that keep the completion a prefix of some admissible action (invalid-action masking, Huang &
  Ontañón, arXiv 2006.14171). The completion is always a valid action; its log-probability is the
  sum of the masked per-token log-probs, and :class:`Decision` keeps the exact token ids, the
  allowed token set at each position and the sampled log-probs, so the loss is computed on the
  very tokens that were sampled — nothing is re-tokenised.
- ``"free"``: unconstrained sampling until EOS/newline (for instruction-tuned models on GPU).

Shapes: N decisions (turns) in a batch, Tc completion tokens, V vocabulary, H hidden size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from dreamgym.llm.transformers_backend import kv_cache_kwargs, output_kv_cache
from dreamgym.types import AbstractState

__all__ = ["Decision", "HistoryItem", "LMPolicy", "PolicyEvaluation", "build_agent_prompt"]

DecodingMode = Literal["constrained", "free"]


@dataclass(frozen=True)
class HistoryItem:
    """One earlier step of the agent's episode: what it saw and what it did."""

    observation: str
    action: str


def build_agent_prompt(
    state: AbstractState, history: Sequence[HistoryItem], *, history_length: int = 2
) -> str:
    """Render the agent prompt for one turn.

    Args:
        state: the current abstract state (task, observation, admissible actions, step).
        history: earlier steps, oldest first; the last ``history_length`` are shown.
        history_length: how many earlier steps to show (0 = none).

    Returns:
        Prompt text ending with ``"Action:"``.
    """
    lines = [f"Task: {' '.join(state.task.split())}", f"Step: {state.step}"]
    shown = list(history)[-history_length:] if history_length else []
    if shown:
        lines.append("Recent:")
        lines.extend(f"- {' '.join(h.observation.split())} -> {h.action}" for h in shown)
    lines += [
        f"Observation: {' '.join(state.observation.split())}",
        "Actions: " + " | ".join(state.admissible_actions),
        "Action:",
    ]
    return "\n".join(lines)


@dataclass
class Decision:
    """One sampled action with everything the loss needs.

    Attributes:
        action: the action text.
        prompt_ids: prompt token ids (Tp,).
        completion_ids: sampled token ids (Tc,), ending with EOS.
        sampled_log_probs: log π of each completion token at sampling time (Tc,).
        allowed: per completion position, the allowed token ids (empty list = unconstrained).
    """

    action: str
    prompt_ids: list[int]
    completion_ids: list[int]
    sampled_log_probs: list[float]
    allowed: list[list[int]] = field(default_factory=list)


@dataclass
class PolicyEvaluation:
    """What one teacher-forced forward over N decisions gives the loss.

    Attributes:
        log_probs: (N, Tc) float32, log π_θ of each stored completion token (0 off the mask).
        action_mask: (N, Tc) bool, True on the agent's own tokens that carry a choice.
        entropy: (N, Tc) float32 entropy (nats) of π_θ over the allowed tokens, or None.
        values: (N,) float32 V(s) from the value head, or None.
    """

    log_probs: torch.Tensor
    action_mask: torch.Tensor
    entropy: torch.Tensor | None = None
    values: torch.Tensor | None = None


class LMPolicy:
    """Sampling and log-prob evaluation for a causal-LM policy.

    Args:
        model: a ``transformers`` causal LM (or a ``peft`` model wrapping one) with a decoder
            (``get_decoder()``) and output embeddings (``get_output_embeddings()``).
        tokenizer: its tokenizer (EOS required).
        history_length: history shown in prompts.
        decoding: ``"constrained"`` or ``"free"``.
        max_action_tokens: completion budget in free mode.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        history_length: int = 2,
        decoding: DecodingMode = "constrained",
        max_action_tokens: int = 24,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.history_length = history_length
        self.decoding = decoding
        self.max_action_tokens = max_action_tokens
        self.eos = int(tokenizer.eos_token_id)
        self.pad = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def action_token_ids(self, action: str) -> list[int]:
        """Token ids of the completion for ``action`` (leading space, trailing EOS)."""
        return [*self.tokenizer(" " + action, add_special_tokens=False).input_ids, self.eos]

    def prompt_ids(self, state: AbstractState, history: Sequence[HistoryItem]) -> list[int]:
        """Token ids of the prompt for one turn."""
        text = build_agent_prompt(state, history, history_length=self.history_length)
        return list(self.tokenizer(text, add_special_tokens=False).input_ids)

    # -- sampling -------------------------------------------------------------------------------
    @torch.no_grad()
    def act(
        self,
        states: Sequence[AbstractState],
        histories: Sequence[Sequence[HistoryItem]],
        *,
        temperature: float = 1.0,
        generator: torch.Generator | None = None,
    ) -> list[Decision]:
        """Sample one action per state (one batched decode).

        Args:
            states: N current states; in constrained mode each needs >= 1 admissible action.
            histories: N episode histories.
            temperature: sampling temperature (0 = greedy). The recorded log-probs are those of
                the policy itself (temperature 1), which is what the RL loss needs.
            generator: torch RNG for reproducible sampling.

        Raises:
            ValueError: a state without admissible actions in constrained mode.
        """
        prompts = [self.prompt_ids(s, h) for s, h in zip(states, histories, strict=True)]
        if self.decoding == "constrained":
            for i, s in enumerate(states):
                if not s.admissible_actions:
                    raise ValueError(f"states[{i}] has no admissible actions to choose from")
            cands = [[self.action_token_ids(a) for a in s.admissible_actions] for s in states]
        else:
            cands = [[] for _ in states]
        return self._decode(prompts, cands, states, temperature, generator)

    def _prefill(self, prompts: list[list[int]]) -> tuple[Any, torch.Tensor, torch.Tensor]:
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self.pad, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for i, p in enumerate(prompts):  # left padding
            ids[i, width - len(p) :] = torch.tensor(p)
            mask[i, width - len(p) :] = 1
        ids, mask = ids.to(self.device), mask.to(self.device)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        out = self.model(
            input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True, logits_to_keep=1
        )
        return out, mask, pos[:, -1:]

    def _choose(
        self,
        logits: torch.Tensor,
        allowed: list[int] | None,
        temperature: float,
        generator: torch.Generator | None,
    ) -> tuple[int, float]:
        z = logits.float() if allowed is None else logits.float()[allowed]
        logp = torch.log_softmax(z, dim=-1)
        if temperature == 0.0:
            j = int(torch.argmax(z))
        else:
            probs = torch.softmax(z / temperature, dim=-1)
            j = int(torch.multinomial(probs.cpu(), 1, generator=generator))
        token = j if allowed is None else allowed[j]
        return token, float(logp[j])

    def _decode(
        self,
        prompts: list[list[int]],
        cands: list[list[list[int]]],
        states: Sequence[AbstractState],
        temperature: float,
        generator: torch.Generator | None,
    ) -> list[Decision]:
        n = len(prompts)
        out, mask, pos = self._prefill(prompts)
        done = [False] * n
        comp: list[list[int]] = [[] for _ in range(n)]
        lps: list[list[float]] = [[] for _ in range(n)]
        allowed_sets: list[list[list[int]]] = [[] for _ in range(n)]
        while True:
            step_tokens = [self.pad] * n
            for i in range(n):
                if done[i]:
                    continue
                token = self._step_row(
                    i, out.logits[i, -1], cands, comp, lps, allowed_sets, temperature, generator
                )
                step_tokens[i] = token
                done[i] = self._row_finished(i, token, cands, comp, lps, allowed_sets)
            if all(done):
                break
            mask = torch.cat(
                [mask, torch.tensor([[0 if d else 1] for d in done], device=self.device)], dim=1
            )
            pos = pos + 1
            out = self.model(
                input_ids=torch.tensor(step_tokens, device=self.device)[:, None],
                attention_mask=mask,
                position_ids=pos,
                **kv_cache_kwargs(self.model, output_kv_cache(out)),
                use_cache=True,
            )
        return [self._decision(i, prompts, comp, lps, allowed_sets, states) for i in range(n)]

    def _step_row(
        self,
        i: int,
        logits: torch.Tensor,
        cands: list[list[list[int]]],
        comp: list[list[int]],
        lps: list[list[float]],
        allowed_sets: list[list[list[int]]],
        temperature: float,
        generator: torch.Generator | None,
    ) -> int:
        t = len(comp[i])
        if self.decoding == "free":
            token, lp = self._choose(logits, None, temperature, generator)
            allowed_sets[i].append([])
        else:
            allowed = sorted({c[t] for c in cands[i]})
            token, lp = (
                (allowed[0], 0.0)
                if len(allowed) == 1
                else self._choose(logits, allowed, temperature, generator)
            )
            allowed_sets[i].append(allowed)
            cands[i] = [c for c in cands[i] if c[t] == token]
        comp[i].append(token)
        lps[i].append(lp)
        return token

    def _row_finished(
        self,
        i: int,
        token: int,
        cands: list[list[list[int]]],
        comp: list[list[int]],
        lps: list[list[float]],
        allowed_sets: list[list[list[int]]],
    ) -> bool:
        if self.decoding == "free":
            text = self.tokenizer.decode(comp[i][-1:])
            return token == self.eos or "\n" in text or len(comp[i]) >= self.max_action_tokens
        if token == self.eos:
            return True
        if len(cands[i]) == 1:  # the rest is forced: log-prob 0, no model call needed
            for forced in cands[i][0][len(comp[i]) :]:
                comp[i].append(forced)
                lps[i].append(0.0)
                allowed_sets[i].append([forced])
            return True
        return False

    def _decision(
        self,
        i: int,
        prompts: list[list[int]],
        comp: list[list[int]],
        lps: list[list[float]],
        allowed_sets: list[list[list[int]]],
        states: Sequence[AbstractState],
    ) -> Decision:
        text = self.tokenizer.decode([t for t in comp[i] if t != self.eos]).strip()
        if self.decoding == "constrained":
            matches = [
                a for a in states[i].admissible_actions if self.action_token_ids(a) == comp[i]
            ]
            text = matches[0] if matches else text
        return Decision(
            action=text,
            prompt_ids=prompts[i],
            completion_ids=comp[i],
            sampled_log_probs=lps[i],
            allowed=allowed_sets[i],
        )

    # -- log-probs for the loss -----------------------------------------------------------------
    def completion_log_probs(
        self, decisions: Sequence[Decision]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Log π_θ of every completion token, differentiable (teacher-forced on stored ids).

        Args:
            decisions: N decisions.

        Returns:
            ``(log_probs (N, Tc), action_mask (N, Tc) bool)``; see :meth:`evaluate`.
        """
        out = self.evaluate(decisions)
        return out.log_probs, out.action_mask

    def evaluate(
        self,
        decisions: Sequence[Decision],
        *,
        value_head: torch.nn.Module | None = None,
        with_entropy: bool = False,
    ) -> PolicyEvaluation:
        """One teacher-forced forward on the stored ids: log-probs, optional entropy and values.

        Constrained positions are scored against their allowed tokens only: with allowed ids
        ``a_1..a_A`` and hidden state h, log π(a_k) = h·W[a_k] − logsumexp_j h·W[a_j], which
        equals the masked log-softmax over the full vocabulary but costs A, not V, dot products.
        Forced positions (one allowed token) are exactly 0, masked out, and skip the model when
        nothing else needs it. Free-decoding positions use the full softmax.

        The value V(s) of a decision is ``value_head`` applied to the last hidden state at its
        **last prompt token** (the ``Action:`` token that predicts the first action token): it
        sees the state and history but not the sampled action, so it is a state value V(s_t),
        as GAE needs. A decision with no completion tokens gives the value of its prompt alone
        (used to bootstrap truncated episodes).

        Args:
            decisions: N decisions (N >= 1).
            value_head: maps (N, H) hidden states to (N,) values; None skips values.
            with_entropy: also return the per-token entropy over the allowed tokens.

        Returns:
            A :class:`PolicyEvaluation`; the mask is True on completion tokens that carry a
            choice (forced and padding positions hold 0 and are False).
        """
        n = len(decisions)
        t_max = max(len(d.completion_ids) for d in decisions)
        slots = [
            (i, j)
            for i, d in enumerate(decisions)
            for j in range(len(d.completion_ids))
            if not d.allowed or len(d.allowed[j]) != 1
        ]
        out = torch.zeros((n, t_max), device=self.device)
        mask = torch.zeros((n, t_max), dtype=torch.bool, device=self.device)
        entropy = torch.zeros((n, t_max), device=self.device) if with_entropy else None
        if not slots and value_head is None:
            return PolicyEvaluation(out, mask, entropy)
        hidden = self._hidden_states(decisions)  # (N, L, H)
        values = None
        if value_head is not None:
            last_prompt = torch.tensor([len(d.prompt_ids) - 1 for d in decisions])
            values = value_head(hidden[torch.arange(n), last_prompt.to(self.device)])  # (N,)
        if not slots:
            return PolicyEvaluation(out, mask, entropy, values)
        rows = torch.tensor([i for i, _ in slots], device=self.device)
        cols = torch.tensor(
            [len(decisions[i].prompt_ids) + j - 1 for i, j in slots], device=self.device
        )  # hidden state that predicts token j
        table, pick = self._slot_log_softmax(decisions, slots, hidden[rows, cols])  # (P, A), (P,)
        c = torch.tensor([j for _, j in slots], device=self.device)
        out = out.index_put((rows, c), table.gather(1, pick[:, None])[:, 0])
        mask[rows, c] = True
        if entropy is not None:
            finite = torch.where(torch.isfinite(table), table, 0.0)  # no 0·(−inf) in the grad
            p_logp = torch.where(torch.isfinite(table), finite.exp() * finite, 0.0)  # (P, A)
            entropy = entropy.index_put((rows, c), -p_logp.sum(dim=1))
        return PolicyEvaluation(out, mask, entropy, values)

    def _hidden_states(self, decisions: Sequence[Decision]) -> torch.Tensor:
        seqs = [d.prompt_ids + d.completion_ids for d in decisions]
        width = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), width), self.pad, dtype=torch.long)
        attn = torch.zeros((len(seqs), width), dtype=torch.long)
        for i, s in enumerate(seqs):  # right padding: positions match an unpadded forward
            ids[i, : len(s)] = torch.tensor(s)
            attn[i, : len(s)] = 1
        return self.model.get_decoder()(  # type: ignore[no-any-return]
            input_ids=ids.to(self.device), attention_mask=attn.to(self.device)
        ).last_hidden_state

    def _slot_log_softmax(
        self, decisions: Sequence[Decision], slots: list[tuple[int, int]], h: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(P, A) float32 log π over each slot's allowed tokens (−inf on padding), and (P,)
        the column of the chosen token. Free decoding: A = V, the full vocabulary."""
        chosen = torch.tensor(
            [decisions[i].completion_ids[j] for i, j in slots], device=self.device
        )
        if self.decoding == "free":
            logits = self.model.get_output_embeddings()(h)  # (P, V)
            return torch.log_softmax(logits.float(), dim=-1), chosen
        width = max(len(decisions[i].allowed[j]) for i, j in slots)
        allowed = torch.full((len(slots), width), -1, dtype=torch.long, device=self.device)
        for p, (i, j) in enumerate(slots):
            ids = decisions[i].allowed[j]
            allowed[p, : len(ids)] = torch.tensor(ids, device=self.device)
        weight = self.model.get_output_embeddings().weight  # (V, H)
        z = torch.einsum("ph,pah->pa", h, weight[allowed.clamp(min=0)])  # (P, A)
        bias = getattr(self.model.get_output_embeddings(), "bias", None)
        if bias is not None:
            z = z + bias[allowed.clamp(min=0)]
        z = z.float().masked_fill(allowed < 0, -torch.inf)
        pick = (allowed == chosen[:, None]).float().argmax(dim=1)  # index of the chosen token
        return torch.log_softmax(z, dim=-1), pick
