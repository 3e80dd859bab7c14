"""``experience-model-train``: run experience-model SFT from the command line."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from experience_model.training.sft import SFTConfig, train_experience_model

app = typer.Typer(add_completion=False, help=__doc__)


@app.command()
def train(
    replay_store_url: Annotated[str, typer.Option(help="Replay store base URL")],
    output_dir: Annotated[str, typer.Option(help="Checkpoint directory to write")],
    task_generator_url: Annotated[str | None, typer.Option(help="Task generator URL")] = None,
    environment: Annotated[str | None, typer.Option(help="Environment id filter")] = None,
    base_model: Annotated[str, typer.Option(help="tiny:..., smollm2-135m or a checkpoint dir")] = (
        SFTConfig.__dataclass_fields__["base_model"].default
    ),
    tokenizer: Annotated[str, typer.Option(help="corpus-bpe or base")] = "corpus-bpe",
    steps: Annotated[int, typer.Option(help="Optimizer steps")] = 400,
    batch_size: Annotated[int, typer.Option(help="Examples per step")] = 16,
    learning_rate: Annotated[float, typer.Option(help="AdamW learning rate")] = 1e-3,
    retrieval_k: Annotated[int, typer.Option(help="Retrieved demonstrations per example")] = 2,
    history_length: Annotated[int, typer.Option(help="History steps per example")] = 2,
    use_reasoning: Annotated[
        bool, typer.Option(help="Train on stored reasoning traces (<think> targets)")
    ] = True,
    data_source: Annotated[str, typer.Option(help="real, or any (real + synthetic)")] = "real",
    device: Annotated[str, typer.Option(help="torch device")] = "cpu",
    seed: Annotated[int, typer.Option(help="Seed")] = 0,
) -> None:
    """Fine-tune the experience model on the replay store's real transitions."""
    cfg = SFTConfig(
        replay_store_url=replay_store_url,
        output_dir=output_dir,
        task_generator_url=task_generator_url,
        environment=environment,
        base_model=base_model,
        tokenizer=tokenizer,  # type: ignore[arg-type]
        steps=steps,
        batch_size=batch_size,
        learning_rate=learning_rate,
        retrieval_k=retrieval_k,
        history_length=history_length,
        use_reasoning=use_reasoning,
        data_source=data_source,  # type: ignore[arg-type]
        device=device,
        seed=seed,
    )
    from experience_model.training.job import _tasks  # noqa: PLC0415

    summary = train_experience_model(
        cfg,
        tasks=_tasks(cfg),
        progress=lambda p, msg, m: typer.echo(f"[{p:5.1%}] {msg} {json.dumps(m)}", err=True),
    )
    summary.pop("loss_curve", None)
    typer.echo(json.dumps(summary, indent=2))


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
