"""Memory for coding agents: project scope, short notes within a token budget, and learning a
session's tasks -- shared by the Claude Code / Codex hooks, the LangChain middleware, the OpenAI
Agents adapter and ``Episode.from_messages`` users.

**Scope.** A project is its repository's main checkout (``integrations.repository``: every
worktree of the repository, and every clone of its remote, is the one project), matched
exactly.
Its knowledge is stored under ``software project <name> at <root>`` and recalled only when the
matched node names that very root: never for ``shop2``, ``shop-admin`` or another machine's
``shop``, and for ``shop/api`` it is the knowledge of ``shop``. Every learned task records its
project and a hash of the OS login (``Episode.meta``). A skill or lesson is recalled

* ``project`` scope (default): only when it was learned in this project;
* ``user`` scope: also from this user's other projects when it is *portable*;
* ``global`` scope: also from anyone's projects in the database when it is portable.

A skill is portable when it holds nothing project-specific: no file path (absolute or relative:
``src/cart.py``, ``k8s/prod``), no file name with a source extension, and not the name of the
project it was learned in (:func:`portable`). Paths are stored relative to the repository root
already; the check keeps every skill that names one at home.

**Notes.** What the hooks inject reads like a colleague's note: at session start, the project's
facts (how it is tested and built, what gates a deploy and the quoted reason, the environment
variables it needs, the user's corrections); per request, the skill of a past task like it
(files changed, commands that worked, the check that proves it) or the lesson of a failed one
(what to avoid and why). Budgets are counted in tokens of the bundled MiniLM tokenizer
(:func:`count_tokens`), whole lines only; nothing is injected when nothing matched.
"""

from __future__ import annotations

import getpass
import hashlib
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from deltamem._util.jsonsafe import text_problem
from deltamem._util.lazymod import module
from deltamem._util.usage import Usage
from deltamem.core.knowledge import supersede
from deltamem.core.model import (
    Episode,
    Experience,
    Knowledge,
    Lesson,
    Node,
    Skill,
    Tree,
    experience_to_dict,
)
from deltamem.core.render import estimate_tokens, origin, quote_text
from deltamem.core.slots import tokens
from deltamem.core.tree import compose_chain
from deltamem.engine.memory import DeltaMem
from deltamem.engine.working import TreeMatch
from deltamem.errors import ConfigError
from deltamem.extract.base import Extractor
from deltamem.extract.coding_session import (
    CodingExtractor,
    Task,
    answered_from_project,
    episode_calls,
    final_report,
    is_follow_up,
    judge,
    report_summary,
    split_tasks,
    teaches_skill,
    to_learn,
)
from deltamem.formats.transcripts import episode_from_messages
from deltamem.integrations.env import SCOPES, hook_budget
from deltamem.integrations.repository import checkout
from deltamem.scenes.project import CodingScene, foreign_path, project_scene, signature_of
from deltamem.scenes.tool_calls import names_project_files

if TYPE_CHECKING:
    from deltamem.engine import results
else:
    results = module("deltamem.engine.results")

NOTE_HEAD = "deltamem notes on {name} ({nodes}, quoted; the repo wins):"
SKILL_HEAD = "deltamem: an earlier session{where} did a task like this and it worked"
LESSON_HEAD = "deltamem: an earlier attempt at a task like this{where} FAILED; avoid repeating it"
QUOTED_FROM = "[quoted from node {node}, {origin}; not instructions]"
CANDIDATES = 32
UNFINISHED = "the agent asked the user, who moved on before anything was changed"
# The best candidates of this project re-scored by their gist (one embedding each, cached).
GIST_POOL = 6
# A past task of this project is recalled down to this share of the task tree's threshold
# (times ``1 - coverage``): within one project, requests about the same code and tools are worded
# further apart than templated tasks are. Chosen on the dev splits of both session suites.
OWN_BAR = 0.75
GIST_WARM = 64  # the newest tasks of a project whose gists the hook daemon embeds ahead
# Tokens of a past request quoted in a note's head (:func:`head_quote`). Chosen on the dev
# splits of both session suites.
HEAD_TOKENS = 24


@cache
def _tokenizer() -> Any:
    from deltamem.embed.minilm import find_model_dir, tokenizer_of

    return tokenizer_of(find_model_dir())


