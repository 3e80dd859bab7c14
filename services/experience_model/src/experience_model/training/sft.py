"""Supervised fine-tuning of the experience model on replay-store transitions (paper Eq. 5).

For every real transition ``(s_t, a_t, s_{t+1}, r_{t+1})`` in the replay store the training
example is exactly what the service sends at inference: the step prompt with the task τ, the
trajectory's own history H_t, the top-k retrieved demonstrations D_k (retrieved from the replay
store, excluding the transition's own trajectory so the model learns to *use* neighbours rather
than copy itself) and the action; the target is ``[<think>R*_t</think>] <observation>…``. The
token-level cross-entropy over the target is

    L_SFT = −log P(R*_t | s_t, a_t, H_t, D_k) − log P(s_{t+1} | s_t, a_t, R*_t, H_t, D_k)

(the first term only when the data carries a reasoning trace: teacher traces are written into the
replay store by the ``annotate`` job, :mod:`experience_model.training.annotate`; with
``use_reasoning=False`` traces are left out and the prompts are marked "no reasoning", the
"w/o experience reasoning" ablation). Because the experience model also
serves as the task generator (§1.3: M_task shares parameters with M_exp), the data also holds
task-synthesis pairs: the task-variation prompt of one seed task → another seed task of the same
environment, in the format :mod:`dreamgym.prompts.task_variation` parses.

Small models trained from scratch (``tiny:...``) get a byte-level BPE tokenizer trained on the SFT
corpus (``tokenizer="corpus-bpe"``, via the ``tokenizers`` library): it keeps the vocabulary, and
so the output layer, small enough to train and sample on a CPU. Pretrained bases keep their own.
"""

from __future__ import annotations

import json
import logging
import math
import random
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch

from dreamgym.clients.replay_store import ReplayStoreClient
from dreamgym.prompts.task_variation import (
    build_task_variation_prompt,
    render_task_variation_target,
)
from dreamgym.replay_types import RetrievalQuery, TransitionRecord
from dreamgym.sampling import length_grouped_batches
from dreamgym.types import Task
from experience_model.domain.prompts import (
    FORMAT_TAGS,
    FORMAT_VERSION,
    ExampleTransition,
    HistoryStep,
    PromptOptions,
    build_step_prompt,
    render_step_target,
)

TASK_VARIATION_TAGS = ("<task>", "</task>")

__all__ = ["SFTConfig", "build_examples", "train_experience_model"]

logger = logging.getLogger(__name__)
META_FILE = "dreamgym_experience_model.json"


@dataclass(frozen=True, kw_only=True)
class SFTConfig:
    """Experience-model SFT settings.

    Attributes:
        replay_store_url: where the transitions (and retrieval) come from.
        task_generator_url: seed tasks for task-synthesis pairs (``None`` = no such pairs).
        environment: restrict to one environment id (``None`` = all).
        output_dir: checkpoint directory to write.
        base_model: ``"tiny:..."``, ``"smollm2-135m"`` or a checkpoint directory.
        tokenizer: ``"corpus-bpe"`` (train a BPE on the corpus; tiny models only) or ``"base"``.
        bpe_vocab_size: vocabulary cap of the corpus BPE.
        steps / batch_size / learning_rate / warmup_steps / weight_decay: optimisation.
        retrieval_k / history_length / use_retrieval: must match the serving settings.
        use_reasoning: train on the stored reasoning traces (``<think>`` targets); ``False``
            drops them and marks prompts "no reasoning" (serve with
            ``EXPERIENCE_MODEL_USE_REASONING=false``).
        data_source: ``"real"`` transitions only (the seed buffer), or ``"any"``: real and
            synthetic (refreshing the model on the grown, co-evolved buffer).
        task_synthesis_pairs: number of task-variation examples.
        holdout_fraction: fraction of trajectories kept out for a held-out loss.
        max_prompt_tokens: prompts are left-truncated to this many tokens.
        seed: data order and initialisation seed.
        device: torch device.
        api_key: key the replay-store and task-generator clients send (the submitting team's,
            forwarded by the service; ``None``: ``$DREAMGYM_API_KEY``). Never in ``repr``, the
            summary or the checkpoint.
    """

    replay_store_url: str
    output_dir: str
    task_generator_url: str | None = None
    environment: str | None = None
    base_model: str = "tiny:layers=4,hidden=256,heads=4,intermediate=768"
    tokenizer: Literal["corpus-bpe", "base"] = "corpus-bpe"
    bpe_vocab_size: int = 2048
    steps: int = 400
    batch_size: int = 16
    learning_rate: float = 1e-3
    warmup_steps: int = 40
    weight_decay: float = 0.0
    retrieval_k: int = 2
    history_length: int = 2
    use_retrieval: bool = True
    use_reasoning: bool = True
    data_source: Literal["real", "any"] = "real"
    task_synthesis_pairs: int = 200
    holdout_fraction: float = 0.05
    max_prompt_tokens: int = 1024
    seed: int = 0
    device: str = "cpu"
    api_key: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        bad = {
            k: v
            for k, v in {
                "steps": self.steps >= 1,
                "batch_size": self.batch_size >= 1,
                "learning_rate": self.learning_rate > 0,
                "retrieval_k": self.retrieval_k >= 0,
                "history_length": self.history_length >= 0,
                "holdout_fraction": 0 <= self.holdout_fraction < 1,
                "bpe_vocab_size": self.bpe_vocab_size >= 300,
            }.items()
            if not v
        }
        if bad:
            raise ValueError(f"invalid SFT config fields: {sorted(bad)}")
        if self.tokenizer == "corpus-bpe" and not self.base_model.startswith("tiny"):
            raise ValueError(
                "tokenizer='corpus-bpe' only applies to 'tiny' base models "
                "(pretrained bases keep their own tokenizer: use 'base')"
            )


