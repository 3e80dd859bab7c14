"""Import rules of the layout (style guide B1): services never import each other, and the core
package never imports a service; the core's domain modules stay free of web/database frameworks."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SERVICES = ("experience_model", "replay_store", "task_generator", "agent_trainer")
CORE = ROOT / "packages" / "dreamgym" / "src" / "dreamgym"
# Core modules that may use frameworks: the FastAPI kit, the CLI/stack, the job runner's users.
FRAMEWORK_FREE = (
    "types.py",
    "errors.py",
    "rl",
    "curriculum",
    "stats.py",
    "prompts",
    "envs",
    "collect.py",
    "auth/keys.py",
)
FRAMEWORKS = ("fastapi", "starlette", "sqlalchemy", "celery", "redis", "uvicorn", "vllm")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def _py_files(base: Path) -> list[Path]:
    return sorted(p for p in base.rglob("*.py") if "__pycache__" not in p.parts)


@pytest.mark.parametrize("service", SERVICES)
def test_service_never_imports_another_service(service: str) -> None:
    others = set(SERVICES) - {service}
    offenders = {
        str(p.relative_to(ROOT)): sorted(_imports(p) & others)
        for p in _py_files(ROOT / "services" / service)
        if _imports(p) & others
    }

    assert offenders == {}


def test_core_package_never_imports_a_service() -> None:
    offenders = {
        str(p.relative_to(ROOT)): sorted(_imports(p) & set(SERVICES))
        for p in _py_files(CORE)
        if _imports(p) & set(SERVICES)
    }

    assert offenders == {}


def test_core_domain_modules_are_framework_free() -> None:
    files = [
        p
        for name in FRAMEWORK_FREE
        for p in ([CORE / name] if name.endswith(".py") else _py_files(CORE / name))
    ]
    offenders = {
        str(p.relative_to(ROOT)): sorted(_imports(p) & set(FRAMEWORKS))
        for p in files
        if _imports(p) & set(FRAMEWORKS)
    }

    assert files and offenders == {}
