"""What a user's prompt in a coding session is, by its form (:func:`prompt_kind`): a new task, a
continuation of the task under way, negative feedback on its last result, a stated convention,
or a question or request about the work. The rules read sentence form (openers, questions,
deixis pointing back, negation of a deed, a habitual ``we``), never phrases seen in a session.
"""

from __future__ import annotations

import re

from deltamem._util.lazyre import lazy
from deltamem.scenes.tool_calls import flat

PROMPT_KINDS = ("new-task", "continuation", "negative-feedback", "convention",
                "question-or-request")
# A negative answer and nothing else: the last result is rejected.
_BARE_NO = lazy(r"^(?:no+|nope|nah|wrong)[\s.!]*$", re.I)
# Discourse openers that carry no content: answers, acknowledgements, hesitations.
_ANSWER = (r"(?:yes|yeah|yep|yup|ya|yea|y|sure|ok(?:ay)?|k|alright|all right|fine|please|pls|"
           r"go ahead|lgtm|sounds good|looks good|👍|✅)")
_ACK = (r"(?:thanks?|thank you|thx|great|perfect|cool|nice|good|right|excellent|awesome|got it|"
        r"interesting|i see|makes sense|"
        r"(?:looks|seems|sounds) (?:fine|right|ok|okay|great|correct)|"
        r"(?:that'?s|that is|it'?s|its|is) (?:fine|good|great|ok|okay|perfect|right)|that works)")
_HESITATE = (r"(?:wait|hold on|hang on|stop|hmm+|hm+|ugh|actually|nope|so|well|oh|ah|"
             r"no+(?=\s*[,.!:;-]|\s+(?:wait|no|stop|hold|actually)\b)|"
             r"before you (?:continue|go on|proceed))")
_OPENER = lazy(r"^(?:(?:" + _ANSWER + "|" + _ACK + "|" + _HESITATE + r")\b[\s,.!:;-]*)+",
               re.I)
_INTERROGATIVE = lazy(
    r"^(?:what|what's|whats|why|how|where|which|who|whose|when|is|are|was|were|does|do|did|"
    r"can|could|would|will|should|shall|has|have|had|isn't|aren't|doesn't|don't|didn't|won't|"
    r"wouldn't|shouldn't|am)\b", re.I)
_WH = lazy(r"^(?:what|what's|whats|why|how(?! about)|where|which|who)\b", re.I)
_REQUEST_FRAME = lazy(r"(?:^|[,;:]\s*|\s-+\s*)(?:can|could|would|will)\s+(?:you|u)\s+"
                      r"(?:please\s+|pls\s+)?(?P<verb>\w+)", re.I)
# Verbs that ask the agent to say something, not to change anything.
_TELL = lazy(r"^(?:please\s+)?(?:first\s+)?(?P<verb>show|explain|tell|print|paste|"
             r"summari[sz]e|walk|describe|clarify|list|remind)\b", re.I)
_TELL_VERBS = lazy(r"(?i)^(?:show|explain|tell|print|paste|summari[sz]e|walk|describe|"
                   r"clarify|list|remind)$")
# A pointer back at the work under way: deixis and the agent as the actor.
_BACK = lazy(r"\b(?:it|its|it's|that|that's|this|these|those|them|you|you're|your|so far|"
             r"left|same|again|the (?:diff|change|changes|plan|patch|output|error|fix|"
             r"result|file|test output|first|second|other|last))\b", re.I)
# Negative feedback: the last result is judged bad (persistence, failed accomplishment,
# evaluation, damage, a demand to take it back).
_PERSIST = lazy(r"\bstill\b|\banymore\b|\bno longer\b|\b(?:like|as) before\b|\bsame (?:\w+ )?"
                r"(?:error|traceback|exception|problem|issue|failure|message|stack ?trace|"
                r"result|output|crash|warning|behaviou?r)s?\b", re.I)
