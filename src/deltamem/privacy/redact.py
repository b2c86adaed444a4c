"""Secret redaction: what of an agent's transcript may be stored, logged, exported or sent on.

Agent transcripts carry secrets (``cat .env``, ``env``, a kubeconfig, a DSN in a stack trace).
:func:`redact` replaces each one by a marker ``[REDACTED:<kind>]`` and drops
``<private>...</private>`` spans entirely. The facade (:class:`deltamem.DeltaMem`) applies it to
every episode, root and import before anything is stored or shown to a model, so every face and
integration is covered; error messages leaving the process go through :func:`redact` too
(:class:`deltamem.errors.DeltaMemError` renders redacted).

What is redacted, in this order:

1. ``<private>...</private>`` spans (case-insensitive; an unclosed one runs to the end);
2. private key blocks (``-----BEGIN ... PRIVATE KEY-----`` to its ``END`` line, also
   JSON-escaped and cut-off ones; PGP private key blocks);
3. the secrets configured in this process (:func:`register_secret`: the LLM API key, a store
   URL's password), and every long alphanumeric piece of them, so an escaped echo
   (``sk\\u002d...``) leaks nothing either;
4. provider key formats (AWS, GCP, Azure, GitHub, GitLab, Slack, Stripe, OpenAI, Anthropic,
   Hugging Face, npm, PyPI, Twilio, SendGrid, Mailgun, Mailchimp, Shopify, DigitalOcean,
   Databricks, Telegram, age, ...), JWTs, ``Bearer``/``Basic``/``Token`` credentials;
5. passwords in URLs (``postgres://user:PASS@host``), a key standing alone as a URL's user
   (a Sentry DSN, ``https://KEY@o1.ingest.sentry.io/1``) and secret query parameters
   (``?api_key=``, ``&sig=``);
6. assignments of secret-named keys: ``DB_PASSWORD=...``, ``export API_KEY=...``,
   ``"apiKey": "..."``, ``client-key-data: ...``, ``X-Api-Key: ...``, ``--password ...``;
7. what the detector plugins of the ``detect-secrets`` library find in a line (formats not in
   4.);
8. high-entropy tokens: 20 to 256 characters of ``[A-Za-z0-9+/_-]`` that look random (Shannon
   entropy, how often the character class changes, two or more classes), are not hexadecimal
   (git SHAs, digests and UUIDs are identifiers, not secrets), are not an integrity digest
   (``sha512-...``) and do not decode from base64 to readable text (a fixture, not a key; one
   that decodes to a private key is redacted).

What is kept: ordinary code and prose, paths, git SHAs, UUIDs, hashes, version strings,
CamelCase identifiers, base64 that encodes text, references to a secret rather than its value
(``$DB_PASSWORD``, ``${TOKEN}``, ``os.environ["API_KEY"]``, ``process.env.KEY``), type
annotations (``api_key: str``) and placeholders (``<your-key>``, ``***``, ``changeme``).
:func:`redact` is idempotent.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any, TypeVar

from deltamem.core.model import Episode, Experience, experience_from_dict, experience_to_dict
from deltamem.errors import register_redactor

PREFIX = "[REDACTED:"
T = TypeVar("T")


def marker(kind: str) -> str:
    """The text a secret of ``kind`` is replaced with."""
    return f"{PREFIX}{kind}]"


# -- 1, 2: spans ---------------------------------------------------------------------------------
_PRIVATE = re.compile(r"<private>.*?(?:</private>|\Z)", re.IGNORECASE | re.DOTALL)
_PRIVATE_CLOSE = re.compile(r"</private>", re.IGNORECASE)
_KEY_BLOCK = re.compile(
    r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----.*?"
    r"(?:-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|\Z)", re.DOTALL)

# -- 4: provider formats, (kind, pattern); group "s" (when present) is what is replaced ----------
_B = r"(?<![A-Za-z0-9_\-])"  # a token boundary on the left ...
_E = r"(?![A-Za-z0-9_\-])"   # ... and on the right
_FORMATS: tuple[tuple[str, str], ...] = (
    ("anthropic-key", _B + r"sk-ant-[A-Za-z0-9_\-]{20,}"),
    ("openai-key", _B + r"sk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_\-]{20,}"),
    ("stripe-key", _B + r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}" + _E),
    ("stripe-webhook-secret", _B + r"whsec_[A-Za-z0-9+/=]{20,}"),
    ("aws-access-key", r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA)"
                       r"[A-Z0-9]{16}(?![A-Z0-9])"),
    ("gcp-api-key", _B + r"AIza[0-9A-Za-z_\-]{35}" + _E),
    ("gcp-oauth-token", _B + r"ya29\.[0-9A-Za-z_\-]{20,}"),
    ("gcp-client-secret", _B + r"GOCSPX-[0-9A-Za-z_\-]{20,}"),
    ("azure-client-secret", _B + r"[A-Za-z0-9_~.\-]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}" + _E),
    ("github-token", _B + r"(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}" + _E),
    ("github-token", _B + r"github_pat_[A-Za-z0-9_]{40,}"),
    ("gitlab-token", _B + r"(?:glpat|glptt|gldt|glrt|glsoat|glcbt|gloas)-[A-Za-z0-9_\-]{20,}"),
    ("gitlab-token", _B + r"GR1348941[A-Za-z0-9_\-]{20,}"),
    ("slack-token", _B + r"xox[abposer]-[A-Za-z0-9\-]{10,}"),
    ("slack-webhook", r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9/_\-]+"),
    ("npm-token", _B + r"npm_[A-Za-z0-9]{36}" + _E),
    ("pypi-token", _B + r"pypi-[A-Za-z0-9_\-]{50,}"),
    ("huggingface-token", _B + r"hf_[A-Za-z0-9]{30,}" + _E),
    ("twilio-key", _B + r"SK[0-9a-fA-F]{32}" + _E),
    ("sendgrid-key", _B + r"SG\.[A-Za-z0-9_\-]{16,32}\.[A-Za-z0-9_\-]{30,50}"),
    ("mailgun-key", _B + r"key-[0-9a-f]{32}" + _E),
    ("mailchimp-key", _B + r"[0-9a-f]{32}-us[0-9]{1,2}" + _E),
    ("shopify-token", _B + r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}" + _E),
    ("digitalocean-token", _B + r"do[pors]_v1_[a-f0-9]{64}" + _E),
    ("databricks-token", _B + r"dapi[a-f0-9]{32}(?:-\d)?" + _E),
    ("square-token", _B + r"(?:EAAA|sq0atp-|sq0csp-)[A-Za-z0-9_\-]{22,}"),
    ("telegram-token", _B + r"[0-9]{8,10}:AA[A-Za-z0-9_\-]{33}" + _E),
    ("age-secret-key", r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"),
    ("jwt", _B + r"eyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]*"),
    ("bearer-token", r"(?i:\b(?:bearer|token)\s+)(?P<s>[A-Za-z0-9._~+/\-]{16,}=*)"),
    ("basic-auth", r"(?i:\bbasic\s+)(?P<s>[A-Za-z0-9+/]{12,}={0,2})(?![A-Za-z0-9+/=])"),
    # 5: URLs
    ("password", r"(?i:\b[a-z][a-z0-9+.\-]{1,20}://)[^\s/:@'\"<>]*:(?P<s>[^\s/@'\"<>]+)@"),
    # a key as the whole user part, no password (a Sentry DSN: https://<key>@o1.ingest...)
    ("url-credential", r"(?i:\b[a-z][a-z0-9+.\-]{1,20}://)(?P<s>[A-Za-z0-9_\-]{16,})@"),
    ("url-secret", r"(?i:[?&;](?:access_token|refresh_token|id_token|api[_-]?key|apikey|"
                   r"token|secret|client_secret|password|passwd|pwd|sig|signature|auth|"
                   r"x-amz-signature|x-amz-credential|x-amz-security-token|key|code)=)"
                   r"(?P<s>[^&\s#'\"<>]{4,})"),
)
_FORMAT_RES = tuple((kind, re.compile(pattern)) for kind, pattern in _FORMATS)
# A text can only hold a format when it holds one of these (lower-cased) pieces: a substring
# test is much cheaper than a regex scan of a long observation. Formats not listed always run.
_HINTS: dict[str, tuple[str, ...]] = {
    "anthropic-key": ("sk-ant-",), "openai-key": ("sk-",), "stripe-key": ("_live_", "_test_"),
    "stripe-webhook-secret": ("whsec_",), "aws-access-key": ("akia", "asia", "abia", "acca",
                                                            "agpa", "aida", "aroa", "aipa",
                                                            "anpa", "anva", "apka"),
    "gcp-api-key": ("aiza",), "gcp-oauth-token": ("ya29.",), "gcp-client-secret": ("gocspx-",),
    "azure-client-secret": ("q~",), "github-token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_",
                                                     "github_pat_"),
    "gitlab-token": ("glpat-", "glptt-", "gldt-", "glrt-", "glsoat-", "glcbt-", "gloas-",
                     "gr1348941"),
    "slack-token": ("xox",), "slack-webhook": ("hooks.slack.com",), "npm-token": ("npm_",),
    "pypi-token": ("pypi-",), "huggingface-token": ("hf_",), "twilio-key": ("sk",),
    "sendgrid-key": ("sg.",), "mailgun-key": ("key-",), "mailchimp-key": ("-us",),
    "shopify-token": ("shpat_", "shpca_", "shppa_", "shpss_"), "digitalocean-token": ("_v1_",),
    "databricks-token": ("dapi",), "square-token": ("eaaa", "sq0atp-", "sq0csp-"),
    "telegram-token": (":aa",), "age-secret-key": ("age-secret-key-1",), "jwt": ("eyj",),
    "bearer-token": ("bearer", "token"), "basic-auth": ("basic",), "password": ("://",),
    "url-credential": ("://",),
    "url-secret": ("=",),
}

# -- 6: assignments ------------------------------------------------------------------------------
# A name that holds a secret: it ends with one of these words (any case, any separator).
_SECRET_WORD = (r"(?:pass(?:word|wd|phrase)?|pwd|secret|token|api[_\-.]?key|apikey|"
                r"access[_\-.]?key(?:[_\-.]?id)?|secret[_\-.]?key|private[_\-.]?key(?:[_\-.]?id)?|"
                r"client[_\-.]?key(?:[_\-.]?data)?|signing[_\-.]?key|encryption[_\-.]?key|"
                r"master[_\-.]?key|account[_\-.]?key|auth[_\-.]?key|credentials?|"
                r"connection[_\-.]?string|_authtoken|session[_\-.]?key|cookie|salt|key)")
# The name is any identifier-like run (its secret word is checked in Python: an alternation
# after an open-ended run would backtrack through every long token).
_NAME_END = re.compile(_SECRET_WORD + r"\Z", re.IGNORECASE)
_ASSIGN = re.compile(
    r"(?P<name>(?<![A-Za-z0-9_\-.])[A-Za-z0-9_\-.]{2,100})"
    r"(?P<q>[\"']?)(?P<sep>\s*(?::=|=>|(?<![=!<>:])=(?![=>])|:(?![:/]))\s*|\s+(?=[\"']))"
    r"(?:(?P<oq>[\"'])(?P<qv>[^\"'\n]*)(?P=oq)|(?P<v>[^\s\"',;}{)\]]+))",
    re.IGNORECASE)
_FLAG = re.compile(
    r"(?P<name>(?<![A-Za-z0-9_\-])--?(?:password|passwd|pass|token|secret|api-key|apikey|"
    r"access-token|auth-token|client-secret|private-key))(?P<sep>[ =])"
    r"(?:(?P<oq>[\"'])(?P<qv>[^\"'\n]*)(?P=oq)|(?P<v>[^\s\"']+))", re.IGNORECASE)
# Values that are not secrets: references to one, placeholders, types, literals.
_NOT_A_VALUE = re.compile(
    r"(?:\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|%\(?[A-Za-z_]+\)?s?|\{\{.*\}\}|<[^>]*>|\*+|x+|\.{3}|"
    r"(?i:true|false|null|none|nil|undefined|required|optional|changeme|redacted|secret|"
    r"password|token|str|string|bytes|int|bool|any|text|varchar.*|char.*|uuid|"
    r"(?:os\.)?environ.*|(?:os\.)?getenv.*|process\.env.*|env\(.*|secrets?\..*))")
_SECRET_KEY = re.compile(r"[A-Za-z0-9_\-.]*(?:" + _SECRET_WORD[3:-1] + r"|pw)",
                         re.IGNORECASE)
_CODE_REF = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
_STRONG_NAME = re.compile(r"(?i)(?:pass|pwd|pw$|secret|token|credential|auth|private|apikey|"
                          r"api.key|access.key|client.key|account.key|cookie|salt)")

# -- 8: entropy ---------------------------------------------------------------------------------
_CANDIDATE = re.compile(r"(?<![A-Za-z0-9+/_\-=])[A-Za-z0-9+/_\-]{20,}={0,2}(?![A-Za-z0-9+/_\-=])")
_HEXISH = re.compile(r"[0-9a-fA-F\-]+")


# -- configured secrets --------------------------------------------------------------------------
_configured: set[str] = set()
_configured_lock = threading.Lock()
_configured_res: list[re.Pattern[str]] = []


def register_secret(value: str | None) -> None:
    """Redact ``value`` (and every alphanumeric run of 8+ characters in it) from now on, in this
    process: for keys and passwords the process was configured with (the LLM API key, a store
    URL's password). Values shorter than 6 characters are ignored (they would mangle text)."""
    if not value:
        return
    value = value.strip()
    if len(value) < 6:
        return
    with _configured_lock:
        if value in _configured:
            return
        _configured.add(value)
        pieces = {value} | {p for p in re.findall(r"[A-Za-z0-9]{8,}", value)}
        alternatives = "|".join(re.escape(p) for p in sorted(pieces, key=len, reverse=True))
        _configured_res.append(re.compile(alternatives))


def configured_secrets() -> frozenset[str]:
    """The secrets registered with :func:`register_secret`."""
    with _configured_lock:
        return frozenset(_configured)


def redact_configured(text: str) -> str:
    """``text`` with only the configured secrets (and their pieces) replaced."""
    for pattern in list(_configured_res):
        text = pattern.sub(marker("configured-secret"), text)
    return text


# -- the redactor --------------------------------------------------------------------------------
def redact(text: str) -> str:
    """``text`` with every secret replaced by ``[REDACTED:<kind>]`` and ``<private>`` spans
    dropped (see the module docstring for the rules)."""
    if not text:
        return text
    text = _PRIVATE.sub("", text)
    text = _PRIVATE_CLOSE.sub("", text)  # a stray close tag carries nothing
    text = _KEY_BLOCK.sub(marker("private-key"), text)
    text = redact_configured(text)
    lowered = text.lower()
    for kind, pattern in _FORMAT_RES:
        hints = _HINTS.get(kind)
        if hints is None or any(h in lowered for h in hints):
            text = _sub(pattern, kind, text)
    text = _ASSIGN.sub(_assignment, text)
    text = _FLAG.sub(_assignment, text)
    text = _library(text)
    return _CANDIDATE.sub(_entropy, text)


def contains_secret(text: str) -> bool:
    """Whether :func:`redact` would change ``text``."""
    return redact(text) != text


def _sub(pattern: re.Pattern[str], kind: str, text: str) -> str:
    def one(match: re.Match[str]) -> str:
        if "s" in pattern.groupindex:
            value = match.group("s")
            if value.startswith(PREFIX):
                return match.group(0)
            start, end = match.span("s")
            whole_start = match.start()
            return (match.group(0)[: start - whole_start] + marker(kind)
                    + match.group(0)[end - whole_start:])
        return marker(kind)
    return pattern.sub(one, text)


def _assignment(match: re.Match[str]) -> str:
    name = match.group("name")
    if not _NAME_END.search(name):
        return match.group(0)
    quoted = match.group("qv") is not None
    value = match.group("qv") if quoted else match.group("v")
    if not _is_secret_value(name, value, quoted):
        return match.group(0)
    group = "qv" if quoted else "v"
    start, end = match.span(group)
    base = match.start()
    kind = "private-key" if "private" in name.lower() or "client" in name.lower() and \
        "key" in name.lower() else "password" if re.search(r"(?i)pass|pwd", name) else "secret"
    return match.group(0)[: start - base] + marker(kind) + match.group(0)[end - base:]


def _is_secret_value(name: str, value: str, quoted: bool) -> bool:
    value = value.strip()
    if len(value) < 3 or value.startswith(PREFIX) or _NOT_A_VALUE.fullmatch(value):
        return False
    if any(c in value for c in "()[]") or value.endswith(("{", ",")):
        return False  # code: a call, an index, a literal opening
    if not quoted and _CODE_REF.fullmatch(value) and not any(c.isdigit() for c in value):
        return False  # ``token = self.token``, ``key: value.name``
    if _STRONG_NAME.search(name):
        return True
    # A name that only ends in "key" (``primary_key``, ``sort key``, ``key=lambda``): the value
    # must look like one (a digit, or long, and not a plain word or identifier).
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value) and not re.search(r"\d", value):
        return len(value) >= 20 and _random(value)
    return bool(re.search(r"\d", value)) and len(value) >= 8 or len(value) >= 20


