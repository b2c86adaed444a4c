"""Coding sessions: tasks across turns, outcomes as a developer judges them, and the extractor
that turns a coding task into a short skill, a failure lesson and project knowledge.

**Tasks across turns** (:func:`split_tasks`). A session is a list of user requests, each with the
agent's messages after it (a *turn*). Each request is classified by its form
(``scenes.prompts.prompt_kind``): a *new task* starts a task; anything else -- a continuation
("yes", "go ahead", "commit that", "run the tests again"), negative feedback on the last result
("that didn't work, the page is still blank"), a stated convention ("we use pnpm here") or a
question or request about the work (a question ending in "?") -- continues the
task before it, so the task keeps the original request as its key and holds the whole
procedure. When the agent's last reply asked a question, a short reply that points back ("the
id is 42, add it") answers it and continues the task.

**Outcome rules** (:func:`judge`), in order; the first that applies decides:

1. the agent's own verdict (the memory's ``record_outcome`` tool; see the hooks);
2. a user interrupt, a rejected tool call or the user's negative feedback on the result (the
   corrections path) -> failure, unless a verifying run after the last one passed (the user
   redirected the agent and it got there);
3. the first two sentences of the assistant's final report say it did not get there ("I
   couldn't fix", "still fails", "was denied", "blocked by") -> failure;
4. the last verifying run (tests, type checks, lint, build, deploy, migration) decides: it
   passed -> success, it failed -> failure, it shows nothing (no output, no exit code: a
   result never written) -> failure, never a pass; earlier errors do not count;
5. otherwise the last call that acts (an edit or a command that is not a read or a check): a
   failure when it failed, else success.

An expected non-zero exit of a check (``grep`` finding nothing, ``test -f`` on an absent file,
``diff`` showing differences) is no failure at all (``scenes.tool_calls`` status ``no-match``).

**What a task teaches** (:class:`CodingExtractor`): a question answered by looking in the
project (reads or searches, then a reply: :func:`answered_from_project`) teaches a :class:`Skill`
whose steps are the answer and the files read; one answered without looking gives only an
``answered`` fact; a successful task gives a :class:`Skill`
keyed by the request whose steps are the files changed and the commands that worked (paths
relative to the repository root; a shell command that changes files as typed), after the
first failure it met (the symptom a later request is often worded like), with the check that
proves it as its termination; a failed
one a :class:`Lesson` quoting each failure's reason (the end of the output, never its head); any
task gives project knowledge (``CodingScene.facts``). When a task edits files, the known facts
it makes stale are dropped as the knowledge is merged (the delta records the removal): a failing
test, type, lint or build run, and any failure that names an edited file. Project facts carry
their support over sessions (``core.knowledge.absorb``): "tests (pytest): `pytest -q` works (3
of 4 sessions)" -- a claim seen again counts once more, a session that showed another claim
counts in n only; each subject keeps its latest claim (a later run supersedes, as before; a
replaced claim that comes back starts again at 1). A fact seen in one session only stays
plain (a plain fact counts as 1 of 1).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from deltamem.core.knowledge import (
    absorb,
    episode_tendencies,
    fact_subject,
    supersede,
    tendency,
)
from deltamem.core.model import Episode, Experience, Knowledge, Lesson, Skill, Tree
from deltamem.extract.base import Extraction, Extractor, ExtractRequest
from deltamem.formats.transcripts import content_text
from deltamem.scenes.project import CodingScene, keep_canonical, signature_of
from deltamem.scenes.prompts import asks, is_correction, is_negative_feedback, prompt_kind
from deltamem.scenes.tool_calls import (
    INTERRUPT_MARKS,
    VERIFYING,
    ToolCall,
    command_text,
    flat,
    names_project_files,
    parse_call,
    reason,
    summary,
    tail_cut,
)

Message = Mapping[str, Any]

# User texts that are not requests: tool scaffolding both clients record as user messages.
NOT_A_REQUEST = ("<environment_context>", "<user_instructions>", "# AGENTS.md", "<command-",
                 "<local-command-", "Caveat: ", "<system-reminder>", "<turn_aborted>", "<bash-",
                 "<user_shell_command>", "<subagent_notification>", "<skill>",
                 "<permissions instructions>",
                 "This session is being continued from a previous conversation",
                 *INTERRUPT_MARKS)
_SENTENCES = re.compile(r"(?<=[.!?])\s+")
_QUESTION_END = re.compile(r"\?\s*(?:\*+)?\s*$")
_NEGATIVE_REPORT = re.compile(
    r"\b(i (couldn'?t|could not|wasn'?t able to|was not able to|am unable to|can'?t|cannot|"
    r"did not manage to|didn'?t manage to) (fix|get|make|deploy|resolve|complete|finish|apply|"
    r"push|merge|build|install|migrate|solve|pass|land|ship|release|run)|"
    r"still (fails?|failing|broken|red|errors?)|did(n'?t| not) (work|pass|fix|help)|"
    r"(is|was|were|got|been) (blocked|denied|refused)|blocked by|not (yet )?"
    r"(fixed|resolved|deployed)|(has|have) failed|could not be (fixed|deployed|applied))\b",
    re.IGNORECASE)


def is_request(message: Message) -> bool:
    """A user message that is a request (not tool scaffolding, a client note or an interrupt)."""
    text = content_text(message.get("content"))
    return message.get("role") == "user" and bool(text) and not text.startswith(NOT_A_REQUEST)


def is_follow_up(text: str, *, asked: bool = False) -> bool:
    """Whether a request continues the task before it: anything but a new task (see the module
    docstring); ``asked``: the agent's last reply asked a question."""
    return prompt_kind(text, asked=asked) != "new-task"