# What goes wrong, where a sentence reports it: the closed class of failure words.
_FAILURE = lazy(r"\b(?:fail\w*|errors?|error(?:ed|ing)|crash\w*|broken|breaks?|panic\w*|"
                r"hang(?:s|ing)?|leak\w*|exits?|exited|blank|empty|red|flaky|slow|wrong|"
                r"missing|bug\w*|[45]\d\d|code [1-9]\d*)\b", re.I)
# The agent's last deed, named: "your change", "the migration you generated", "this introduced".
_YOUR_DEED = lazy(r"\b(?:after|since|with|from) (?:your|the) (?:\w+ )?(?:change|fix|patch|"
                  r"commit|edit|update|refactor|rewrite|migration)s?\b|\byou (?:generated|"
                  r"wrote|added|changed|made|created|did)\b", re.I)
_CAUSED = lazy(r"\b(?:this|that|it|you|(?:your|this|that) \w+(?: \w+)?)\s+"
               r"(?:has\s+|have\s+|just\s+)?(?:introduced|caused|reintroduced|"
               r"brought back)\b", re.I)
_WORSE_THAN_BEFORE = lazy(r"\b(?:slower|worse|bigger|larger|heavier|longer|flakier)\b"
                          r"(?: \w+)? than (?:before|it was|yesterday|the original|"
                          r"on main)\b", re.I)
_FAILED_DEED = lazy(
    r"\b(?:did(?:n'?t| not)|does(?:n'?t| not)|is(?:n'?t| not)|was(?:n'?t| not)|are(?:n'?t| not)|"
    r"won'?t|can'?t|cannot|nothing)\s+(?:actually\s+|even\s+|really\s+)?(?:work|fix|help|solve|"
    r"change|compile|build|pass|start|load|render|close|open|show|happen|do)\w*|\bnot working\b|"
    r"\bnot fixed\b|\bnot what i\b", re.I)
_VERDICT = lazy(
    r"\b(?:that|this|it|which|you)(?:'?s| is| are|'re| was)\s+(?:not\s+|still\s+|now\s+)?"
    r"(?:wrong|incorrect|broken|not right|not it|worse|off)\b|^(?:wrong|incorrect|broken)\b|"
    r"\bmade (?:it|things|this|that) worse\b|\b(?:you|that|this|it) (?:broke|broken|messed up)\b",
    re.I)
_TAKE_BACK = lazy(r"^(?:please\s+)?(?:revert|undo|roll ?back)\b|[,;.!?]\s*(?:please\s+)?"
                  r"(?:revert|undo|roll ?back) (?:it|that|this|everything)\b", re.I)
_NOW_BAD = lazy(r"(?:\bnow\b.*\b(?:fail\w*|broken|crash\w*|errors?|red|off|blank|empty|"
                r"\d{3})\b|\b(?:fail\w*|broken|crash\w*|errors?|red|off|blank|empty|\d{3})"
                r"\b.*\bnow\b)", re.I)
# Conventions: a standing rule, stated (we/our/this repo + a habitual verb; never/always;
# a prohibition; a preference of one thing over another; an obligation).
_WE = lazy(r"\b(?:we|our team|our \w+|this (?:repo|project|codebase|team))\s+(?:always\s+|"
           r"never\s+|only\s+|usually\s+|also\s+|don'?t\s+|do not\s+|do\s+)?(?:use|prefer|"
           r"keep|stick|wrap|add|follow|write|put|map|pin|store|avoid|name|format|commit|"
           r"run|deploy|start|go|live|test|build|install|sort|squash|rebase|merge|ship)\w*\b|"
           r"\bwe (?:don'?t|do not|never|always|only|usually|normally|generally)\s+\w+", re.I)
# A generic statement framed by the team's own place ("in this codebase X go in Y", "X are Y in
# our warehouse"): a present-tense habitual verb, no failure reported.
_OUR_PLACE = lazy(r"\b(?:in|across|for) (?:this|our) (?:\w+ )?(?:repo|repository|project|"
                  r"codebase|team|org|company|monorepo|app|service|warehouse|stack|code|"
                  r"setup)\b", re.I)
_HABITUAL = lazy(r"\b(?:are|is|go|goes|live|lives|follow|follows|use|uses|get|gets|have|has|"
                 r"respond|belong|belongs)\b", re.I)