def _entropy(match: re.Match[str]) -> str:
    token = match.group(0)
    if token.startswith(("sha1-", "sha256-", "sha384-", "sha512-")):
        return token  # a subresource-integrity digest (package-lock.json), not a key
    if len(token) > 256 or _HEXISH.fullmatch(token):
        return _decoded_key(token) or token
    decoded = _decoded_text(token)
    if decoded is not None:
        return marker("private-key") if "PRIVATE KEY" in decoded else token
    if "/" in token and all(not any(c.isupper() for c in part) or _HEXISH.fullmatch(part)
                            for part in token.split("/")):
        return token  # a path: lower-case names and hexadecimal ids
    return marker("high-entropy") if _random(token.rstrip("=")) else token


def _decoded_key(token: str) -> str | None:
    text = _decoded_text(token)
    return marker("private-key") if text is not None and "PRIVATE KEY" in text else None


def _decoded_text(token: str) -> str | None:
    """The text ``token`` encodes in base64 (standard or URL-safe), or None when it does not
    decode to mostly printable text."""
    raw = token.rstrip("=")
    padded = raw + "=" * (-len(raw) % 4)
    for alt in (None, b"-_"):
        try:
            data = base64.b64decode(padded, altchars=alt, validate=True)
        except (binascii.Error, ValueError):
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        printable = sum(1 for c in text if c.isprintable() or c in "\n\r\t")
        if text and printable / len(text) >= 0.95:
            return text
    return None