def interrupted(messages: Sequence[Message]) -> bool:
    """Whether the user interrupted the agent in ``messages`` or rejected one of its calls."""
    calls = [c for c in _calls(messages)]
    if any(c.status in ("interrupted", "rejected") for c in calls):
        return True
    return any(m.get("role") == "user" and any(mark in content_text(m.get("content"))
                                               for mark in INTERRUPT_MARKS) for m in messages)


@dataclass
class Task:
    """One task of a session: its request and the turns that worked on it."""

    request: str
    turns: list[list[Message]] = field(default_factory=list)

    @property
    def messages(self) -> list[Message]:
        out: list[Message] = []
        for turn in self.turns:
            out += turn
        return out

    @property
    def ended_by_user(self) -> bool:
        return bool(self.turns) and interrupted(self.turns[-1])

    @property
    def asked(self) -> bool:
        """Whether the agent's last reply in this task ends with a question."""
        replies = [content_text(m.get("content")) for m in self.turns[-1]
                   if m.get("role") == "assistant" and not m.get("tool_calls")] \
            if self.turns else []
        return bool(replies) and bool(_QUESTION_END.search(replies[-1]))

    @property
    def awaits_user(self) -> bool:
        """Whether the task stopped to wait on the user: it asked for a change (no sentence of
        the request is a question), nothing was edited, and the agent's last reply asks the
        user (a choice, a missing detail). It is learned once the user moves on to another task
        or the session ends, as unfinished; an answer continues it (:func:`to_learn`)."""
        return self.asked and not asks(self.request) and not any(
            c.kind == "edit" for c in _calls(self.messages))


def split_tasks(messages: Sequence[Message]) -> list[Task]:
    """The tasks of a session, oldest first (see the module docstring)."""
    tasks: list[Task] = []
    turn: list[Message] | None = None
    for message in messages:
        if is_request(message):
            text = content_text(message.get("content"))
            turn = [dict(message)]
            if tasks and tasks[-1].turns and is_follow_up(text, asked=tasks[-1].asked):
                tasks[-1].turns.append(turn)
            else:
                tasks.append(Task(text, [turn]))
        elif turn is not None:
            turn.append(dict(message))
    return tasks


