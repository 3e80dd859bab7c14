#!/usr/bin/env python3
"""Offline validation of the deployment files: no Docker engine and no cluster needed.

1. Compose: ``docker-compose.yml`` and every ``deploy/docker/compose.*.yaml`` override against
   the Compose Specification schema (``check-jsonschema --builtin-schema vendor.compose-spec``).
2. Kustomize: every overlay under ``deploy/k8s/overlays`` rendered with ``kubectl kustomize``
   (or a standalone ``kustomize build``).
3. Manifests: every rendered resource against the Kubernetes OpenAPI schemas with
   ``kubernetes-validate`` in strict mode (an unknown field is an error), for the oldest
   Kubernetes version DreamGym supports and the newest one the package knows.

Usage::

    python scripts/check_deploy.py [--root DIR] [--allow-missing-kustomize]

Exit status: 0 when everything validates; 1 when something does not (every problem is printed);
2 on usage errors. Without ``kubectl`` or ``kustomize`` on ``PATH`` the Kubernetes checks cannot
run: that is an error, unless ``--allow-missing-kustomize`` is given, which skips them with a
loud warning. check-jsonschema and kubernetes-validate come from ``requirements/test.txt``.
tests/deploy/test_deploy_manifests.py imports this module and runs it end to end.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
#: Oldest Kubernetes release the manifests must validate against (autoscaling/v2, policy/v1 PDB,
#: Job ttlSecondsAfterFinished and seccompProfile are all GA there).
MIN_KUBERNETES_VERSION = "1.29.0"
RENDER_TIMEOUT_S = 120


class CheckError(Exception):
    """A deployment file failed a check; the message says which and why."""


def compose_files(root: Path) -> list[Path]:
    """The compose file and its overrides under ``root`` (the file first, then overrides sorted)."""
    overrides = sorted((root / "deploy" / "docker").glob("compose.*.yaml"))
    return [root / "docker-compose.yml", *overrides]


def overlays(root: Path) -> list[Path]:
    """Every kustomize overlay directory under ``root/deploy/k8s/overlays`` (sorted)."""
    base = root / "deploy" / "k8s" / "overlays"
    return sorted(p.parent for p in base.glob("*/kustomization.yaml"))


def validate_compose(files: Sequence[Path]) -> list[str]:
    """Problems of ``files`` against the Compose Specification schema (empty: all valid)."""
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        return [f"compose file not found: {m}" for m in missing]
    result = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec"]
        + [str(f) for f in files],
        capture_output=True,
        text=True,
        check=False,
        timeout=RENDER_TIMEOUT_S,
    )
    if result.returncode == 0:
        return []
    return [f"compose schema: {line}" for line in (result.stdout + result.stderr).splitlines()]


def find_renderer() -> list[str] | None:
    """The command that renders a kustomization directory, or None when no tool is installed.

    ``kubectl kustomize DIR`` (kustomize is built into kubectl) or ``kustomize build DIR``.
    """
    if kubectl := shutil.which("kubectl"):
        return [kubectl, "kustomize"]
    if kustomize := shutil.which("kustomize"):
        return [kustomize, "build"]
    return None


def render(renderer: Sequence[str], directory: Path) -> str:
    """The multi-document YAML that ``directory``'s kustomization renders to.

    Raises:
        CheckError: the kustomization does not build (the tool's message is included).
    """
    result = subprocess.run(
        [*renderer, str(directory)],
        capture_output=True,
        text=True,
        check=False,
        timeout=RENDER_TIMEOUT_S,
    )
    if result.returncode != 0:
        raise CheckError(f"{directory}: kustomize failed: {result.stderr.strip()}")
    return result.stdout


def load_resources(text: str) -> list[dict[str, Any]]:
    """The resources of a multi-document YAML stream (empty documents dropped)."""
    return [doc for doc in yaml.safe_load_all(text) if doc]


def resource_name(resource: dict[str, Any]) -> str:
    """``Kind/name`` of a resource, for messages."""
    return f"{resource.get('kind')}/{resource.get('metadata', {}).get('name')}"


def kubernetes_versions() -> list[str]:
    """Kubernetes versions to validate against: the oldest supported and the newest known."""
    from kubernetes_validate.utils import latest_version  # noqa: PLC0415 - test dependency

    return sorted({MIN_KUBERNETES_VERSION, latest_version()})


def validate_resources(
    resources: Iterable[dict[str, Any]], versions: Sequence[str], source: str
) -> list[str]:
    """Problems of ``resources`` against the Kubernetes schemas of ``versions`` (strict)."""
    import kubernetes_validate  # noqa: PLC0415 - test dependency

    problems: list[str] = []
    for resource in resources:
        for version in versions:
            try:
                kubernetes_validate.validate(resource, version, strict=True)
            except kubernetes_validate.ValidationError as exc:
                where = ".".join(str(p) for p in exc.path) or "(root)"
                problems.append(
                    f"{source}: {resource_name(resource)} (Kubernetes {version}): "
                    f"{where}: {exc.message}"
                )
            except (kubernetes_validate.SchemaNotFoundError, KeyError) as exc:
                problems.append(f"{source}: {resource_name(resource)}: no schema ({exc})")
    return problems


def check(root: Path, *, allow_missing_kustomize: bool = False) -> list[str]:
    """Every problem of the deployment files under ``root`` (empty: all valid).

    Raises:
        CheckError: no overlay was found, or no kustomize renderer is installed and
            ``allow_missing_kustomize`` is False.
    """
    problems = validate_compose(compose_files(root))
    print(f"compose: {len(compose_files(root))} file(s) checked against the Compose Specification")
    found = overlays(root)
    if not found:
        raise CheckError(f"no kustomize overlays under {root / 'deploy/k8s/overlays'}")
    renderer = find_renderer()
    if renderer is None:
        message = (
            "neither kubectl nor kustomize is on PATH: the Kubernetes manifests were NOT "
            "rendered or validated (install kubectl >= 1.27 or kustomize >= 5: the overlays use "
            "kustomize v5 features)"
        )
        if not allow_missing_kustomize:
            raise CheckError(message)
        print(f"WARNING: SKIPPED: {message}", file=sys.stderr)
        return problems
    versions = kubernetes_versions()
    for overlay in found:
        try:
            resources = load_resources(render(renderer, overlay))
        except CheckError as exc:
            problems.append(str(exc))
            continue
        name = str(overlay.relative_to(root))
        problems += validate_resources(resources, versions, name)
        print(f"kustomize: {name}: {len(resources)} resources valid for Kubernetes {versions}")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=REPO_ROOT, help="repository root")
    parser.add_argument(
        "--allow-missing-kustomize",
        action="store_true",
        help="skip (loudly) the Kubernetes checks when neither kubectl nor kustomize exists",
    )
    args = parser.parse_args(argv)
    try:
        problems = check(args.root.resolve(), allow_missing_kustomize=args.allow_missing_kustomize)
    except CheckError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 1
    for problem in problems:
        print(f"ERROR: {problem}", file=sys.stderr)
    print("deploy files: " + ("INVALID" if problems else "all valid"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
