"""The PPO critic: a linear value head on the policy LM's last hidden state.

V(s_t) = w·h_t + b, where h_t (H,) is the decoder's final hidden state at the decision's **last
prompt token** (see :meth:`agent_trainer.policy.LMPolicy.evaluate`). The head shares the policy's
trunk (like cleanrl's Atari agent); it is initialised to output 0, so the first advantages are the
returns themselves. Values are computed in float32 whatever the model's dtype.

Saved beside the policy weights as ``value_head.safetensors`` (``weight`` (1, H), ``bias`` (1,)).

Usage:
    >>> import torch
    >>> head = ValueHead(hidden_size=8)
    >>> head(torch.ones(3, 8)).tolist()
    [0.0, 0.0, 0.0]
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

__all__ = ["VALUE_HEAD_FILE", "ValueHead"]

VALUE_HEAD_FILE = "value_head.safetensors"


class ValueHead(torch.nn.Module):
    """Linear map from an (N, H) hidden state to (N,) values, in float32.

    Args:
        hidden_size: H, the policy model's hidden size.
    """

    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(hidden_size, 1)
        torch.nn.init.zeros_(self.linear.weight)
        torch.nn.init.zeros_(self.linear.bias)

    @classmethod
    def for_model(cls, model: Any) -> ValueHead:
        """A zero-initialised head sized and placed for ``model`` (a causal LM or peft model)."""
        weight = model.get_output_embeddings().weight  # (V, H)
        return cls(int(weight.shape[1])).to(weight.device)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """(N, H) hidden states of any float dtype → (N,) float32 values."""
        return self.linear(hidden.float())[:, 0]  # type: ignore[no-any-return]

    def save(self, directory: Path) -> Path:
        """Write ``value_head.safetensors`` into ``directory``; returns its path."""
        path = Path(directory) / VALUE_HEAD_FILE
        state = {k: v.detach().cpu().contiguous() for k, v in self.linear.state_dict().items()}
        save_file(state, str(path))
        return path

    @classmethod
    def load(cls, directory: Path, *, device: str | torch.device = "cpu") -> ValueHead:
        """Read the head that :meth:`save` wrote into ``directory``.

        Raises:
            FileNotFoundError: ``directory`` has no ``value_head.safetensors``.
        """
        path = Path(directory) / VALUE_HEAD_FILE
        if not path.exists():
            raise FileNotFoundError(f"no {VALUE_HEAD_FILE} in {directory}")
        state = load_file(str(path))
        head = cls(int(state["weight"].shape[1]))
        head.linear.load_state_dict(state)
        return head.to(device)