# A rule by its modality: what is allowed, forbidden or required.
_DEONTIC = lazy(r"\b(?:is|are|isn'?t|aren'?t)\s+(?:not\s+)?(?:allowed|permitted|forbidden|"
                r"banned|required|mandatory|discouraged)\b|\bnot allowed\b", re.I)
# ("never mind" is the idiom that dismisses what was said, not a rule's "never".)
_RULE_ADVERB = lazy(r"(?:^|[,;.]\s*)(?:please\s+)?(?:never(?!\s+mind\b)|always|"
                    r"don'?t\s+ever|do not ever|from now on|going forward|"
                    r"in (?:the )?future|every time|each time)\b",
                    re.I)
_PROHIBIT = lazy(r"(?:^|[,;.]\s*)(?:please\s+)?(?:don'?t|do not|no)\s+(?!wait\b|no\b|that\b|"
                 r"it\b|this\b|i\b|one\b|problem)\w+", re.I)
_PREFER = lazy(r"^(?:please\s+)?(?:use|prefer|stick (?:to|with)|keep using)\b|"
               r",\s*not\s+\S(?![^(]*\))", re.I)
# (Not of a thing pointed at: "it should be a 400" specifies the task at hand.)
_OBLIGE = lazy(r"(?<!\bit )(?<!\bthis )(?<!\bthat )\b(?:must|should|shall)\s+"
               r"(?:always\s+|never\s+)?(?:be|go|use|have|follow|start|run|stay)\b", re.I)
# Continuation: what is left after the openers names no new work.
_FLOW = lazy(
    r"^(?:please\s+)?(?:(?:(?:go|carry|keep)\s+(?:ahead|on|going|for it)|proceed|continue)\b.*|"
    r"(?:do (?:it|that|this|so|the same|both|the rest|the others)|try (?:it\s+)?again|retry|"
    r"again|ship it|"
    r"(?:commit|push|merge|apply|finish|wrap|land|deploy|release|run|rerun|re-run|open|"
    r"create|make|submit|send)\b(?:\s+(?:it|that|this|them|those|these|up|the (?:pr|patch|"
    r"change|changes|fix|plan|tests?|suite|test suite|whole suite|full suite|branch|build|mr)|"
    r"a pr|pr|(?:and|&)\s+\w+|again|too|as well|now|please|pls)\b)*)"
    r"(?:\s+(?:for|in|on|to) (?:the )?(?:other|rest|remaining|same)\b.*)?)[\s.!,]*$", re.I)
_CHOICE = lazy(r"^(?:(?:let'?s\s+)?go with\b|(?:the\s+)?(?:option\s+\w+|(?:first|second|"
               r"third|last|other|former|latter)(?:\s+(?:one|option|approach|way))?|"
               r"both(?: of (?:them|those))?|\d|[a-c])\b)", re.I)
# Several clauses that carry the work on: "do it, and open the PR when you're done".
_CLAUSE = lazy(r"[.!?;]+\s+|,\s*(?:and\s+)?|\s+-+\s+|\s+and\s+(?=\w+\s)", re.I)
_DONE_WHEN = lazy(r"\s+(?:when|once|after|if) (?:you'?re|you are|it'?s|it is|that'?s|"
                  r"everything is|they are|they're) (?:done|finished|green|ready|"
                  r"passing)\b.*$", re.I)
_LEAVE = lazy(r"^(?:you can|you may|feel free to)\s+(?:now\s+)?(?:continue|proceed|go ahead|"
              r"go on|carry on|keep going|do it|start)\b", re.I)
# A deed on what points back and nothing else: "implement it", "fix that too".
_DEICTIC_DEED = lazy(r"^(?:please\s+|pls\s+)?[a-z]+\s+(?:it|that|this|them|those|these|"
                     r"the rest)(?:\s+(?:too|as well|now|then|please|pls|up))*$", re.I)