@dataclass(frozen=True)
class SFTExample:
    """One (prompt, target) pair and the trajectory it came from (for the held-out split)."""

    prompt: str
    target: str
    group: str


def _by_trajectory(records: Sequence[TransitionRecord]) -> dict[str, list[TransitionRecord]]:
    out: dict[str, list[TransitionRecord]] = defaultdict(list)
    for r in records:
        out[r.trajectory_id].append(r)
    return {k: sorted(v, key=lambda r: r.step) for k, v in out.items()}


def _retrieve(
    client: ReplayStoreClient, records: list[TransitionRecord], k: int, environment: str | None
) -> list[list[ExampleTransition]]:
    """Top-k demonstrations per record from other trajectories (own trajectory excluded)."""
    out: list[list[ExampleTransition]] = []
    for start in range(0, len(records), 256):
        chunk = records[start : start + 256]
        hits = client.retrieve(
            [
                RetrievalQuery(task=r.task, observation=r.observation, action=r.action)
                for r in chunk
            ],
            k=k + 8,
            environment=environment,
            source="real",
        )
        for r, row in zip(chunk, hits, strict=True):
            mine = [h for h in row if h.trajectory_id != r.trajectory_id][:k]
            out.append(
                [
                    ExampleTransition(
                        h.observation,
                        h.action,
                        h.next_observation,
                        h.next_admissible_actions,
                        h.reward,
                        h.terminated,
                    )
                    for h in mine
                ]
            )
    return out


def build_examples(
    cfg: SFTConfig, client: ReplayStoreClient, tasks: Sequence[Task] = ()
) -> list[SFTExample]:
    """Build step examples from the replay store and task-synthesis pairs from ``tasks``."""
    source = "real" if cfg.data_source == "real" else None
    records = list(client.iter_transitions(environment=cfg.environment, source=source))
    if not records:
        raise ValueError(
            f"the replay store has no {cfg.data_source} transitions for environment "
            f"{cfg.environment!r}: collect seed data first"
        )
    options = PromptOptions(
        history_length=cfg.history_length,
        use_retrieval=cfg.use_retrieval,
        use_reasoning=cfg.use_reasoning,
    )
    trajectories = _by_trajectory(records)
    flat = [r for traj in trajectories.values() for r in traj]
    demos = (
        _retrieve(client, flat, cfg.retrieval_k, cfg.environment)
        if cfg.use_retrieval and cfg.retrieval_k > 0
        else [[] for _ in flat]
    )
    examples, i = [], 0
    for traj_id, traj in trajectories.items():
        for j, r in enumerate(traj):
            history = [HistoryStep(t.observation, t.action) for t in traj[:j]]
            prompt = build_step_prompt(
                task=r.task,
                observation=r.observation,
                admissible_actions=r.admissible_actions,
                action=r.action,
                history=history,
                examples=demos[i],
                options=options,
            )
            target = render_step_target(
                next_observation=r.next_observation,
                next_admissible_actions=r.next_admissible_actions,
                reward=r.reward,
                terminated=r.terminated,
                reasoning=r.reasoning if cfg.use_reasoning else None,
            )
            examples.append(SFTExample(prompt, target, traj_id))
            i += 1
    return examples + _task_pairs(tasks, cfg.task_synthesis_pairs, cfg.seed)


