"""Tests of the SFT building blocks (experience_model.training.sft): loss, tokenizer, config."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from experience_model.training.sft import (
    SFTConfig,
    SFTExample,
    _corpus_tokenizer,
    _encode,
    _model_and_tokenizer,
    _split,
    target_loss,
)

from ..factories import make_task, step_completion

TINY = "tiny:layers=1,hidden=32,heads=2,intermediate=64"
CORPUS = [
    f"Task: {make_task(i).instruction}\nObservation: {make_task(i).initial_observation}\n"
    + step_completion(f"You are in room {i}.", ("move north", "take coin"))
    for i in range(30)
]


def config(tmp_path, **overrides) -> SFTConfig:
    fields = {
        "replay_store_url": "http://unused.invalid",
        "output_dir": str(tmp_path),
        "base_model": TINY,
        "bpe_vocab_size": 400,
        "seed": 0,
    }
    return SFTConfig(**(fields | overrides))


@pytest.fixture(scope="module")
def corpus_tokenizer():
    return _corpus_tokenizer(CORPUS, 400)


def examples(n: int = 4) -> list[SFTExample]:
    return [
        SFTExample(
            prompt=f"Task: find coin {i}\nAction: move north\n### Next state\n",
            target=step_completion(f"You are in room {i}."),
            group=f"traj-{i}",
        )
        for i in range(n)
    ]


# -- tokenizer ----------------------------------------------------------------------------------


def test_corpus_tokenizer_round_trips_corpus_text(corpus_tokenizer):
    for text in CORPUS[:5]:
        ids = corpus_tokenizer(text, add_special_tokens=False).input_ids

        assert corpus_tokenizer.decode(ids) == text


@pytest.mark.parametrize(
    "text",
    [
        "Ünïcödé 漢字 🙂 never seen",
        "  two  leading spaces\n\ttab and newline\n",
        "punctuation , spacing . don 't ( keep ) it",
        "",
    ],
)
def test_corpus_tokenizer_round_trips_unseen_characters(corpus_tokenizer, text):
    ids = corpus_tokenizer(text, add_special_tokens=False).input_ids

    assert corpus_tokenizer.decode(ids) == text


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60))
def test_corpus_tokenizer_round_trips_any_text(corpus_tokenizer, text):
    ids = corpus_tokenizer(text, add_special_tokens=False).input_ids

    assert corpus_tokenizer.decode(ids) == text


def test_corpus_tokenizer_respects_vocab_cap_and_specials(corpus_tokenizer):
    assert len(corpus_tokenizer) <= 400
    assert corpus_tokenizer.eos_token == "<|endoftext|>"
    assert corpus_tokenizer.pad_token_id != corpus_tokenizer.eos_token_id
    assert corpus_tokenizer.padding_side == "left"


def test_corpus_tokenizer_compresses_corpus_text(corpus_tokenizer):
    text = CORPUS[0]

    ids = corpus_tokenizer(text, add_special_tokens=False).input_ids

    assert len(ids) < len(text.encode()) / 2  # merges were learned, not just bytes


# -- target_loss --------------------------------------------------------------------------------


@pytest.mark.model
def test_target_loss_decreases_on_fixed_batch(tmp_path):
    cfg = config(tmp_path)
    model, tok = _model_and_tokenizer(cfg, CORPUS)
    batch = _encode(tok, examples(), cfg.max_prompt_tokens)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model.train()
    initial = target_loss(model, batch, tok.pad_token_id, "cpu").item()

    for _ in range(8):
        loss = target_loss(model, batch, tok.pad_token_id, "cpu")
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    final = target_loss(model, batch, tok.pad_token_id, "cpu").item()
    assert math.isfinite(initial) and initial > 0
    assert final < 0.8 * initial


@pytest.mark.model
def test_target_loss_equals_cross_entropy_over_target_tokens_only(tmp_path):
    cfg = config(tmp_path)
    model, tok = _model_and_tokenizer(cfg, CORPUS)
    batch = [([5, 6, 7, 8], [9, 10, 11]), ([12, 13], [14, 15, 16, 17, 18])]

    with torch.no_grad():
        loss = target_loss(model, batch, tok.pad_token_id, "cpu")
        token_losses = []
        for prompt, target in batch:  # the obvious per-example loop, no padding
            logits = model(input_ids=torch.tensor([prompt + target])).logits[0]
            predicted = logits[len(prompt) - 1 : len(prompt) + len(target) - 1]
            token_losses.append(
                torch.nn.functional.cross_entropy(
                    predicted.float(), torch.tensor(target), reduction="none"
                )
            )
        expected = torch.cat(token_losses).mean()

    torch.testing.assert_close(loss, expected, rtol=1e-4, atol=1e-5)


# -- config and split ---------------------------------------------------------------------------


def test_sft_config_corpus_bpe_on_pretrained_base_raises(tmp_path):
    with pytest.raises(ValueError, match="corpus-bpe"):
        config(tmp_path, base_model="smollm2-135m")


@pytest.mark.parametrize("field", ["steps", "batch_size", "holdout_fraction", "bpe_vocab_size"])
def test_sft_config_invalid_field_is_named(tmp_path, field):
    bad = {"steps": 0, "batch_size": 0, "holdout_fraction": 1.0, "bpe_vocab_size": 10}[field]

    with pytest.raises(ValueError, match=field):
        config(tmp_path, **{field: bad})


def test_split_keeps_each_trajectory_on_one_side():
    data = [SFTExample("p", "t", f"traj-{i % 10}") for i in range(50)]

    train, held = _split(data, 0.3, seed=0)

    assert len(train) + len(held) == 50
    assert {e.group for e in train}.isdisjoint({e.group for e in held})
    assert len({e.group for e in held}) == 3