def to_learn(tasks: Sequence[Task], *, session_end: bool = False) -> list[Task]:
    """The tasks the end of a turn should learn: the last task, and the one before it when
    that one ended in an interrupt or waiting on the user (:attr:`Task.awaits_user`) and the
    last task has just begun (no Stop hook runs after an interrupt; a task left waiting is
    unfinished once the user moves on). A last task waiting on the user is not learned yet: the
    user's answer continues it. At the session's end, only a last task that ended in an
    interrupt or waiting on the user (the turns before were learned when they ended)."""
    if not tasks:
        return []
    if session_end:
        return [tasks[-1]] if tasks[-1].ended_by_user or tasks[-1].awaits_user else []
    last = tasks[-1]
    out = [tasks[-2]] if len(tasks) > 1 and len(last.turns) == 1 and (
        tasks[-2].ended_by_user or tasks[-2].awaits_user) else []
    return out if last.awaits_user else [*out, last]


def _calls(messages: Sequence[Message]) -> list[ToolCall]:
    from deltamem.formats.transcripts import episode_from_messages

    steps = [m for m in messages if m.get("role") in ("assistant", "tool")]
    if not any(m.get("tool_calls") for m in steps):
        return []
    episode = episode_from_messages([{"role": "user", "content": "-"}, *messages],
                                    success=True, task="-")
    return [parse_call(s) for s in episode.steps]


# -- outcomes -------------------------------------------------------------------------------


def judge(calls: Sequence[ToolCall], report: str = "") -> tuple[bool, str]:
    """A task's outcome and the rule that decided it (rules 2-5 of the module docstring)."""
    stopped = [i for i, c in enumerate(calls) if c.status in ("interrupted", "rejected")]
    if stopped and not _recovered(calls, stopped[-1]):
        return False, "the user interrupted the task or rejected a call"
    disowned = [i for i, c in enumerate(calls) if any(is_negative_feedback(u) for u in c.user)]
    if disowned and not _recovered(calls, disowned[-1]):
        return False, "the user said the result did not work"
    verdict_text = " ".join(_SENTENCES.split(report.strip())[:2])  # reports lead with it
    if verdict_text and _NEGATIVE_REPORT.search(verdict_text):
        return False, "the final report says it did not succeed"
    verifying = [c for c in calls if c.kind == "run" and c.purpose in VERIFYING]
    if verifying:
        last = verifying[-1]
        if last.status == "unknown":
            return False, f"the last {last.purpose} run shows no result (never a pass)"
        verdict = "failed" if last.failed else "passed"
        return not last.failed, f"the last {last.purpose} run {verdict}"
    acting = [c for c in calls if c.acts]
    if acting and acting[-1].failed:
        return False, "the last call that acts failed"
    return True, "no failure at the end"


def _recovered(calls: Sequence[ToolCall], after: int) -> bool:
    """Whether a verifying run after call ``after`` passed."""
    return any(c.kind == "run" and c.purpose in VERIFYING and c.status == "ok"
               for c in calls[after + 1:])


def episode_calls(episode: Episode) -> list[ToolCall]:
    """The episode's steps as tool calls, paths relative to its project root."""
    root = signature_of(episode.env)
    return [parse_call(s, root) for s in episode.steps]


def final_report(calls: Sequence[ToolCall]) -> str:
    replies = [c.output for c in calls if c.kind == "reply"]
    return replies[-1] if replies else ""


def teaches_skill(calls: Sequence[ToolCall]) -> bool:
    """Whether a task did something (changed or checked something)."""
    return any(c.acts for c in calls)


def answered_from_project(calls: Sequence[ToolCall]) -> bool:
    """Whether a task is a question the agent answered by looking in the project: it read or
    searched, then replied. It is learned as a skill (the answer and where it was found), so
    that a later request about the same code recalls it."""
    return any(c.kind in ("read", "search") or (c.kind == "run" and not c.acts)
               for c in calls) and bool(final_report(calls))


# -- the extractor --------------------------------------------------------------------------