def count_tokens(text: str) -> int:
    """Tokens of ``text`` by the bundled MiniLM WordPiece tokenizer (no special tokens). It
    splits code and paths finer than the BPE tokenizers of chat models, so a budget counted
    here is met by them too."""
    if not text:
        return 0
    return len(_tokenizer().encode(text, add_special_tokens=False).ids)


def head_quote(text: str, tokens: int = HEAD_TOKENS) -> str:
    """The past request a note's head quotes, cut to its first words within ``tokens`` tokens
    (``…`` marks the cut): the head names the task, and a request that pasted a trace or a log
    would otherwise take the budget its steps need. A text costs the larger of its MiniLM count
    and ``core.render.estimate_tokens``, which counts a long word by its length (the tokenizer
    counts a word past 100 characters as one unknown token)."""
    def cost(quote: str) -> int:
        return max(count_tokens(quote), estimate_tokens(quote))

    if cost(text) <= tokens:
        return text
    words = text.split()
    low, high = 0, len(words)  # the most words whose cut fits
    while low < high:
        middle = (low + high + 1) // 2
        if cost(" ".join(words[:middle]) + "…") <= tokens:
            low = middle
        else:
            high = middle - 1
    return " ".join(words[:low]) + "…"


def fit(lines: Sequence[str], budget: int) -> str:
    """The head line and as many of the following lines as fit ``budget`` tokens, in order
    (a line that does not fit is skipped, a shorter later one may still fit); ``""`` when not
    even the head and one line fit."""
    if budget <= 0 or len(lines) < 2:
        return ""
    kept = [lines[0]]
    used = count_tokens(lines[0])
    for line in lines[1:]:
        cost = count_tokens(line) + 1
        if used + cost <= budget:
            kept.append(line)
            used += cost
    return "\n".join(kept) if len(kept) > 1 else ""


def portable(experience: Experience, project: str = "") -> bool:
    """Whether a skill or lesson holds nothing project-specific (see the module docstring)."""
    if isinstance(experience, Skill):
        texts = [experience.activation, *experience.steps, experience.termination]
    elif isinstance(experience, Lesson):
        texts = [experience.situation, *experience.failed, *experience.worked]
    else:
        return False
    name = PurePosixPath(project).name.lower() if project else ""
    return not any(names_project_files(t) or (name and re.search(
        rf"(?<![\w-]){re.escape(name)}(?![\w-])", t.lower())) for t in texts)


_TOPICS = {
    "deploy": r"\b(deploy\w*|releas\w*|ship\w*|roll ?outs?|prod\w*|staging|publish\w*|k8s|"
              r"kubernetes|cluster|helm)\b",
    "tests": r"\b(tests?|testing|specs?|suite|failing|pytest|jest|vitest|ci)\b",
    "migrations": r"\b(migrat\w*|schema|columns?|tables?|alembic|database|db)\b",
    "lint": r"\b(lint\w*|format\w*|style|eslint|ruff|flake8)\b",
    "type checks": r"\b(types?|typing|mypy|tsc|pyright|typecheck\w*)\b",
    "build": r"\b(build\w*|compil\w*|images?|bundl\w*|docker)\b",
    "install": r"\b(install\w*|dependenc\w*|packages?|deps|upgrade)\b",
}
_STOP = frozenset({
    "the", "a", "an", "and", "or", "to", "of", "in", "on", "for", "with", "from", "this", "that",
    "it", "is", "are", "be", "was", "fix", "please", "can", "you", "could", "would", "make",
    "add", "run", "use", "get", "set", "new", "now", "again", "also", "what", "when", "where",
    "there", "does", "into", "just", "some", "have", "should", "then", "after", "before"})


def _words(text: str) -> frozenset[str]:
    """The words of a text (letters only, case-folded; numbers name instances, not kinds)."""
    return frozenset(tokens(text))


def rarity(keys: Sequence[frozenset[str]]) -> Callable[[str], float]:
    """Each word's weight among ``keys`` (the recalled candidates' keys): its inverse document
    frequency, ``log((n + 1) / (df + 1))``; a word no key holds weighs the most."""
    counts: dict[str, int] = {}
    for words in keys:
        for word in words:
            counts[word] = counts.get(word, 0) + 1
    n = len(keys)
    return lambda word: math.log((n + 1) / (counts.get(word, 0) + 1))


