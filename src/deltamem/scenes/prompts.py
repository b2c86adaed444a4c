"""What a user's prompt in a coding session is, by its form (:func:`prompt_kind`): a new task, a
continuation of the task under way, negative feedback on its last result, a stated convention,
or a question or request about the work. The rules read sentence form (openers, questions,
deixis pointing back, negation of a deed, a habitual ``we``), never phrases seen in a session.
"""

from __future__ import annotations

import re

from deltamem.scenes.tool_calls import flat

PROMPT_KINDS = ("new-task", "continuation", "negative-feedback", "convention",
                "question-or-request")
# Discourse openers that carry no content: answers, acknowledgements, hesitations.
_ANSWER = (r"(?:yes|yeah|yep|yup|y|sure|ok(?:ay)?|k|alright|all right|fine|please|pls|go ahead|"
           r"lgtm|sounds good|looks good|👍|✅)")
_ACK = (r"(?:thanks?|thank you|thx|great|perfect|cool|nice|good|right|excellent|awesome|got it|"
        r"that'?s (?:fine|good|great|ok|okay|perfect|right)|that works)")
_HESITATE = (r"(?:wait|hold on|hang on|stop|hmm+|hm+|ugh|actually|nope|so|well|oh|ah|"
             r"no+(?=\s*[,.!:;-]|\s+(?:wait|no|stop|hold|actually)\b)|"
             r"before you (?:continue|go on|proceed))")
_OPENER = re.compile(r"^(?:(?:" + _ANSWER + "|" + _ACK + "|" + _HESITATE + r")\b[\s,.!:;-]*)+",
                     re.I)
_INTERROGATIVE = re.compile(
    r"^(?:what|what's|whats|why|how|where|which|who|whose|when|is|are|was|were|does|do|did|"
    r"can|could|would|will|should|shall|has|have|had|isn't|aren't|doesn't|don't|didn't|won't|"
    r"wouldn't|shouldn't|am)\b", re.I)
_REQUEST_FRAME = re.compile(r"^(?:can|could|would|will)\s+you\s+(?:please\s+)?(?P<verb>\w+)",
                            re.I)
# Verbs that ask the agent to say something, not to change anything.
_TELL = re.compile(r"^(?:please\s+)?(?:first\s+)?(?P<verb>show|explain|tell|print|paste|"
                   r"summari[sz]e|walk|describe|clarify|list|remind)\b", re.I)
_TELL_VERBS = re.compile(r"(?i)^(?:show|explain|tell|print|paste|summari[sz]e|walk|describe|"
                         r"clarify|list|remind)$")
# A pointer back at the work under way: deixis and the agent as the actor.
_BACK = re.compile(r"\b(?:it|its|it's|that|that's|this|these|those|them|you|you're|your|so far|"
                   r"left|same|again|the (?:diff|change|changes|plan|patch|output|error|fix|"
                   r"result|file|test output|first|second|other|last))\b", re.I)
# Negative feedback: the last result is judged bad (persistence, failed accomplishment,
# evaluation, damage, a demand to take it back).
_PERSIST = re.compile(r"\bstill\b|\banymore\b|\bno longer\b", re.I)
_FAILED_DEED = re.compile(
    r"\b(?:did(?:n'?t| not)|does(?:n'?t| not)|is(?:n'?t| not)|was(?:n'?t| not)|are(?:n'?t| not)|"
    r"won'?t|can'?t|cannot|nothing)\s+(?:actually\s+|even\s+|really\s+)?(?:work|fix|help|solve|"
    r"change|compile|build|pass|start|load|render|close|open|show|happen|do)\w*|\bnot working\b|"
    r"\bnot fixed\b|\bnot what i\b", re.I)
_VERDICT = re.compile(
    r"\b(?:that|this|it|which|you)(?:'?s| is| are|'re| was)\s+(?:not\s+|still\s+|now\s+)?"
    r"(?:wrong|incorrect|broken|not right|not it|worse|off)\b|^(?:wrong|incorrect|broken)\b|"
    r"\bmade (?:it|things|this|that) worse\b|\b(?:you|that|this|it) (?:broke|broken|messed up)\b",
    re.I)
_TAKE_BACK = re.compile(r"^(?:please\s+)?(?:revert|undo|roll ?back)\b|[,;]\s*(?:revert|undo|"
                        r"roll ?back) (?:it|that|this)\b", re.I)
_NOW_BAD = re.compile(r"(?:\bnow\b.*\b(?:fail\w*|broken|crash\w*|errors?|red|off|blank|empty|"
                      r"\d{3})\b|\b(?:fail\w*|broken|crash\w*|errors?|red|off|blank|empty|\d{3})"
                      r"\b.*\bnow\b)", re.I)
# Conventions: a standing rule, stated (we/our/this repo + a habitual verb; never/always;
# a prohibition; a preference of one thing over another; an obligation).
_WE = re.compile(r"\b(?:we|our team|our \w+|this (?:repo|project|codebase|team))\s+(?:always\s+|"
                 r"never\s+|only\s+|usually\s+|also\s+|don'?t\s+|do not\s+|do\s+)?(?:use|prefer|"
                 r"keep|stick|wrap|add|follow|write|put|map|pin|store|avoid|name|format|commit|"
                 r"run|deploy|start|go|live|test|build|install|sort|squash|rebase|merge|ship)\w*\b",
                 re.I)
_RULE_ADVERB = re.compile(r"(?:^|[,;.]\s*)(?:please\s+)?(?:never|always|don'?t\s+ever|do not ever)"
                          r"\b", re.I)
