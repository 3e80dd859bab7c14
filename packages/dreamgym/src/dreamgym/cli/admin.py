"""``dreamgym admin`` — teams and API keys in the key registry (:mod:`dreamgym.auth`).

Commands:
    dreamgym admin create-team NAME       create a team
    dreamgym admin list-teams             list teams
    dreamgym admin create-key TEAM        create a key; prints it once (stdout: the key only)
    dreamgym admin list-keys TEAM         list a team's keys (ids, labels, times; never secrets)
    dreamgym admin revoke-key KEY_ID      revoke a key (requests with it get 401)
    dreamgym admin rotate-key KEY_ID      create a new key for the same team, then revoke the old

The registry is the database at ``--database-url``, else ``$DREAMGYM_AUTH_DATABASE_URL``, else the
``auth`` database of the local stack saved in ``--data-dir`` (``dreamgym up``). Its tables are
created on first use. Services cache key lookups for ``<SERVICE>_AUTH_CACHE_TTL_S`` seconds
(default 10), so a revoked key stops working within that time.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from dreamgym.errors import DreamGymError

if TYPE_CHECKING:
    from dreamgym.auth.registry import ApiKeyInfo, IssuedKey, KeyRegistry

__all__ = ["admin_app", "resolve_database_url"]

AUTH_DATABASE_URL_ENV = "DREAMGYM_AUTH_DATABASE_URL"

admin_app = typer.Typer(
    help="Manage teams and API keys (the key registry shared by all services).",
    no_args_is_help=True,
    add_completion=False,
)
out = Console()
err = Console(stderr=True, soft_wrap=True)

DatabaseUrl = Annotated[
    str | None,
    typer.Option(
        "--database-url",
        envvar=AUTH_DATABASE_URL_ENV,
        help="SQLAlchemy URL of the key registry (default: the local stack's 'auth' database)",
        show_default=False,
    ),
]
DataDir = Annotated[
    Path, typer.Option(help="Local stack whose registry to use when no URL is given")
]
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead of text")]


def resolve_database_url(database_url: str | None, data_dir: Path) -> str:
    """The registry URL: the given one, else the local stack's ``auth`` database.

    Raises:
        typer.BadParameter: no URL was given and ``data_dir`` holds no saved local stack.
    """
    if database_url:
        return database_url
    from dreamgym.stack.local import AUTH_DATABASE  # noqa: PLC0415
    from dreamgym.stack.postgres import LocalPostgres  # noqa: PLC0415

    state_file = data_dir / "stack.json"
    if not state_file.exists():
        raise typer.BadParameter(
            f"no --database-url, no ${AUTH_DATABASE_URL_ENV} and no local stack in {data_dir} "
            "(start one with `dreamgym up` or pass the registry URL)",
            param_hint="--database-url",
        )
    config = json.loads(state_file.read_text()).get("config", {})
    postgres = LocalPostgres(
        data_dir / "postgres",
        port=int(config.get("postgres_port", 55432)),
        host=str(config.get("host", "127.0.0.1")),
    )
    return postgres.url(AUTH_DATABASE)


@contextmanager
def _registry(database_url: str | None, data_dir: Path) -> Iterator[KeyRegistry]:
    """The registry (schema created), closed afterwards; domain errors exit with status 1."""
    from dreamgym.auth.registry import KeyRegistry  # noqa: PLC0415 - needs dreamgym[auth]

    registry = KeyRegistry.from_url(resolve_database_url(database_url, data_dir), pool_size=1)
    try:
        registry.create_schema()
        yield registry
    except DreamGymError as exc:
        err.print(f"[red]error:[/red] {exc.message}")
        raise typer.Exit(code=1) from None
    finally:
        registry.close()


def _key_json(info: ApiKeyInfo) -> dict[str, object]:
    return {
        "key_id": info.key_id,
        "team": info.team,
        "label": info.label,
        "created_at": info.created_at.isoformat(),
        "revoked_at": info.revoked_at.isoformat() if info.revoked_at else None,
    }


def _print_issued(issued: IssuedKey, as_json: bool) -> None:
    """The new key on stdout (alone, or in JSON); the advice on stderr."""
    if as_json:
        typer.echo(json.dumps({**_key_json(issued.info), "key": issued.key}))
    else:
        typer.echo(issued.key)
    err.print(
        f"created key [bold]{issued.info.key_id}[/bold] for team '{issued.info.team}'. "
        "Store it now: it is shown only this once (only its SHA-256 is kept)."
    )


@admin_app.command("create-team")
def create_team(
    name: Annotated[str, typer.Argument(help="Team name: a-z, 0-9, '.', '_', '-' (≤ 63)")],
    exist_ok: Annotated[bool, typer.Option(help="Succeed if the team already exists")] = False,
    database_url: DatabaseUrl = None,
    data_dir: DataDir = Path(".dreamgym"),
) -> None:
    """Create a team."""
    with _registry(database_url, data_dir) as registry:
        team = registry.create_team(name, exist_ok=exist_ok)
    out.print(f"team '{team.name}' (created {team.created_at:%Y-%m-%d %H:%M:%S %Z})")


@admin_app.command("list-teams")
def list_teams(
    as_json: AsJson = False,
    database_url: DatabaseUrl = None,
    data_dir: DataDir = Path(".dreamgym"),
) -> None:
    """List all teams."""
    with _registry(database_url, data_dir) as registry:
        teams = registry.list_teams()
    if as_json:
        rows = [{"name": t.name, "created_at": t.created_at.isoformat()} for t in teams]
        typer.echo(json.dumps(rows))
        return
    for team in teams:
        out.print(team.name)


@admin_app.command("create-key")
def create_key(
    team: Annotated[str, typer.Argument(help="Team the key belongs to")],
    label: Annotated[str | None, typer.Option(help="Who or what uses the key")] = None,
    as_json: AsJson = False,
    database_url: DatabaseUrl = None,
    data_dir: DataDir = Path(".dreamgym"),
) -> None:
    """Create an API key for TEAM and print it (once; it cannot be shown again)."""
    with _registry(database_url, data_dir) as registry:
        issued = registry.create_key(team, label=label)
    _print_issued(issued, as_json)


@admin_app.command("list-keys")
def list_keys(
    team: Annotated[str, typer.Argument(help="Team whose keys to list")],
    active_only: Annotated[bool, typer.Option(help="Hide revoked keys")] = False,
    as_json: AsJson = False,
    database_url: DatabaseUrl = None,
    data_dir: DataDir = Path(".dreamgym"),
) -> None:
    """List TEAM's keys: id, label, created, revoked (never the keys themselves)."""
    with _registry(database_url, data_dir) as registry:
        keys = registry.list_keys(team, include_revoked=not active_only)
    if as_json:
        typer.echo(json.dumps([_key_json(k) for k in keys]))
        return
    table = Table(title=f"API keys of team '{team}'")
    for column in ("key_id", "label", "created", "revoked"):
        table.add_column(column)
    for key in keys:
        table.add_row(
            key.key_id,
            key.label or "",
            f"{key.created_at:%Y-%m-%d %H:%M:%S}",
            f"{key.revoked_at:%Y-%m-%d %H:%M:%S}" if key.revoked_at else "-",
        )
    out.print(table)


@admin_app.command("revoke-key")
def revoke_key(
    key_id: Annotated[str, typer.Argument(help="Id of the key (the 16 hex digits after 'dg_')")],
    database_url: DatabaseUrl = None,
    data_dir: DataDir = Path(".dreamgym"),
) -> None:
    """Revoke a key: requests with it get 401 (within the services' cache TTL)."""
    with _registry(database_url, data_dir) as registry:
        info = registry.revoke_key(key_id)
    assert info.revoked_at is not None
    out.print(
        f"revoked key {info.key_id} of team '{info.team}' at {info.revoked_at:%Y-%m-%d %H:%M:%S}"
    )


@admin_app.command("rotate-key")
def rotate_key(
    key_id: Annotated[str, typer.Argument(help="Id of the key to replace")],
    as_json: AsJson = False,
    database_url: DatabaseUrl = None,
    data_dir: DataDir = Path(".dreamgym"),
) -> None:
    """Create a new key for the same team (same label), then revoke KEY_ID; print the new key."""
    with _registry(database_url, data_dir) as registry:
        old = registry.get_key(key_id)
        issued = registry.create_key(old.team, label=old.label)
        registry.revoke_key(key_id)
    _print_issued(issued, as_json)
    err.print(f"revoked key {key_id}")
