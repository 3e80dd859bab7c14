"""``dreamgym`` — the command-line tool that drives the platform.

Run ``dreamgym COMMAND --help`` for a command's options. The main job:
``dreamgym demo`` (``--preset quick`` for a few minutes); the local stack: ``dreamgym up``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.console import Console
from rich.table import Table

from dreamgym.cli.admin import admin_app

app = typer.Typer(
    add_completion=False,
    help="DreamGym: train LLM agents with RL in an imagined environment. Run 'dreamgym COMMAND "
    "--help' for a command's options. The main job: 'dreamgym demo' ('--preset quick' for a few "
    "minutes); the local stack: 'dreamgym up'.",
    no_args_is_help=True,
)
app.add_typer(admin_app, name="admin")
console = Console()

DataDir = Annotated[Path, typer.Option(help="Where the stack keeps its data and logs")]
JobBackend = Annotated[
    Literal["local", "celery"],
    typer.Option(
        help="local: jobs in child processes of their service; celery: Celery workers per "
        "queue (gpu, cpu) on the stack's Redis",
    ),
]


def _offline() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@app.command()
def demo(
    out: Annotated[
        Path | None, typer.Option(help="Output folder (default: runs/demo-<time>)")
    ] = None,
    preset: Annotated[
        str, typer.Option(help="default (full CPU demo) or quick (minutes)")
    ] = "default",
    environment: Annotated[str | None, typer.Option(help="Real environment id")] = None,
    seed: Annotated[int | None, typer.Option(help="Seed of everything")] = None,
    keep_running: Annotated[bool, typer.Option(help="Leave the stack up afterwards")] = False,
    job_backend: JobBackend = "celery",
) -> None:
    """Seed data → experience model → GRPO in imagination → real held-out evaluation → report."""
    _offline()
    from dreamgym.cli.demo import default_stack, run_demo  # noqa: PLC0415
    from dreamgym.cli.demo import preset as make_preset  # noqa: PLC0415

    cfg = make_preset(preset, environment=environment, seed=seed)
    out_dir = (out or Path("runs") / time.strftime("demo-%Y%m%d-%H%M%S")).resolve()
    console.print(
        f"[bold]DreamGym main job[/bold] ({preset}) on [cyan]{cfg.environment}[/cyan]; "
        f"output: {out_dir}"
    )
    stack = default_stack(out_dir, job_backend=job_backend)
    paths = run_demo(cfg, out_dir, console=console, keep_running=keep_running, stack=stack)
    report = json.loads(paths["json"].read_text())
    table = Table(title="Held-out real games")
    for col in ("policy", "success", "95% CI", "mean reward", "episodes"):
        table.add_column(col)
    for name, r in report["policies"].items():
        table.add_row(
            name,
            f"{r['success_rate']:.3f}",
            f"[{r['ci95_low']:.3f}, {r['ci95_high']:.3f}]",
            f"{r['mean_reward']:.3f}",
            str(r["episodes"]),
        )
    console.print(table)
    verdict = report["comparison"].get("dreamgym_vs_before_rl", {})
    console.print(
        f"real interactions during RL: {report['real_interactions_rl']}; DreamGym beats "
        f"before-RL with non-overlapping CIs: "
        f"{verdict.get('dreamgym_better_non_overlapping')}"
    )
    console.print(f"report: {paths['md']}\n        {paths['json']}\n        {paths['png']}")
    console.print(f"output folder: {out_dir}")


def _csv(values: list[str] | None) -> tuple[str, ...] | None:
    if not values:
        return None
    return tuple(v.strip() for item in values for v in item.split(",") if v.strip())


@app.command()
def experiment(
    preset: Annotated[
        str,
        typer.Option(
            help="small (CI, minutes), headline (before RL, real GRPO, DreamGym, S2R; about "
            "an hour) or full (hours to a day)"
        ),
    ] = "small",
    env: Annotated[
        list[str] | None,
        typer.Option("--env", help="Environment id (a table column); repeat or comma-separate"),
    ] = None,
    seeds: Annotated[
        str | None, typer.Option(help="Comma-separated seeds per cell (default 0,1,2)")
    ] = None,
    rows: Annotated[
        list[str] | None,
        typer.Option("--rows", help="Only these rows (comma-separated keys; see docs)"),
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="Output folder (default: runs/experiment-<time>)")
    ] = None,
    device: Annotated[
        str | None, typer.Option(help="Torch device of every model: cpu (default) or cuda")
    ] = None,
    keep_running: Annotated[bool, typer.Option(help="Leave the last stack up")] = False,
    job_backend: JobBackend = "celery",
) -> None:
    """Rows (before RL, SFT, real-env GRPO/PPO with budget B, DreamGym, DreamGym-S2R, ablations)
    × environments × seeds → experiment.json, experiment.md and plots.

    With DREAMGYM_JUDGE_URL and DREAMGYM_JUDGE_MODEL (and optionally DREAMGYM_JUDGE_API_KEY)
    set, an LLM judge on that OpenAI-compatible endpoint also scores the experience model."""
    _offline()
    from dreamgym.experiment import preset as make_preset  # noqa: PLC0415
    from dreamgym.experiment.runner import run_experiment  # noqa: PLC0415
    from dreamgym.pipeline import judge_from_env  # noqa: PLC0415

    try:
        judge = judge_from_env(os.environ)
        cfg = make_preset(
            preset,
            environments=_csv(env),
            seeds=tuple(int(s) for s in seeds.split(",")) if seeds else None,
            rows=_csv(rows),
            device=device,
        )
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    out_dir = (out or Path("runs") / time.strftime("experiment-%Y%m%d-%H%M%S")).resolve()
    console.print(
        f"[bold]DreamGym experiment[/bold] ({preset}; expected: {cfg.expected_runtime}) on "
        f"{', '.join(cfg.environments)}, seeds {list(cfg.seeds)}; output: {out_dir}"
    )
    paths = run_experiment(
        cfg,
        out_dir,
        preset_name=preset,
        job_backend=job_backend,
        log=lambda m: console.print(m, markup=False),
        keep_running=keep_running,
        judge=judge,
    )
    console.print(paths["md"].read_text(), markup=False)
    console.print(f"results: {paths['md']}\n         {paths['json']}")


@app.command()
def up(
    data_dir: DataDir = Path(".dreamgym"),
    postgres_port: int = 55432,
    redis_port: int = 56379,
    experience_model_port: int = 8001,
    replay_store_port: int = 8002,
    task_generator_port: int = 8003,
    agent_trainer_port: int = 8004,
    embedding_model: Annotated[str, typer.Option(help="minilm or hash")] = "minilm",
    experience_model_path: Annotated[str | None, typer.Option(help="Checkpoint to serve")] = None,
    job_backend: JobBackend = "celery",
) -> None:
    """Start the local stack in the background (no Docker)."""
    _offline()
    from dreamgym.stack.local import LocalStack, StackConfig  # noqa: PLC0415

    cfg = StackConfig(
        data_dir=data_dir,
        postgres_port=postgres_port,
        redis_port=redis_port,
        experience_model_port=experience_model_port,
        replay_store_port=replay_store_port,
        task_generator_port=task_generator_port,
        agent_trainer_port=agent_trainer_port,
        embedding_model=embedding_model,
        job_backend=job_backend,
    )
    if experience_model_path:
        if Path(experience_model_path).expanduser().exists():  # a checkpoint folder: the
            # services run in the stack's own folder, so a relative path must be made absolute
            experience_model_path = str(Path(experience_model_path).expanduser().resolve())
        elif not experience_model_path.startswith(("tiny", "smollm2")):
            raise typer.BadParameter(
                f"no checkpoint folder at '{experience_model_path}' (and not a model spec "
                "like 'tiny:layers=2' or 'smollm2-135m')",
                param_hint="--experience-model-path",
            )
        cfg.experience_model_path = experience_model_path
        cfg.task_generator_model_path = experience_model_path
    stack = LocalStack(cfg)
    try:
        urls = stack.up(log=lambda m: console.print(f"[dim]{m}[/dim]"))
    except RuntimeError as exc:  # a part did not start: stop what did, say why, no traceback
        stack.down()
        console.print(f"[red]stack did not start:[/red] {exc}")
        console.print("everything it had started was stopped")
        raise typer.Exit(1) from None
    for name, url in urls.items():
        console.print(f"{name:<18} {url}  (docs: {url}/docs)")
    console.print(
        f"logs: {data_dir.resolve() / 'logs'}; stop with: dreamgym down --data-dir {data_dir}"
    )


@app.command()
def down(data_dir: DataDir = Path(".dreamgym")) -> None:
    """Stop the services, PostgreSQL and Redis started by ``dreamgym up``."""
    from dreamgym.stack.local import LocalStack  # noqa: PLC0415

    stack = LocalStack(_saved_config(data_dir))
    stack.down()
    console.print("stack stopped")


@app.command()
def status(data_dir: DataDir = Path(".dreamgym")) -> None:
    """Show which parts of the local stack are up and ready."""
    from dreamgym.stack.local import LocalStack  # noqa: PLC0415

    for name, state in LocalStack(_saved_config(data_dir)).status().items():
        console.print(f"{name:<18} {state}")


@app.command()
def envs() -> None:
    """List the real text environments and where their games come from."""
    from dreamgym.envs import describe_environments  # noqa: PLC0415

    for env_id, source in describe_environments().items():
        console.print(f"{env_id:<28} {source}", highlight=False, soft_wrap=True)


@app.command("export")
def export_trajectories(
    out: Annotated[Path, typer.Argument(help="Output file (.jsonl or .parquet)")],
    replay_store_url: Annotated[
        str, typer.Option(envvar="DREAMGYM_REPLAY_STORE_URL", help="Replay store URL")
    ] = "http://127.0.0.1:8002",
    fmt: Annotated[
        str | None, typer.Option("--format", help="jsonl or parquet (default: from the suffix)")
    ] = None,
    environment: Annotated[str | None, typer.Option(help="Only this environment")] = None,
    source: Annotated[str | None, typer.Option(help="Only real or synthetic")] = None,
    policy: Annotated[str | None, typer.Option(help="Only this behaviour policy")] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="At most this many")] = None,
    api_key: Annotated[str | None, typer.Option(envvar="DREAMGYM_API_KEY")] = None,
) -> None:
    """Export trajectories from the replay store (schema ``dreamgym.trajectory/1``)."""
    from dreamgym.clients.replay_store import ReplayStoreClient  # noqa: PLC0415
    from dreamgym.export import SCHEMA_VERSION, export_from_replay_store, format_of  # noqa: PLC0415

    if fmt not in (None, "jsonl", "parquet"):
        raise typer.BadParameter("must be jsonl or parquet", param_hint="--format")
    try:
        format_of(out, fmt)  # type: ignore[arg-type]
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="OUT") from None
    if source not in (None, "real", "synthetic"):
        raise typer.BadParameter("must be real or synthetic", param_hint="--source")
    with ReplayStoreClient(replay_store_url, api_key=api_key) as client:
        count = export_from_replay_store(
            client, out, fmt, environment=environment, source=source, policy=policy, limit=limit
        )  # type: ignore[arg-type]
    console.print(f"exported {count} trajectories ({SCHEMA_VERSION}) to {out}")


def _saved_config(data_dir: Path):  # type: ignore[no-untyped-def]
    from dreamgym.stack.local import StackConfig  # noqa: PLC0415

    state_file = data_dir / "stack.json"
    if not state_file.exists():
        return StackConfig(data_dir=data_dir)
    saved = json.loads(state_file.read_text()).get("config", {})
    fields = {k: v for k, v in saved.items() if k in StackConfig.__dataclass_fields__}
    fields["data_dir"] = Path(fields.get("data_dir", data_dir))
    return StackConfig(**fields)


if __name__ == "__main__":
    app()
