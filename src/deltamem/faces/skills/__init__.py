"""Skills as files, in two layouts: the agent-skills ``SKILL.md`` folders
(:mod:`.skill_md`) and the ``MEMORY.md`` index with one file per chain (:mod:`.memory_md`);
what both share -- front matter, hostile-folder-safe reading and writing, the one write through
the facade -- is in :mod:`.files`.

:func:`export_layout` and :func:`import_layout` pick the layout.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deltamem.engine.memory import DeltaMem
from deltamem.errors import ConfigError
from deltamem.faces.skills.files import KNOWLEDGE_DIR, MAX_BYTES, max_bytes, slugify
from deltamem.faces.skills.memory_md import (
    INDEX_LINES,
    LESSONS_DIR,
    MEMORY_INDEX,
    SKILLS_DIR,
    export_memory_md,
    import_memory_md,
)
from deltamem.faces.skills.skill_md import (
    ParsedSkill,
    add_skill_roots,
    export_skills,
    find_skill_files,
    import_skills,
    parse_skill_md,
    skill_key,
)

__all__ = ["INDEX_LINES", "KNOWLEDGE_DIR", "LESSONS_DIR", "MAX_BYTES", "MEMORY_INDEX",
           "SKILLS_DIR", "ParsedSkill", "add_skill_roots", "export_layout", "export_memory_md",
           "export_skills", "find_skill_files", "import_layout", "import_memory_md",
           "import_skills", "max_bytes", "parse_skill_md", "skill_key", "slugify"]


def export_layout(mem: DeltaMem, out_dir: str | Path, layout: str) -> dict[str, Any]:
    """Export in ``layout``: ``skills`` (:func:`export_skills`) or ``memory-md``
    (:func:`export_memory_md`); the result names the folder and layout, then what was written
    (``deltamem.formats.api.SkillsExportOut``)."""
    exporters = {"skills": export_skills, "memory-md": export_memory_md}
    if layout not in exporters:
        raise ConfigError(f"unknown layout {layout!r} (skills or memory-md)")
    return {"dir": str(out_dir), "layout": layout, **exporters[layout](mem, out_dir)}


def import_layout(mem: DeltaMem, src: str | Path) -> dict[str, Any]:
    """Import SKILL.md folders, or a MEMORY.md layout when ``src`` holds a ``MEMORY.md``."""
    base = Path(src)
    if (base / MEMORY_INDEX).is_file():
        return import_memory_md(mem, base)
    return import_skills(mem, base)