class CodingExtractor:
    """Coding-task extraction (see the module docstring). With ``base`` (an LLM extractor), the
    model writes the experiences from the episode (whose observations hold each output's
    meaningful part) and this class keeps the coding rules for what it cannot know: the facts a
    coding episode teaches are those of :class:`CodingScene` merged with the model's."""

    def __init__(self, base: Extractor | None = None, *, max_facts: int = 40,
                 max_chars: int = 240, stale: Iterable[str] = ()) -> None:
        self.base = base
        self.scene = CodingScene()
        self.max_facts = max_facts
        self.max_chars = max_chars
        self.stale = tuple(s for s in (flat(t) for t in stale) if len(s) >= MIN_STALE)
        self.name = f"coding+{base.name}" if base is not None else "coding"
        self.uses_llm = bool(base is not None and base.uses_llm)

    def with_stale(self, lines: Iterable[str]) -> CodingExtractor:
        """This extractor, told the lines the session's edits replaced (never written into an
        experience: what an edit made false is no lesson)."""
        return CodingExtractor(self.base, max_facts=self.max_facts, max_chars=self.max_chars,
                               stale=lines)

    def extract(self, request: ExtractRequest) -> Extraction:
        done = self._extract(request)
        done.experience = self._fresh(done.experience)
        if done.standalone is not None:
            done.standalone = self._fresh(done.standalone)
        return done

    def _fresh(self, experience: Experience) -> Experience:
        """``experience`` without the items that quote a line an edit replaced."""
        if not self.stale:
            return experience

        def keep(items: Iterable[str]) -> tuple[str, ...]:
            return tuple(i for i in items if not any(s in flat(i) for s in self.stale))

        if isinstance(experience, Skill):
            end = experience.termination
            return Skill(experience.activation, keep(experience.steps),
                         end if keep([end]) else "")
        if isinstance(experience, Lesson):
            return Lesson(experience.situation, keep(experience.failed) or ("the task failed",),
                          keep(experience.untried), keep(experience.worked))
        return Knowledge(experience.trigger, keep(experience.facts))

    def _extract(self, request: ExtractRequest) -> Extraction:
        episode = request.episode
        known = request.matched if isinstance(request.matched, Knowledge) else None
        if known is not None and known.trigger != self.scene.trigger(episode.env, self.max_chars):
            # Another project's knowledge matched by similarity: never merged into this one's.
            known = None
            request = ExtractRequest(episode, request.tree)
        if self.base is not None:
            done = self.base.extract(request)
            if request.tree is Tree.ENV and isinstance(done.experience, Knowledge):
                ours = self.knowledge(episode, known)
                facts = supersede(ours.facts, _clean_facts(done.experience.facts))
                done.experience = Knowledge(ours.trigger, facts[: self.max_facts])
            return done
        if request.tree is Tree.ENV:
            alone = self.knowledge(episode)
            return Extraction(self.knowledge(episode, known) if known else alone,
                              standalone=alone)
        if episode.success:
            return Extraction(self.skill(episode))
        matched = request.matched if isinstance(request.matched, Skill) else None
        return Extraction(self.lesson(episode, matched))

    def compile(self, tree: Tree, composed: Skill | Knowledge | Lesson) -> Extraction:
        if self.base is not None:
            return self.base.compile(tree, composed)
        return Extraction(composed, note="exact composition")

    def skill(self, episode: Episode) -> Skill:
        calls = episode_calls(episode)
        steps: list[str] = []
        for call in calls:
            line = _step_line(call)
            if line and (not steps or steps[-1] != line):
                steps.append(line)
        checks = [c for c in calls if c.kind == "run" and c.purpose in VERIFYING and not c.failed]
        if checks:
            said = summary(checks[-1].output, 80)
            done = f"`{command_text(checks[-1], 100)}`" + (f" -> {said}" if said else "")
        else:
            done = tail_cut(final_report(calls), 160)
        said = report_summary(final_report(calls), self.stale)
        # The symptom the task set out from: the first failure it met, in the tool's words (a
        # later prompt about the same problem is often worded like it).
        first = next((c for c in calls if c.status == "error" and c.kind == "run"
                      and c.purpose not in ("read", "check")), None)
        why = reason(first.output, 120) if first is not None else ""
        if first is not None and why:
            steps.insert(0, f'it failed first: `{command_text(first, 60)}` -> "{why}"')
        if said:
            steps.insert(0, f"what was done: {said}")
        if not teaches_skill(calls):  # a question answered: where the answer was found
            looked = [p for c in calls if c.kind in ("read", "search") and not c.failed
                      for p in c.paths]
            if looked:
                steps.append(f"read {', '.join(list(dict.fromkeys(looked))[:4])}")
        return Skill(activation=_one_line(episode.task, self.max_chars),
                     steps=tuple(dict.fromkeys(steps)), termination=done)

    def lesson(self, episode: Episode, matched: Skill | None = None) -> Lesson:
        calls = episode_calls(episode)
        failed: list[str] = []
        for call in calls:
            if call.status in ("interrupted", "rejected"):
                what = f"`{command_text(call, 100)}`" if call.command else (
                    f"{call.kind} {', '.join(call.paths)}".strip() if call.paths else call.tool)
                failed.append(f"the user {call.status} {what}")
            elif call.status == "error" and call.kind in ("run", "edit", "other"):
                why = reason(call.output, self.max_chars - 20) or tail_cut(call.output, 120)
                what = f"`{command_text(call, 80)}`" if call.command else call.tool
                failed.append(f'{what} -> "{why}"' if why else what)
        for call in calls:  # why the user stopped, redirected or disowned it, in their words
            failed += [f'the user said: "{tail_cut(u, self.max_chars - 20)}"' for u in call.user
                       if is_correction(u) or is_negative_feedback(u)]
        report = report_summary(final_report(calls), self.stale)
        if report:
            failed.append(f'reported: "{report}"')
        elif not failed:
            failed.append("the task did not succeed")
        worked = [line for c in calls if not c.failed and (line := _step_line(c))]
        played = {line for c in calls if (line := _step_line(c))}
        # Untried steps come only from a skill of the same project (its steps name its files).
        untried = [s for s in (matched.steps if matched else ()) if s not in played
                   and not names_project_files(s)]
        return Lesson(situation=_one_line(episode.task, self.max_chars),
                      failed=tuple(dict.fromkeys(failed))[:6],
                      untried=tuple(dict.fromkeys(untried)),
                      worked=tuple(dict.fromkeys(worked))[:8])

    def knowledge(self, episode: Episode, known: Knowledge | None = None) -> Knowledge:
        own = self.scene.facts(episode, self.max_chars)
        trigger = self.scene.trigger(episode.env, self.max_chars)
        if known is None:
            return Knowledge(trigger=trigger, facts=own[: self.max_facts])
        edited = {p for c in episode_calls(episode) if c.kind == "edit" for p in c.paths}
        names = {p.rsplit("/", 1)[-1] for p in edited} | edited
        kept = [f for f in (_fresh(f, names) if edited else f for f in known.facts) if f]
        by_subject = {fact_subject(f): f for f in kept}
        own = tuple(keep_canonical(by_subject[fact_subject(f)], f)
                    if fact_subject(f) in by_subject else f for f in own)
        # A fact about a subject seen for the first time stays plain (it is 1 of 1, and the
        # notes' budget is small); one about a known subject tallies with it.
        own = tuple((episode_tendencies([f], SESSIONS) or (f,))[0] if fact_subject(f) in by_subject
                    else f for f in own)
        merged = list(absorb(kept, own, CLAIMS, latest=True))
        if len(merged) > self.max_facts:
            seen = {fact_subject(f) for f in own}
            extra = len(merged) - self.max_facts
            old = [f for f in merged if fact_subject(f) not in seen][:extra]
            merged = [f for f in merged if f not in old]
        return Knowledge(trigger=trigger, facts=tuple(merged))