def _random(token: str) -> bool:
    """Whether ``token`` looks like random key material rather than words or an identifier."""
    n = len(token)
    if n < 20:
        return False
    classes = [any(c.isupper() for c in token), any(c.islower() for c in token),
               any(c.isdigit() for c in token)]
    if sum(classes) < 2:
        return False
    counts: dict[str, int] = {}
    for c in token:
        counts[c] = counts.get(c, 0) + 1
    entropy = -sum(k / n * math.log2(k / n) for k in counts.values())
    if entropy < min(3.5, math.log2(n) - 0.8):
        return False
    switches = sum(1 for a, b in zip(token, token[1:], strict=False) if _kind(a) != _kind(b))
    return switches / (n - 1) >= 0.3 and sum(classes) == 3 or switches / (n - 1) >= 0.4


def _kind(c: str) -> int:
    return 0 if c.isupper() else 1 if c.islower() else 2 if c.isdigit() else 3


# -- 7: detect-secrets ---------------------------------------------------------------------------
_PLUGINS: list[Any] | None = None
# Plugins our own rules replace: entropy and keyword (their false positives on code and hashes
# are what rules 6 and 8 avoid), and formats already matched above.
_SKIP_PLUGINS = {"Base64HighEntropyString", "HexHighEntropyString", "KeywordDetector",
                 "PrivateKeyDetector", "BasicAuthDetector", "JwtTokenDetector",
                 "IPPublicDetector"}