def _task_pairs(tasks: Sequence[Task], n: int, seed: int) -> list[SFTExample]:
    usable = [t for t in tasks if t.initial_observation and t.initial_admissible_actions]
    if len(usable) < 2 or n == 0:
        return []
    rng, pairs = random.Random(seed), []
    for _ in range(n):
        a, b = rng.sample(usable, 2)
        pairs.append(
            SFTExample(
                build_task_variation_prompt([a], environment=a.environment),
                render_task_variation_target(b),
                f"task:{a.task_id}",
            )
        )
    return pairs


def _split(
    examples: list[SFTExample], fraction: float, seed: int
) -> tuple[list[SFTExample], list[SFTExample]]:
    groups = sorted({e.group for e in examples})
    random.Random(seed).shuffle(groups)
    held = set(groups[: int(len(groups) * fraction)])
    return [e for e in examples if e.group not in held], [e for e in examples if e.group in held]


def _corpus_tokenizer(texts: Sequence[str], vocab_size: int) -> Any:
    """Byte-level BPE trained on the corpus; the format's tags are single (non-special) tokens.

    Byte-level: any text, including characters never seen in training, can be encoded.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: PLC0415
    from transformers import PreTrainedTokenizerFast  # noqa: PLC0415

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|endoftext|>", "<|pad|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    bpe.train_from_iterator(texts, trainer=trainer)
    bpe.add_tokens(
        [
            AddedToken(t, normalized=False, special=False)
            for t in (*FORMAT_TAGS, *TASK_VARIATION_TAGS)
        ]
    )
    tok = PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token="<|endoftext|>", pad_token="<|pad|>"
    )
    tok.padding_side = "left"
    return tok


def _model_and_tokenizer(cfg: SFTConfig, texts: Sequence[str]) -> tuple[Any, Any]:
    from dreamgym.llm.models import load_causal_lm, parse_tiny_spec  # noqa: PLC0415

    if cfg.tokenizer == "base":
        model, tok = load_causal_lm(cfg.base_model, device=cfg.device, seed=cfg.seed)
        return model, tok
    from transformers import LlamaConfig, LlamaForCausalLM  # noqa: PLC0415

    tok = _corpus_tokenizer(texts, cfg.bpe_vocab_size)
    s = parse_tiny_spec(cfg.base_model)
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=s["hidden"],
        intermediate_size=s["intermediate"],
        num_hidden_layers=s["layers"],
        num_attention_heads=s["heads"],
        num_key_value_heads=s["heads"],
        max_position_embeddings=4096,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=True,
    )
    torch.manual_seed(cfg.seed)
    return LlamaForCausalLM(config).to(cfg.device), tok


def _encode(
    tok: Any, examples: Sequence[SFTExample], max_prompt: int
) -> list[tuple[list[int], list[int]]]:
    out = []
    for e in examples:
        p = tok(e.prompt, add_special_tokens=False).input_ids[-max_prompt:]
        t = tok(e.target, add_special_tokens=False).input_ids + [tok.eos_token_id]
        out.append((p, t))
    return out


def target_loss(
    model: Any, batch: Sequence[tuple[list[int], list[int]]], pad: int, device: str
) -> torch.Tensor:
    """Mean token cross-entropy over target tokens only (prompt tokens are context).

    The output layer is applied to target positions only, so its cost scales with the target
    length, not the prompt length.
    """
    width = max(len(p) + len(t) for p, t in batch)
    ids = torch.full((len(batch), width), pad, dtype=torch.long)
    attn = torch.zeros_like(ids)
    labels = torch.full_like(ids, -100)
    for i, (p, t) in enumerate(batch):
        seq = p + t
        ids[i, : len(seq)] = torch.tensor(seq)
        attn[i, : len(seq)] = 1
        labels[i, len(p) : len(seq)] = torch.tensor(t)
    ids, attn, labels = ids.to(device), attn.to(device), labels.to(device)
    hidden = model.model(input_ids=ids, attention_mask=attn).last_hidden_state  # (B, L, H)
    nxt = labels[:, 1:]
    sel = nxt != -100
    logits = model.lm_head(hidden[:, :-1][sel])  # (P, V)
    return torch.nn.functional.cross_entropy(logits.float(), nxt[sel])


def _lr_factor(step: int, warmup: int, total: int) -> float:
    if step < warmup:
        return (step + 1) / warmup
    return max(0.05, 1.0 - (step - warmup) / max(1, total - warmup))


def _holdout_loss(
    model: Any, data: list[tuple[list[int], list[int]]], pad: int, cfg: SFTConfig
) -> float | None:
    if not data:
        return None
    model.eval()
    losses = []
    with torch.no_grad():
        for start in range(0, len(data), cfg.batch_size):
            losses.append(
                float(target_loss(model, data[start : start + cfg.batch_size], pad, cfg.device))
            )
    model.train()
    return sum(losses) / len(losses)


def train_experience_model(
    cfg: SFTConfig,
    *,
    tasks: Sequence[Task] = (),
    progress: Callable[[float, str, dict[str, Any]], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """Build the data, train, and write a checkpoint the service can load.

    Returns:
        Summary: example counts, loss curve, held-out loss, seconds, checkpoint path.

    Raises:
        ValueError: no real transitions in the replay store for the environment.
    """
    t0 = time.perf_counter()
    report = progress or (lambda *_: None)
    with ReplayStoreClient(cfg.replay_store_url, api_key=cfg.api_key, timeout_s=300) as client:
        examples = build_examples(cfg, client, tasks)
    train, held = _split(examples, cfg.holdout_fraction, cfg.seed)
    report(0.05, f"built {len(examples)} examples", {})
    model, tok = _model_and_tokenizer(cfg, [e.prompt + e.target for e in train])
    data, held_data = (
        _encode(tok, train, cfg.max_prompt_tokens),
        _encode(tok, held, cfg.max_prompt_tokens),
    )
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=cfg.learning_rate, weight_decay=cfg.weight_decay
    )
    rng, curve = random.Random(cfg.seed), []
    lengths = [len(p) + len(t) for p, t in data]
    batches: list[list[int]] = []
    model.train()
    for step in range(cfg.steps):
        if not batches:  # a new epoch of length-grouped batches (less padding)
            batches = length_grouped_batches(lengths, cfg.batch_size, rng)
        if should_stop is not None and should_stop():
            raise InterruptedError("SFT cancelled")
        for group in optimizer.param_groups:
            group["lr"] = cfg.learning_rate * _lr_factor(step, cfg.warmup_steps, cfg.steps)
        loss = target_loss(
            model,
            [data[i] for i in batches.pop()],
            tok.pad_token_id,
            cfg.device,
        )
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if step % 10 == 0 or step == cfg.steps - 1:
            curve.append({"step": step, "loss": round(float(loss), 5)})
            report(
                0.05 + 0.9 * (step + 1) / cfg.steps,
                f"step {step + 1}/{cfg.steps}",
                {"loss": float(loss)},
            )
    held_loss = _holdout_loss(model, held_data, tok.pad_token_id, cfg)
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.eval()
    model.save_pretrained(out)
    tok.save_pretrained(out)
    summary = {
        "format_version": FORMAT_VERSION,
        "checkpoint": str(out),
        "examples": len(examples),
        "train_examples": len(train),
        "heldout_examples": len(held),
        "task_synthesis_examples": sum(1 for e in examples if e.group.startswith("task:")),
        "reasoning_examples": sum(1 for e in examples if e.target.startswith("<think>")),
        "final_loss": curve[-1]["loss"],
        "heldout_loss": held_loss,
        "heldout_perplexity": math.exp(held_loss) if held_loss is not None else None,
        "parameters": sum(p.numel() for p in model.parameters()),
        "vocab_size": len(tok),
        "seconds": round(time.perf_counter() - t0, 1),
        "loss_curve": curve,
        "config": {k: v for k, v in asdict(cfg).items() if k != "api_key"},
    }
    (out / META_FILE).write_text(json.dumps(summary, indent=2))
    return summary