# Project facts are tendencies over sessions ("tests (pytest): `pytest -q` works (3 of 4
# sessions)", ``core.knowledge.absorb``): each subject keeps its latest claim with its support
# (a later run still supersedes, as before). One claim: the notes' budget is small, and with
# two a subject's fact crowded other facts out of it (the coding benchmark's dev probe q003).
SESSIONS = "sessions"
CLAIMS = 1


def _fresh(fact: str, edited: set[str]) -> str:
    """``fact`` without what an edit of ``edited`` made stale (:func:`_stale`): a tendency
    loses its stale claims (its count of sessions stays), a plain fact goes whole; "" when
    nothing is left."""
    counted = tendency(fact)
    if counted is None:
        return "" if _stale(fact, edited) else fact
    claims = tuple((claim, k) for claim, k in counted.claims
                   if not _stale(f"{counted.subject}: {claim}", edited))
    return replace(counted, claims=claims).text() if claims else ""


def _stale(fact: str, edited: set[str]) -> bool:
    """Whether an edit of the files ``edited`` makes a known fact stale: a failure of a test,
    type, lint or build run (the code it judged has changed), or a failure that names one of
    the edited files. A deploy gate's reason stays: editing code does not lift a policy."""
    if " fails" not in fact:
        return False
    if fact.startswith(("tests (", "type checks (", "lint (", "build (")):
        return True
    return any(name and name in fact for name in edited)