_SHORT_REMARK = lazy(r"^(?:that|this|it|i)\b", re.I)
# A first-person remark on what the user knows or thinks, beside a question: not a request.
_REMARK = lazy(r"^(?:i|i'm|i've)\s+(?:didn'?t\s+|don'?t\s+|did not\s+|do not\s+|was\s+|"
               r"am\s+)?(?:know|see|get|understand|think|guess|wonder\w*|thought|curious|"
               r"surprised)\b", re.I)
_ACKNOWLEDGED = lazy(r"^(?:" + _ANSWER + "|" + _ACK + r")\b", re.I)
_ANSWERED = lazy(r"^(?:" + _ANSWER + r")\b", re.I)


# The most words of a reply that answers the agent's question without pointing back.
ANSWER_WORDS = 3


def prompt_kind(text: str, *, asked: bool = False) -> str:
    """What a user's prompt in a coding session is (one of :data:`PROMPT_KINDS`), by its form:

    * ``negative-feedback`` -- a bare ``no``, or a statement that the last result is bad: the
      problem persists (``still``, ``anymore``, the same error, as before), a deed failed
      (``didn't work``, ``doesn't compile``), a verdict on it (``that's wrong``, ``you broke``,
      ``made it worse``), a demand to take it back (``revert``/``undo``), a failure that holds
      ``now``, one the agent's deed caused (``this introduced``, a failure since ``your
      change``), a result worse than before; or a question whose failure persists;
    * ``question-or-request`` -- a question (a question mark, or its form without one: a
      request frame, a wh-word), or a request to say something (show, explain, print ...),
      about the work under way (it points back, or the agent is its actor, or it is short); a
      question about something new, or a request frame asking to act, is a new task;
    * ``convention`` -- a standing rule stated: ``we``/``our``/``this repo`` with a habitual
      verb, ``never``/``always``/``from now on``/``every time``, a prohibition (``don't X``,
      ``no X in Y``), a preference (``use X``, ``X instead of Y``, ``X, not Y`` outside an
      aside), an obligation (``X must be Y``, not of a thing pointed at), a modality
      (``allowed``, ``forbidden``), or a generic statement framed by the team's own place
      (``in this codebase X go in Y``) that reports no failure;
    * ``continuation`` -- nothing new is asked: only answers and acknowledgements, a workflow
      step on the work under way (go ahead, commit that, run the tests again, open the PR), a
      choice (option 2, go with the second), a deed on what points back (``implement it``),
      clauses each of which carries the work on or only acknowledges it (``do it, and open
      the PR when you're done``), a short answer, or -- when the agent's last reply asked a
      question (``asked``) -- a short reply that points back, or one of a few words
      (:data:`ANSWER_WORDS`) that asks nothing;
    * ``new-task`` -- everything else.
    """
    raw = flat(text)
    opener = _OPENER.match(raw)
    rest = raw[opener.end():].strip() if opener else raw
    lead = opener.group(0) if opener else ""
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", rest) if s.strip()]
    questions = [s for s in sentences if _asks(s)]
    stated = [s for s in sentences if s not in questions]
    statement = " ".join(stated)
    words = re.findall(r"[\w'/.+-]+", rest)
    if _BARE_NO.match(raw):
        return "negative-feedback"
    if not rest or not words:
        return "continuation"
    if _judged_bad(raw, rest, statement, questions):
        return "negative-feedback"
    frame = _REQUEST_FRAME.search(rest)
    told = [s for s in stated if not _REMARK.match(s)]
    if questions and not told:
        if frame and not _TELL_VERBS.match(frame.group("verb")):
            return "new-task"  # "can you set up pre-commit?": a request to act
        if frame or _BACK.search(rest) or len(words) <= 8 or lead:
            return "question-or-request"
        return "new-task"
    if frame and not _TELL_VERBS.match(frame.group("verb")):
        return "new-task"  # "the app is slow to start, can you find out why?"
    if _TELL.match(rest):
        return "question-or-request"
    if _states_rule(rest):
        return "convention"
    return "continuation" if _carries_on(rest, lead, len(words), asked) else "new-task"