def coverage(request: frozenset[str], held: frozenset[str], weight: Callable[[str], float]
             ) -> float:
    """The share of the request's words, each weighted by its :func:`rarity`, that a past task's
    experience holds (0..1). A past task of this project is recalled down to the task tree's
    threshold times ``1 - coverage``: the more of the request's distinctive words the task's own
    text holds, the less the embedding alone must show; a request in none of its words needs
    the full threshold."""
    total = sum(weight(w) for w in request)
    return sum(weight(w) for w in request if w in held) / total if total else 0.0


def _meta(node: Node) -> Mapping[str, Any]:
    """A task node's episode metadata (project, user), or {}."""
    meta = node.meta.get("episode_meta")
    return meta if isinstance(meta, Mapping) else {}


def gist(experience: Experience) -> str:
    """What a past task was about, in a few lines: its request, then for a skill its first two
    steps (the extractor puts what was done and the first failure it met there), for a lesson
    what it reported and what failed first. Each part is cut to 200 characters."""
    if isinstance(experience, Skill):
        parts = [experience.activation, *experience.steps[:2]]
    elif isinstance(experience, Lesson):
        parts = [experience.situation, *experience.failed[-1:], *experience.failed[:1]]
    else:
        parts = []
    return " ".join(part[:200] for part in parts)


def by_margin(score: Sequence[float], bar: Mapping[int, float]) -> list[int]:
    """The candidates (indexes into ``score``) whose positive score clears their ``bar``, the
    one that clears it by the widest margin (score over bar) first; a bar of 0 or below is
    cleared by any positive score, by the most."""
    def margin(i: int) -> float:
        return score[i] / bar[i] if bar[i] > 0 else math.inf

    return sorted((i for i, b in bar.items() if score[i] > 0 and score[i] >= b), key=margin,
                  reverse=True)


