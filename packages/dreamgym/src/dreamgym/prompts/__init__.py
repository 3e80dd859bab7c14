"""Prompt formats shared by the services that talk to the same LLM.

The experience model and the curriculum task generator share one set of parameters (DreamGym,
arXiv 2511.03773 §4.2: "M_task shares parameters with M_exp"), so their prompt and completion
formats live here, pure and I/O-free, where both the serving code and the SFT data builders can
import them.
"""

from dreamgym.prompts.task_variation import (
    ParsedTaskVariation,
    TaskVariationParseError,
    build_task_variation_prompt,
    parse_task_variation,
    render_task_variation_target,
)

__all__ = [
    "ParsedTaskVariation",
    "TaskVariationParseError",
    "build_task_variation_prompt",
    "parse_task_variation",
    "render_task_variation_target",
]