def _library(text: str) -> str:
    plugins = _detect_secrets_plugins()
    if not plugins:
        return text
    found: dict[str, str] = {}
    for line in text.splitlines():
        if len(line) > 4000:
            line = line[:4000]
        for plugin in plugins:
            for value in plugin.analyze_string(line):
                if isinstance(value, str) and len(value) >= 8 and PREFIX not in value:
                    found[value] = _plugin_kind(plugin)
    for value in sorted(found, key=len, reverse=True):
        text = text.replace(value, marker(found[value]))
    return text


def _plugin_kind(plugin: Any) -> str:
    name = type(plugin).__name__.removesuffix("Detector")
    return re.sub(r"(?<!^)(?=[A-Z])", "-", name).lower()


def _detect_secrets_plugins() -> list[Any]:
    global _PLUGINS
    if _PLUGINS is None:
        try:
            from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
        except ImportError:  # pragma: no cover - a base dependency; rules 1-6 and 8 still run
            _PLUGINS = []
            return _PLUGINS
        plugins: list[Any] = []
        classes: list[Any] = list(get_mapping_from_secret_type_to_class().values())
        for cls in classes:
            if cls.__name__ in _SKIP_PLUGINS:
                continue
            try:
                plugins.append(cls())
            except TypeError:
                continue
        _PLUGINS = plugins
    return _PLUGINS