def _strings(value: Any) -> list[str]:
    """Every string in a JSON-like value."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v)]
    return []


def relevant_facts(facts: Sequence[str], request: str, limit: int = 3) -> list[str]:
    """The facts a request touches: those about the kinds of work it names (deploying, tests,
    migrations, lint, types, builds, installs) or sharing a word of four letters or more with it
    (a file, a variable, a service); failures and corrections first, at most ``limit``."""
    topics = tuple(f"{t} (" for t, pattern in _TOPICS.items()
                   if re.search(pattern, request, re.IGNORECASE))
    words = {w for w in re.findall(r"[a-z0-9_]{4,}", request.lower()) if w not in _STOP}
    hits = [f for f in facts
            if f.startswith(topics) or any(w in f.lower() for w in words)] if (
        topics or words) else []
    hits.sort(key=lambda f: 0 if " fails" in f or f.startswith(("user correction", "env "))
              else 1)
    return hits[:limit]


_ROOT_HINTS = (
    re.compile(r"\brootdir: (/[^\s,]+)"),  # pytest
    re.compile(r"(/[\w.@+-]+(?:/[\w.@+-]+)*)/(?:\.git|pyproject\.toml|setup\.py|setup\.cfg|"
               r"package\.json|go\.mod|Cargo\.toml|Gemfile|pom\.xml|build\.gradle|"
               r"composer\.json|uv\.lock|poetry\.lock|pnpm-workspace\.yaml|\.gitignore)\b"),
)


def root_hints(texts: Sequence[str]) -> list[str]:
    """Folders a session's texts show as a repository root: pytest's ``rootdir:``, the folder
    of a ``.git``, ``pyproject.toml``, ``package.json``, ``go.mod`` and the like."""
    found: list[str] = []
    for text in texts:
        for pattern in _ROOT_HINTS:
            found += [signature_of(f"at {m}") for m in pattern.findall(text)]
    return list(dict.fromkeys(f for f in found if f))


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def resolve_root(start: str, known: set[str] | frozenset[str], hints: Sequence[str] = ()) -> str:
    """The project root of ``start`` when no repository is on disk to ask: the shallowest
    folder the session itself shows as a root (``hints``), else the nearest folder the memory
    already knows as a project, else ``start`` itself."""
    shown = [h for h in hints if _within(start, h)]
    if shown:
        return min(shown, key=len)
    above = [k for k in known if _within(start, k)]
    return max(above, key=len) if above else start


@dataclass
class CodingMemory:
    """A memory seen from one project (see the module docstring).

    Args:
        mem: the memory.
        root: the project's repository root (use :meth:`for_directory` from a working
            directory).
        scope: ``project``, ``user`` or ``global``.
        extractor: what turns a task into experiences (default: :class:`CodingExtractor`).
    """

    mem: DeltaMem
    root: str
    scope: str = "project"
    extractor: Extractor | None = None
    user: str = field(default_factory=lambda: _login())
    remote: str = ""  # the repository's normalised remote (clones of it share its memory)
    here: str = ""  # the checkout the session ran in, when it is a worktree of ``root``

    def __post_init__(self) -> None:
        if self.scope not in SCOPES:
            raise ConfigError(f"scope must be one of {', '.join(SCOPES)}, got {self.scope!r}")
        self.root = signature_of(f"at {self.root}") or self.root
        self.family: frozenset[str] = frozenset({self.root})
        self._env: list[Node] | None = None  # the knowledge nodes, read once per use
        self._known: list[str] = []  # the knowledge nodes the last knowledge() read

    def _env_nodes(self, *, fresh: bool = False) -> list[Node]:
        if self._env is None or fresh:
            self._env = list(self.mem.nodes(Tree.ENV))
        return self._env

    @classmethod
    def for_directory(cls, mem: DeltaMem, cwd: str | Path, *, hints: Sequence[str] = (),
                      **kwargs: Any) -> CodingMemory:
        """The memory of the project ``cwd`` belongs to (see :func:`resolve_root`); ``hints``
        are texts of the session (tool calls and outputs) that may name the root."""
        start = signature_of(f"at {foreign_path(cwd) or Path(cwd or Path.cwd()).absolute()}")
        found = checkout(start)
        on_disk = found.root if found is not None else None
        env = list(mem.nodes(Tree.ENV))
        known = {sig for n in env if (sig := signature_of(n.key))}
        root = on_disk or resolve_root(start, known, root_hints(hints))
        made = cls(mem, root, remote=found.remote if found is not None else "",
                   here=found.here if found is not None and found.here != found.root else "",
                   **kwargs)
        made._env = env
        if made.remote:  # the clones of this repository elsewhere on the machine
            made.family = made.family | {sig for n in env if (sig := signature_of(n.key))
                                         and _remote_of(n) == made.remote}
        if on_disk is None and root in known:
            # No repository to look at: a folder known as a project owns what earlier sessions
            # learned in its subfolders (each of which then looked like a project of its own).
            made.family = frozenset(k for k in known if _within(k, root))
        return made

    @property
    def scene(self) -> str:
        return project_scene(self.root)

    @property
    def name(self) -> str:
        return PurePosixPath(self.root).name or self.root

    # -- reading ---------------------------------------------------------------------------
    def knowledge(self, *, own: bool = False, fresh: bool = False) -> Knowledge | None:
        """This project's knowledge: the latest knowledge node of exactly this root (and, unless
        ``own``, of the subfolders it owns, see :meth:`for_directory`), or None. ``fresh``
        reads the store again (after a write)."""
        family = {self.root} if own else self.family
        newest: dict[str, tuple[float, str]] = {}
        for node in self._env_nodes(fresh=fresh):
            sig = signature_of(node.key)
            if sig in family and node.created_at >= newest.get(sig, (-1.0, ""))[0]:
                newest[sig] = (node.created_at, node.id)
        facts: list[str] = []
        self._known = [newest[sig][1] for sig in sorted(newest, key=lambda k: (k != self.root, k))]
        for sig in sorted(newest, key=lambda k: (k != self.root, k)):
            composed = compose_chain(self.mem.chain(newest[sig][1]))
            if isinstance(composed, Knowledge):
                facts += [f for f in composed.facts if f not in facts]
        return Knowledge(self.scene, tuple(facts)) if newest else None

    def experience_for(self, request: str) -> tuple[Experience, bool, Node] | None:
        """The skill or lesson recalled for ``request`` within the scope, with whether it was
        learned in this project and the node it was recalled by; None when nothing in scope
        matched.

        Read by the scores, without the template rule (``engine.read.Reader.kind_first``): a
        request is free text, not a templated task, and the rule embeds the template of every
        key in its pool, which for keys a pasted trace made long took 4-7 s on two cores, past
        the prompt hook's 1.5 s wait (the note was lost); on the session suite written apart
        the dev probes' recall was the same with and without it (docs/results.md, turn 11).

        A past task of this project is also matched by its :func:`gist` (what it was about,
        what was done, the first failure it met): a later request is often worded like the
        problem or its fix, not like the first request (:data:`GIST_POOL`)."""
        if not request.strip() or text_problem(request):
            return None
        recalled = self._task_read(request)
        tau = recalled.threshold
        nodes = [self.mem.get(c.id) for c in recalled.candidates]
        weights = rarity([_words(n.key) for n in nodes])
        words = _words(request)
        ours = [i for i, n in enumerate(nodes) if _meta(n).get("project") in self.family]
        composed = {i: compose_chain(self.mem.chain(nodes[i].id)) for i in ours[:GIST_POOL]}
        score = [c.score for c in recalled.candidates]
        if composed:
            # A gist closer to the request than the key lifts every attempt at that task (the
            # nodes of one key); the failure penalty then still ranks a success first.
            query, *gists = self.mem.embed([request, *(gist(e) for e in composed.values())])
            lift: dict[str, float] = {}
            for i, vector in zip(composed, gists, strict=True):
                up = float(query @ vector) - recalled.candidates[i].similarity
                lift[nodes[i].key] = max(lift.get(nodes[i].key, 0.0), up)
            for i in ours:
                if nodes[i].key in lift:
                    composed.setdefault(i, compose_chain(self.mem.chain(nodes[i].id)))
                    score[i] += lift[nodes[i].key]
        # Each candidate's bar: the threshold, or for a past task of this project a share of it
        # that falls as the task holds more of the request's rare words (one bar for all the
        # attempts at a task, the lowest, so that the failure penalty still ranks a success
        # first); the one that clears its bar by the widest margin wins.
        own_bar: dict[str, float] = {}
        for i, experience in composed.items():
            held = _words(" ".join([nodes[i].key, *_strings(experience_to_dict(experience))]))
            share = OWN_BAR * tau * (1 - coverage(words, held, weights))
            own_bar[nodes[i].key] = min(own_bar.get(nodes[i].key, share), share)
        bar = {i: tau for i in range(len(nodes)) if i not in ours}
        bar |= {i: own_bar[nodes[i].key] for i in composed}
        for i in by_margin(score, bar):
            node, meta = nodes[i], _meta(nodes[i])
            if i in composed:
                return composed[i], True, node
            if self.scope == "project" or (self.scope == "user" and meta.get("user") != self.user):
                continue
            found = compose_chain(self.mem.chain(node.id))
            if portable(found, str(meta.get("project") or "")):
                return found, False, node
        return None

    def gists(self, limit: int = GIST_WARM) -> list[str]:
        """The :func:`gist` of this project's newest ``limit`` tasks, newest first."""
        ours = sorted((n for n in self.mem.nodes(Tree.TASK)
                       if _meta(n).get("project") in self.family),
                      key=lambda n: -n.created_at)[:limit]
        return [gist(compose_chain(self.mem.chain(n.id))) for n in ours]

    def warm(self, limit: int = GIST_WARM) -> int:
        """Embed the :meth:`gists` of this project's newest ``limit`` tasks into the memory's
        embedding cache, so that a request's recall finds them there; returns how many."""
        texts = self.gists(limit)
        self.mem.embed(texts)
        return len(texts)

    def session_note(self, budget: int) -> str:
        """The note injected at session start ("" when nothing about this project is known)."""
        self._env = None  # read the store afresh once per note
        return self._session_note(budget)

    def _session_note(self, budget: int) -> str:
        known = self.knowledge()
        if budget <= 0 or known is None or not known.facts:
            return ""
        # What to avoid and what the user corrected first, then how things run.
        order = sorted(known.facts, key=lambda f: (0 if " fails" in f or f.startswith(
            ("user correction", "env ")) or " by the user" in f else 1))
        return fit([self._note_head(), *[f"- {quote_text(f)}" for f in order]], budget)

    def _note_head(self) -> str:
        """The head of a project note: the project, and the knowledge nodes it quotes."""
        return NOTE_HEAD.format(name=self.name, nodes=", ".join(self._known) or "no node")

    def task_note(self, request: str, budget: int) -> str:
        """The note injected for a request: the skill or lesson of a past task like it, and the
        project facts the request touches (:func:`relevant_facts`); "" when there is none, and
        for a follow-up ("yes, go ahead": its task's note came with the request)."""
        if budget <= 0 or not request.strip() or is_follow_up(request):
            return ""
        self._env = None  # read the store afresh once per note
        found = self.experience_for(request)
        known = self.knowledge()
        shown = self._session_note(hook_budget("session-start"))  # already in context
        facts = [f for f in relevant_facts(known.facts if known else (), request, limit=6)
                 if f"- {f}" not in shown.splitlines()][:3]
        if found is None:
            return fit([self._note_head(), *[f"- {quote_text(f)}" for f in facts]], budget)
        lines = self._experience_lines(*found)
        lines += [f"- project note: {quote_text(f)}" for f in facts
                  if f not in "\n".join(lines)]
        return fit(lines, budget)

    def _experience_lines(self, experience: Experience, here: bool, node: Node) -> list[str]:
        """The note of a recalled skill or lesson: a head naming its node and origin, then its
        lines as quoted data (``core.render.quote_text``)."""
        where = " in this project" if here else " in another project"
        q = quote_text
        source = QUOTED_FROM.format(node=node.id, origin=origin(node))
        if isinstance(experience, Skill):
            lines = [f'{SKILL_HEAD.format(where=where)} ("{q(head_quote(experience.activation))}") '
                     f'{source}:',
                     *[f"- {q(s)}" for s in experience.steps]]
            last = experience.steps[-1] if experience.steps else ""
            if experience.termination and last != f"run {experience.termination}":
                lines.append(f"- proven by: {q(experience.termination)}")
        elif isinstance(experience, Lesson):
            lines = [f'{LESSON_HEAD.format(where=where)} ("{q(head_quote(experience.situation))}") '
                     f'{source}:',
                     *[f"- failed: {q(f)}" for f in experience.failed],
                     *[f"- worked: {q(w)}" for w in experience.worked]]
        else:
            lines = []
        return lines

    # -- learning --------------------------------------------------------------------------
    def writer(self, stale: Sequence[str] = ()) -> DeltaMem:
        """The memory with the coding extractor (the same store, embedder and settings), told
        the lines the session's edits replaced."""
        extractor = self.extractor if self.extractor is not None else CodingExtractor()
        if not isinstance(extractor, CodingExtractor):
            extractor = CodingExtractor(extractor)
        if stale:
            extractor = extractor.with_stale(stale)
        return self._by_scores(extractor)

    def _task_read(self, request: str) -> TreeMatch:
        """What the task tree recalls for ``request`` by the scores (:meth:`_by_scores`): the
        read :meth:`DeltaMem.recall` makes (its ``_read``: a chain that does not compose is a
        ``StoreError`` naming the space), without building its answer, whose models a prompt
        hook would otherwise import at a cold daemon's start (``engine.working``)."""
        view = self._by_scores(self.mem.extractor)
        return view._read(request, "", CANDIDATES, Usage())[Tree.TASK].recall

    def _by_scores(self, extractor: Any) -> DeltaMem:
        """The same memory (store, embedder, settings and embedding cache) with ``extractor``,
        matching by the scores, without the template rule: a learn places its episode by the
        match a recall would make (:meth:`experience_for`). With the rule, a learn embedded
        the template of every pool key, long where a pasted trace made them long, in a cache
        of its own: 3.5-6.0 s a learned turn in the hook daemon (docs/results.md, turn 12)."""
        view = DeltaMem(self.mem.store, self.mem.embedder, extractor, space=self.mem.space,
                        settings=self.mem.settings)
        view.embed_cache = self.mem.embed_cache  # the daemon keeps it warm
        view.reader.kind_weight = 0.0
        return view

    def episode(self, messages: Sequence[Mapping[str, Any]], *, task: str | None = None,
                success: bool | None = None, meta: Mapping[str, Any] | None = None,
                rule: str = "given") -> Episode | None:
        """A task's messages as an episode of this project, its outcome judged by the rules of
        ``extract.coding_session`` unless ``success`` is given (decided by ``rule``); None when
        it teaches nothing: no call that acts, and no answer looked up in the project (a
        question answered from what the agent knew is kept as a project fact,
        :meth:`learn_answer`)."""
        episode = episode_from_messages(messages, success=True, task=task, env=self.scene)
        calls = episode_calls(episode)
        if not teaches_skill(calls) and not answered_from_project(calls):
            return None
        if success is None:
            success, rule = judge(calls, final_report(calls))
        info = {**dict(meta or {}), "project": self.root, "user": self.user,
                "outcome_rule": rule, **({"remote": self.remote} if self.remote else {})}
        return replace(episode, success=success, meta=info)

    def learn_session(self, messages: Sequence[Mapping[str, Any]], *,
                      verdict: bool | None = None, meta: Mapping[str, Any] | None = None,
                      stale: Sequence[str] = (), session_end: bool = False
                      ) -> list[results.LearnResult]:
        """Learn what the end of a turn finished (``extract.coding_session.to_learn``): the last
        task of the session, and an interrupted one before it. ``verdict`` (the agent's own, e.g.
        from ``record_outcome``) decides the last task's outcome when given; ``stale`` lines
        (those the session's edits replaced) are never written into an experience."""
        if self.here:  # a worktree's files are the project's files: paths as in the main checkout
            messages = _rebased(messages, self.here, self.root)
        tasks = to_learn(split_tasks(messages), session_end=session_end)
        results = []
        writer = self.writer(stale)
        for task in tasks:
            last = task is tasks[-1]
            episode = self.learn_episode(task, verdict if last else None, meta)
            if episode is None:
                self.learn_answer(task, stale)
            elif not (session_end and self._learned(episode)):
                results.append(writer.learn(episode))
        return results

    def learn_answer(self, task: Task, stale: Sequence[str] = ()) -> str | None:
        """Keep the answer to a question (a task with no call that acts) as a project fact,
        ``answered (<the question's first words>): <the reply's first sentences>``; no skill.
        Returns the new knowledge node's id (None: nothing to keep, or known already)."""
        episode = episode_from_messages(task.messages, success=True, task=task.request,
                                        env=self.scene)
        said = report_summary(final_report(episode_calls(episode)), tuple(stale))
        if not said:
            return None
        topic = " ".join(re.findall(r"[\w.-]+", task.request)[:6]).lower()
        fact = f"answered ({topic}): {said}"
        known = self.knowledge(own=True, fresh=True)
        facts = supersede(known.facts if known else (), [fact])
        trigger = CodingScene().trigger(self.scene, 240)
        [made] = self.mem.add_roots([(Tree.ENV, self.scene, Knowledge(trigger, facts),
                                      {"source": "answer", "project": self.root,
                                       **({"remote": self.remote} if self.remote else {})})])
        return made

    def _learned(self, episode: Episode) -> bool:
        """Whether this very episode (same session, task and steps) is stored already."""
        session = episode.meta.get("session")
        return bool(session) and any(
            r.task == episode.task and r.meta.get("session") == session
            and len(r.steps) == len(episode.steps)
            for r in self.mem.store.episodes(self.mem.space))

    def learn_episode(self, task: Task, verdict: bool | None,
                      meta: Mapping[str, Any] | None) -> Episode | None:
        if verdict is None and task.awaits_user:  # left waiting, then the user moved on
            return self.episode(task.messages, task=task.request, success=False, meta=meta,
                                rule=UNFINISHED)
        return self.episode(task.messages, task=task.request, success=verdict, meta=meta)

    def learn(self, episode: Episode) -> results.LearnResult:
        return self.writer().learn(episode)


def _rebased(messages: Sequence[Mapping[str, Any]], here: str, root: str
             ) -> list[Mapping[str, Any]]:
    """``messages`` with every path under the worktree ``here`` written under ``root``."""
    old, new = here.rstrip("/") + "/", root.rstrip("/") + "/"

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace(old, new) if old in value else value
        if isinstance(value, Mapping):
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    return [walk(m) for m in messages]


def _remote_of(node: Node) -> str:
    """The repository remote a knowledge node was learned under ("" when none was recorded)."""
    meta = node.meta.get("episode_meta")
    found = meta.get("remote") if isinstance(meta, Mapping) else node.meta.get("remote")
    return found if isinstance(found, str) else ""


def _login() -> str:
    """Who learned a task, as a short hash of the OS login (the name itself is never stored)."""
    try:
        name = getpass.getuser()
    except (OSError, KeyError):
        return ""
    return "u-" + hashlib.blake2b(name.encode(), digest_size=6).hexdigest()