def _judged_bad(raw: str, rest: str, statement: str, questions: list[str]) -> bool:
    """Whether the prompt says the last result is bad: a statement that the problem persists, a
    deed failed, a verdict, a demand to take it back, a failure that holds now, one the agent's
    deed caused, a result worse than before; or a question whose failure persists ("why is the
    dashboard still empty?")."""
    if statement and (_PERSIST.search(statement) or _FAILED_DEED.search(statement)
                      or _VERDICT.search(raw) or _TAKE_BACK.search(rest)
                      or _NOW_BAD.search(statement) or _CAUSED.search(statement)
                      or _WORSE_THAN_BEFORE.search(statement)
                      or (_YOUR_DEED.search(statement) and _FAILURE.search(statement))):
        return True
    return any((_PERSIST.search(q) or _FAILED_DEED.search(q)) and _FAILURE.search(q)
               for q in questions)


def _states_rule(rest: str) -> bool:
    """Whether the prompt states a standing rule (see :func:`prompt_kind`)."""
    return bool(_WE.search(rest) or _RULE_ADVERB.search(rest) or _PROHIBIT.search(rest)
                or _PREFER.search(rest) or _OBLIGE.search(rest) or _DEONTIC.search(rest)
                or (_OUR_PLACE.search(rest) and _HABITUAL.search(rest)
                    and not _FAILURE.search(rest)))


def _carries_on(rest: str, lead: str, words: int, asked: bool) -> bool:
    """Whether what follows the openers (``rest``, of ``words`` words) names no new work: a
    workflow step, a choice, clauses that carry the work on (:func:`_goes_on`), a short answer,
    or a short reply pointing back at a question the agent asked."""
    step = re.sub(r"(?i)^(?:now|then|next|and)\s+", "", rest)
    if _FLOW.match(step) or _CHOICE.match(step) or _goes_on(rest):
        return True
    if _ANSWERED.match(lead.strip()) and words <= 8 and not re.match(
            r"(?i)^(?:now|next|also)\b", rest):
        return True
    # After the agent asked, a reply of a few words that asks nothing is its answer ("per IP").
    return asked and ((words <= 12 and bool(_BACK.search(rest)))
                      or (words <= ANSWER_WORDS and not rest.rstrip().endswith("?")))


def asks(text: str) -> bool:
    """Whether any sentence of ``text`` is a question (:func:`_asks`)."""
    return any(_asks(s) for s in re.split(r"(?<=[.!?])\s+", flat(text)) if s.strip())


def _asks(sentence: str) -> bool:
    """Whether a sentence is a question: a question mark, or the form of one without it (a
    request frame, "can you paste the query"; a wh-word, "whats the difference ...")."""
    return sentence.rstrip().endswith("?") or bool(
        _REQUEST_FRAME.match(sentence) or _WH.match(sentence))


def _goes_on(rest: str) -> bool:
    """Whether every clause of ``rest`` carries the work under way on (a workflow step, a deed on
    what points back, a choice, leave to go on) or says nothing new (an acknowledgement, a short
    remark about it), one clause at least doing the former."""
    steps = 0
    for clause in _CLAUSE.split(rest):
        clause = _DONE_WHEN.sub("", clause.strip(" ,.!")).strip()
        if not clause:
            continue
        step = re.sub(r"(?i)^(?:now|then|next|and|so)\s+", "", clause)
        if _FLOW.match(step) or _CHOICE.match(step) or _LEAVE.match(step) \
                or _DEICTIC_DEED.match(step):
            steps += 1
        elif not (_OPENER.fullmatch(clause) or (
                _SHORT_REMARK.match(clause) and len(clause.split()) <= 6
                and not _FAILURE.search(clause))):
            return False
    return steps > 0


def is_correction(text: str) -> bool:
    """Whether a user message states a convention the agent should keep ("we use pnpm here",
    "never push to main", "use X instead of Y"); a question or a request is none."""
    return prompt_kind(text) == "convention"


def is_negative_feedback(text: str) -> bool:
    """Whether a user message says the last result did not work (:func:`prompt_kind`)."""
    return prompt_kind(text) == "negative-feedback"