# -- structures ---------------------------------------------------------------------------------
def redact_value(value: T) -> T:
    """``value`` with :func:`redact` applied to every string in it (dict keys included), for
    JSON-like data; other values are returned as they are."""
    return _walk(value, redact)  # type: ignore[no-any-return]


def _walk(value: Any, fn: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, Mapping):
        return {(fn(k) if isinstance(k, str) else k): _field(k, v, fn) for k, v in value.items()}
    if isinstance(value, list | tuple):
        items = [_walk(v, fn) for v in value]
        return items if isinstance(value, list) else tuple(items)
    return value


def _field(key: Any, value: Any, fn: Callable[[str], str]) -> Any:
    """A mapping's value: all of it when its key names a secret (``{"password": "..."}``)."""
    if isinstance(key, str) and isinstance(value, str) and _SECRET_KEY.fullmatch(key) \
            and _is_secret_value(key, value, True):
        return marker("password" if re.search(r"(?i)pass|pwd|pw$", key) else "secret")
    return _walk(value, fn)


def redact_episode(episode: Episode) -> Episode:
    """``episode`` with every text field redacted (task, scene, each step's action, observation
    and thought, and the meta)."""
    steps = tuple(replace(s, action=redact(s.action), observation=redact(s.observation),
                          thought=redact(s.thought) if s.thought is not None else None)
                  for s in episode.steps)
    return replace(episode, task=redact(episode.task), env=redact(episode.env), steps=steps,
                   meta=redact_value(dict(episode.meta)))


def redact_experience(experience: Experience) -> Experience:
    """``experience`` with every text redacted."""
    return experience_from_dict(redact_value(experience_to_dict(experience)))


def redact_all(texts: Iterable[str]) -> list[str]:
    return [redact(t) for t in texts]


register_redactor(redact)