MIN_STALE = 8
_MARKDOWN = re.compile(r"\*\*|`|^\s*#+\s*|^\s*>\s*|^\s*[-*•]\s+", re.M)


def report_summary(report: str, stale: Sequence[str] = (), limit: int = 220) -> str:
    """The first sentences of an assistant's final report (its verdict and what it did), up to
    ``limit`` characters, markdown removed, without a sentence quoting a ``stale`` line. The
    first sentence that does not fit whole is cut at a word where at least a quarter of
    ``limit`` is left for it: a verdict is often short ("Fixed.") and the cause follows it."""
    paragraph = next((p for p in re.split(r"\n\s*\n", report.strip()) if p.strip()), "")
    text = flat(_MARKDOWN.sub("", paragraph))
    out = ""
    for sentence in _SENTENCES.split(text):
        if any(s in sentence for s in stale):
            continue
        candidate = f"{out} {sentence}".strip()
        if len(candidate) > limit:
            room = limit - len(out) - 1
            if room >= limit // 4:
                out = f"{out} {_word_cut(sentence, room)}".strip()
            break
        out = candidate
    return out


def _word_cut(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters at the last word that fits, with an ellipsis."""
    cut = text[: limit - 1]
    if " " in cut[limit // 2:]:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,;:") + "…"


def _step_line(call: ToolCall) -> str:
    """A skill step as a colleague writes it: ``edit src/a.py``, ``run `pytest -q` -> 5 passed``
    (reads, searches, notes, failed attempts and checks that found nothing are no steps)."""
    if call.failed:
        return ""
    if call.kind == "edit" and call.paths and not call.command:
        return f"edit {', '.join(call.paths)}"
    if call.kind == "edit" and call.command:  # a shell command that changes files: as typed
        return f"run `{command_text(call, 120)}`"
    if call.kind == "run" and call.purpose not in ("read", "check"):
        said = summary(call.output, 60) if call.purpose in VERIFYING else ""
        return f"run `{command_text(call, 120)}`" + (f" -> {said}" if said else "")
    return ""


def _one_line(text: str, limit: int) -> str:
    text = flat(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


_NOISE_FACT = re.compile(r"(^\s*\d+[→\t]|has been updated|cat -n|Todos have been modified|"
                         r"^Found \d+ files?|^No (files|matches) found)", re.I | re.M)


def _clean_facts(facts: Sequence[str]) -> list[str]:
    """A model's facts without what is never knowledge (file dumps, edit and todo notes)."""
    return [f for f in facts if not _NOISE_FACT.search(f)]
