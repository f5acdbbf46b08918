"""What `make test` must leave alone: the user's installation.

The user's Lmod module trees, Spack store, Spack configuration (the pinned Spack's own
scopes, ~/.spack and /etc/spack), global Python environment, results history and
healthcheck state (with its lock).  conftest.py takes a snapshot of each before the
session and compares after it; tests that build use a private environment, module root
and Spack scope instead (tests/test_local_install.py), and every test's history and
healthcheck state are temporary files (conftest.py pins them).

A snapshot records every file's path, type, mode, size and modification time (and a
symbolic link's target), not contents: a rewrite of a file changes its time, and a
stat walk of a Spack store or site-packages takes well under a second.
"""

from __future__ import annotations

import os
import site
import sysconfig
from pathlib import Path

import yaml

from ocibench import paths
from ocibench.health import state as health_state

#: One entry per file: (type, mode, size, mtime_ns, link target).
Entry = tuple
Snapshot = dict  # watched name -> {relative path: Entry}


def user_install_tree() -> Path:
    """The install tree of the user's Spack: `config:install_tree:root` of the user's or
    the Spack instance's own scope, else Spack's default `$spack/opt/spack`."""
    spack = paths.spack_root()
    for scope in (user_spack_config(), spack / "etc" / "spack"):
        config = scope / "config.yaml"
        if config.is_file():
            tree = (yaml.safe_load(config.read_text()) or {}).get("config", {}).get("install_tree")
            root = tree.get("root") if isinstance(tree, dict) else None
            if root:
                return Path(str(root).replace("$spack", str(spack))).expanduser()
    return spack / "opt" / "spack"


def user_spack_config() -> Path:
    """The user's Spack scope and caches: $SPACK_USER_CONFIG_PATH, else ~/.spack."""
    return Path(os.environ.get("SPACK_USER_CONFIG_PATH") or Path.home() / ".spack")


def watched() -> dict[str, Path]:
    """Where the user's installation lives; taken once, before tests redirect Spack."""
    python = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib"),
              sysconfig.get_path("scripts")}
    if site.ENABLE_USER_SITE:
        python.add(site.getusersitepackages())
    places = {
        "module trees": paths.module_root("-").parent,
        "Spack store": user_install_tree(),
        "Spack configuration": paths.spack_root() / "etc" / "spack",
        "~/.spack": user_spack_config(),
        "/etc/spack": Path("/etc/spack"),
    }
    for i, where in enumerate(sorted(python)):
        places[f"Python environment ({i}: {where})"] = Path(where)
    # What `ocibench sweep`, `history add` and the healthcheck write by default: a
    # file each (a snapshot of a file is its own entry; created, it shows as added).
    history = paths.history_db()
    places["results history"] = history
    for suffix in ("-journal", "-wal"):
        places[f"results history ({suffix})"] = history.with_name(history.name + suffix)
    health = health_state.default_path()
    places["healthcheck state"] = health
    places["healthcheck state lock"] = health.with_name(health.name + ".lock")
    return places


def _entry(path: Path) -> Entry:
    info = path.lstat()
    target = os.readlink(path) if path.is_symlink() else ""
    return (info.st_mode >> 12, info.st_mode & 0o7777, info.st_size, info.st_mtime_ns, target)


def _walk(root: Path) -> dict[str, Entry]:
    if not root.exists() and not root.is_symlink():
        return {}
    files = {".": _entry(root)}
    for top, dirs, names in os.walk(root):
        for name in dirs + names:
            path = Path(top) / name
            try:
                files[str(path.relative_to(root))] = _entry(path)
            except FileNotFoundError:  # gone between listing and stat: a change anyway
                files[str(path.relative_to(root))] = ("gone",)
    return files


def snapshot(places: dict[str, Path] | None = None) -> Snapshot:
    return {name: _walk(path) for name, path in (places or watched()).items()}


def changes(before: Snapshot, after: Snapshot, limit: int = 5) -> list[str]:
    """One line per watched place that changed, naming up to `limit` of its files."""
    lines = []
    for name in before:
        old, new = before[name], after.get(name, {})
        changed = sorted(p for p in old.keys() | new.keys() if old.get(p) != new.get(p))
        if changed:
            what = ", ".join(("added " if p not in old else "removed " if p not in new
                              else "") + p for p in changed[:limit])
            more = f" and {len(changed) - limit} more" if len(changed) > limit else ""
            lines.append(f"{name}: {what}{more}")
    return lines
