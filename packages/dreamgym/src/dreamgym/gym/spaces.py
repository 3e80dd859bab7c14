"""Text spaces of the Gymnasium adapters.

:class:`UnicodeText` is a :class:`gymnasium.spaces.Text` whose membership test accepts any
Unicode string within the length bounds: observations and actions of a text game are free
text (accents, quotes, newlines), while ``Text``'s finite ``charset`` is only needed to draw
random samples. Samples are drawn from printable ASCII by default.
"""

from __future__ import annotations

import string
from typing import Any

from gymnasium.spaces import Text

__all__ = ["PRINTABLE", "UnicodeText"]

PRINTABLE = frozenset(string.ascii_letters + string.digits + string.punctuation + " ")


class UnicodeText(Text):
    """A ``Text`` space over all of Unicode (sampling from ``charset``).

    >>> space = UnicodeText(max_length=20)
    >>> "Café — you see a coin." in space
    True
    >>> "x" * 21 in space
    False

    Args:
        max_length: longest member, in characters.
        min_length: shortest member, in characters.
        charset: characters :meth:`sample` draws from (default: printable ASCII).
        seed: seed of the sampling generator.
    """

    def __init__(
        self,
        max_length: int,
        *,
        min_length: int = 0,
        charset: frozenset[str] | str = PRINTABLE,
        seed: Any = None,
    ) -> None:
        super().__init__(max_length, min_length=min_length, charset=charset, seed=seed)

    def contains(self, x: Any) -> bool:
        """True for any ``str`` whose length is within ``[min_length, max_length]``."""
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"