_PROHIBIT = re.compile(r"(?:^|[,;.]\s*)(?:please\s+)?(?:don'?t|do not|no)\s+(?!wait\b|no\b|that\b|"
                       r"it\b|this\b|i\b|one\b|problem)\w+", re.I)
_PREFER = re.compile(r"^(?:please\s+)?(?:use|prefer|go with|stick (?:to|with)|keep using)\b|"
                     r",\s*not\s+\S", re.I)
_OBLIGE = re.compile(r"\b(?:must|should|shall)\s+(?:always\s+|never\s+)?(?:be|go|use|have|"
                     r"follow|start|run|stay)\b", re.I)
# Continuation: what is left after the openers names no new work.
_FLOW = re.compile(
    r"^(?:please\s+)?(?:(?:(?:go|carry|keep)\s+(?:ahead|on|going|for it)|proceed|continue)\b.*|"
    r"(?:do (?:it|that|this|so|the same|both)|try (?:it\s+)?again|retry|again|ship it|"
    r"(?:commit|push|merge|apply|finish|wrap|land|deploy|release|run|rerun|re-run|open|"
    r"create|make|submit|send)\b(?:\s+(?:it|that|this|them|those|these|up|the (?:pr|patch|"
    r"change|changes|fix|plan|tests?|suite|whole suite|full suite|branch|build|mr)|a pr|pr|"
    r"(?:and|&)\s+\w+|again|too|as well|now)\b)*)(?:\s+(?:for|in|on|to) (?:the )?(?:other|"
    r"rest|remaining|same)\b.*)?)[\s.!,]*$", re.I)
_CHOICE = re.compile(r"^(?:the\s+)?(?:option\s+\w+|(?:first|second|third|last|other|former|"
                     r"latter)(?:\s+(?:one|option|approach|way))?|both(?: of (?:them|those))?|"
                     r"\d|[a-c])\b", re.I)
_ACKNOWLEDGED = re.compile(r"^(?:" + _ANSWER + "|" + _ACK + r")\b", re.I)
_ANSWERED = re.compile(r"^(?:" + _ANSWER + r")\b", re.I)


def prompt_kind(text: str, *, asked: bool = False) -> str:
    """What a user's prompt in a coding session is (one of :data:`PROMPT_KINDS`), by its form:

    * ``negative-feedback`` -- a statement that the last result is bad: the problem persists
      (``still``, ``anymore``), a deed failed (``didn't work``, ``doesn't compile``), a verdict
      on it (``that's wrong``, ``you broke``, ``made it worse``), a demand to take it back
      (``revert``/``undo`` first), or a failure that holds ``now``;
    * ``question-or-request`` -- a question, or a request to say something (show, explain,
      print ...), about the work under way (it points back, or the agent is its actor, or it is
      short); a question about something new is a new task;
    * ``convention`` -- a standing rule stated: ``we``/``our``/``this repo`` with a habitual
      verb, ``never``/``always``, a prohibition (``don't X``, ``no X in Y``), a preference
      (``use X``, ``X instead of Y``, ``X, not Y``), an obligation (``X must be Y``);
    * ``continuation`` -- nothing new is asked: only answers and acknowledgements, a workflow
      step on the work under way (go ahead, commit that, run the tests again, open the PR), a
      choice (option 2, the second one), a short answer, or -- when the agent's last reply
      asked a question (``asked``) -- a short reply that points back;
    * ``new-task`` -- everything else.
    """
    raw = flat(text)
    opener = _OPENER.match(raw)
    rest = raw[opener.end():].strip() if opener else raw
    lead = opener.group(0) if opener else ""
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", rest) if s.strip()]
    questions = [s for s in sentences if s.rstrip().endswith("?")]
    statement = " ".join(s for s in sentences if not s.rstrip().endswith("?"))
    words = re.findall(r"[\w'/.+-]+", rest)
    if not rest or not words:
        return "continuation"
    if statement and (_PERSIST.search(statement) or _FAILED_DEED.search(statement)
                      or _VERDICT.search(raw) or _TAKE_BACK.search(rest)
                      or _NOW_BAD.search(statement)):
        return "negative-feedback"
    if questions and not statement.strip():
        question = rest
        frame = _REQUEST_FRAME.match(question)
        if frame and not _TELL_VERBS.match(frame.group("verb")):
            return "new-task"  # "can you set up pre-commit?": a request to act
        if _BACK.search(question) or len(words) <= 8 or lead:
            return "question-or-request"
        return "new-task"
    if _TELL.match(rest):
        return "question-or-request"
    if _WE.search(rest) or _RULE_ADVERB.search(rest) or _PROHIBIT.search(rest) \
            or _PREFER.search(rest) or _OBLIGE.search(rest):
        return "convention"
    step = re.sub(r"(?i)^(?:now|then|next|and)\s+", "", rest)
    if _FLOW.match(step) or _CHOICE.match(step):
        return "continuation"
    if _ANSWERED.match(lead.strip()) and len(words) <= 8 and not re.match(
            r"(?i)^(?:now|next|also)\b", rest):
        return "continuation"
    if asked and len(words) <= 12 and _BACK.search(rest):
        return "continuation"
    return "new-task"


def is_correction(text: str) -> bool:
    """Whether a user message states a convention the agent should keep ("we use pnpm here",
    "never push to main", "use X instead of Y"); a question or a request is none."""
    return prompt_kind(text) == "convention"


def is_negative_feedback(text: str) -> bool:
    """Whether a user message says the last result did not work (:func:`prompt_kind`)."""
    return prompt_kind(text) == "negative-feedback"
