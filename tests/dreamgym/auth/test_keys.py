"""Unit tests of dreamgym.auth.keys: key format, hashing, verification, team names."""

from __future__ import annotations

import hashlib

import pytest

from dreamgym.auth.keys import (
    KEY_PREFIX,
    generate_key,
    hash_key,
    parse_key,
    validate_team_name,
    verify_key,
)


def test_generate_key_format_and_digest():
    issued = generate_key()

    assert issued.key.startswith(f"{KEY_PREFIX}{issued.key_id}_")
    assert len(issued.key_id) == 16 and int(issued.key_id, 16) >= 0
    assert len(issued.key) >= 3 + 16 + 1 + 43  # token_urlsafe(32) is 43 characters
    assert issued.key_hash == hashlib.sha256(issued.key.encode()).hexdigest()
    assert issued.key not in issued.key_hash


def test_generate_key_is_random():
    keys = {generate_key().key for _ in range(50)}
    ids = {parse_key(k) for k in keys}

    assert len(keys) == 50 and len(ids) == 50


def test_parse_key_returns_id_of_generated_key():
    issued = generate_key()

    assert parse_key(issued.key) == issued.key_id


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Bearer dg_0123456789abcdef_" + "x" * 43,
        "dg_0123456789ABCDEF_" + "x" * 43,  # id must be lowercase hex
        "dg_0123456789abcde_" + "x" * 43,  # 15 hex digits
        "dg_0123456789abcdef_short",
        "dg_0123456789abcdef_" + "x" * 42 + "!",
        "sk-0123456789abcdef_" + "x" * 43,
    ],
)
def test_parse_key_rejects_malformed_text(text):
    assert parse_key(text) is None


def test_verify_key_accepts_only_the_hashed_key():
    issued = generate_key()
    other = generate_key()

    assert verify_key(issued.key, issued.key_hash)
    assert not verify_key(other.key, issued.key_hash)
    assert not verify_key(issued.key[:-1], issued.key_hash)
    assert hash_key(issued.key) == issued.key_hash


@pytest.mark.parametrize("name", ["default", "lab-a", "a", "team_1.prod", "x" * 63])
def test_validate_team_name_accepts(name):
    assert validate_team_name(name) == name


@pytest.mark.parametrize("name", ["", "Lab", "-lab", "lab a", "lab/a", "x" * 64, "é"])
def test_validate_team_name_rejects_with_rule(name):
    with pytest.raises(ValueError, match="1-63 characters"):
        validate_team_name(name)
