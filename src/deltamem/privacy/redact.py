"""Secret redaction: what of an agent's transcript may be stored, logged, exported or sent on.

Agent transcripts carry secrets (``cat .env``, ``env``, a kubeconfig, a DSN in a stack trace,
``mysql -p...``). :func:`redact` replaces each one by a marker ``[REDACTED:<kind>]`` and drops
``<private>...</private>`` spans entirely. The facade (:class:`deltamem.DeltaMem`) applies it to
every episode, root and import before anything is stored or shown to a model, so every face and
integration is covered; error messages leaving the process go through :func:`redact` too
(:class:`deltamem.errors.DeltaMemError` renders redacted).

**A project's identity is not a secret.** Paths, branch names, test ids, commit hashes, image
digests and UUIDs pass unchanged: a value is judged by its *context*, never by how random it
looks alone. The contexts, all matched by one compiled regular expression in a single pass over
the text (the alternatives a text cannot hold, by a cheap substring test, are left out of it):

1. ``<private>...</private>`` spans (case-insensitive; an unclosed one runs to the end);
2. private key blocks (``-----BEGIN ... PRIVATE KEY-----`` to its ``END`` line, also
   JSON-escaped and cut-off ones; PGP private key blocks);
3. the secrets configured in this process (:func:`register_secret`: the LLM API key, a store
   URL's password), and every long alphanumeric piece of them;
4. provider key formats, known by their documented prefixes and shapes (AWS, GCP, Azure,
   GitHub, GitLab, Slack, Stripe, OpenAI, Anthropic, Hugging Face, npm, PyPI, Twilio, SendGrid,
   Mailgun, Mailchimp, Shopify, DigitalOcean, Databricks, Square, Telegram, age, Discord), JWTs,
   ``Authorization: Bearer|Basic|Token`` credentials;
5. URL userinfo (``postgres://user:PASS@host``; a key standing alone as the user, a Sentry DSN),
   Oracle's JDBC thin URL (``jdbc:oracle:thin:user/PASS@host``) and secret query parameters
   (``?api_key=``, ``&sig=``);
6. credentials-file lines: ``.pgpass`` (``host:port:db:user:PASSWORD``), ``.netrc``
   (``machine H login U password P``), XML elements named for a secret
   (``<password>...</password>``);
7. command-line flags that carry a password, by the program's documented options: any
   ``--*password``/``--*token``/``--*secret`` option (``--db-password X``, ``-Drepo.password=X``),
   ``mysql -pX``, ``sshpass -p``, ``docker|podman|helm registry login -p``, ``az login -p``,
   ``dotnet nuget add source -p``, ``sqlcmd -P``, ``redis-cli -a``, ``ldapsearch -w``,
   ``curl|wget -u user:PASS``, ``smbclient -U user%PASS``, ``lftp -u user,PASS``, ``htpasswd``
   in batch mode (its flags grouped any way, ``-C cost``, ``-n`` without a file),
   ``openssl -passin|-passout pass:X`` and ``openssl enc -k X``, Oracle's ``sqlplus
   user/PASS@db``, ``npm|aws|git config set <secret key> X``, ``keytool -storepass|-keypass
   X``, a ``-p``/``-P`` given together with a ``-u`` user, ``echo X | ... --password-stdin``,
   ``<(echo X)`` given to a password option, PowerShell ``ConvertTo-SecureString 'X'``. A
   separated value never starts with ``-`` (``mysql --password --port=3306``: the option
   prompts), and ``--ask-password``/``--no-password`` take no value;
8. assignments: ``DB_PASSWORD=...``, ``export API_KEY=...``, ``"apiKey": "..."``,
   ``client-key-data: ...``, ``X-Api-Key: ...`` (a name that ends in a secret word, with a value
   that is not a reference, a placeholder, a boolean or code; a quoted value after ``=`` or
   ``:`` is a literal, brackets and all, unless it holds a substitution such as ``$(...)``),
   and an assignment of any name, after ``=`` or ``:``, whose value is key material (an
   ``env`` dump's ``SERVICE_X_VALUE=<40 random characters>``: long, several character classes,
   not made of words, not a path, not hexadecimal, not a UUID or a version),
   and base64 of an RFC 7617 ``user:password`` pair under an auth name (``.npmrc``'s ``_auth``,
   docker's ``auth``); a chart's ``existingSecret`` (a Secret's name), a build coordinate
   (``io.jsonwebtoken:jjwt-api:0.12.6``), the parts of a colon-joined name (an ARN's
   ``...:secret:prod/db``), a digest's algorithm label (``sha256:``, go.sum's ``h1:``) and a
   test runner's result word (``--- PASS: TestX``) are no assignments, and a name that says it
   identifies (``kid``, ``UserId``, ``X-Request-Id``, ``client-certificate-data``,
   ``checksum``) holds an identity, however random its value looks;
9. encoded values: a base64 token that decodes to text holding a secret by these same rules
   (``cGFzc3dvcmQ9...`` = ``password=...``), or a private key, also right after ``NAME=``.

A value found once is removed wherever else it occurs in the same text (``keytool -srcstorepass
X -deststorepass X``). What is kept: ordinary code and prose, paths, git SHAs, UUIDs, digests,
version strings, identifiers, base64 that encodes ordinary text, references to a secret rather
than its value (``$DB_PASSWORD``, ``${TOKEN}``, ``os.environ["API_KEY"]``, ``process.env.KEY``),
type annotations (``api_key: str``) and placeholders (``<your-key>``, ``***``, ``changeme``).
Further contexts (turn 9, from the fourth set's dev split): the output of a command documented
to print a secret (``gh auth token``, ``pass show``, ``vault kv get -field=``, ``openssl rand``;
at a shell prompt in a text, or a step's action and its observation, :func:`redact_episode`);
any HTTP auth-scheme; ``curl -u KEY:``; user DDL (``IDENTIFIED BY``, ``WITH PASSWORD``);
positional passwords (``rabbitmqctl add_user``, ``oathtool``), here-strings fed to a login and
what an ``expect`` script sends after a password prompt; a webhook's capability URL; prose that
names a secret and gives it; a name and its value written apart (a Key/Value row, a numbered
reply, a name/value object, a block's default); indexed names (``user[password]``), escaped
quotes and a secret word inside a name (``secret_key_base``). Kept: masks (``[FILTERED]``),
password sources (``env:VAR``, ``file:PATH``), store references (``op://...``), ciphertext in
its envelope (sops ``ENC[...]``, ``{AQAAAB...}``), names that say public (``NEXT_PUBLIC_*``,
``data-*``), composite ids (cache keys, ``actions/x@<commit>``) and namespaced commands.

Further contexts (turn 10, from the fifth set's dev split), each a documented grammar: typed
declarations (``password: str = "..."``, ``const API_KEY: &str = "..."``); a quoted name and
its value as a call's two first arguments (``define('DB_PASSWORD', '...')``); an
authenticating call's user and password (``login("u", "p")``, ``simple_bind_s(dn, "p")``,
``auth=("u", "p")``); key/value objects and JSON blocks under a secret's name (``{"key":
"X_PASSWORD", "value": ...}``, ``terraform output -json``); configuration keywords that take a
password (Cisco IOS ``password [0-7] X``, ``enable secret``, OSPF keys; SNMP communities;
HAProxy ``insecure-password``; redis ``requirepass``, ``masterauth``, Sentinel ``auth-pass``;
nmcli's ``password``), judged by the value's shape since the same words start prose; ``psk``
names (wpa_supplicant); net-snmp ``-c`` and ``createUser``; ``radtest``; ``wpa_passphrase``;
strongSwan ``: PSK|EAP "x"``; OpenVPN's inline ``<auth-user-pass>``; SMTP ``AUTH PLAIN`` and
AUTH LOGIN's password reply; FTP/POP3 ``USER`` then ``PASS``; IMAP ``LOGIN``; Redis ACL
``>password``; an option named ``*-key`` given key material (``--certificate-key``); Windows
``/pass:X``; the output of a store's getter of a secret-named key and of ``wg genkey``/``wg
show ... private-key``. Kept: a name written after "public", a WireGuard ``peer``, digests by
their name (``pin-sha256``, ``Content-MD5``), base64 of a file format's content (by its magic
number), a file a secret is read from (``LoadCredential=ID:/path``), store references with a
field (``vault:path#key``, ``ref+awssecrets://...#/x``), placeholders written as constants
(``YOUR_API_KEY_HERE``), camelCase variables in a struct literal and a command's first word at
a prompt. A value found once is never replaced inside a marker.

Further contexts (turn 11, from the sixth set's dev split): MySQL's ``SET PASSWORD ... =
PASSWORD('x')``; any call named for authentication (``db.auth``, ``BasicAuthentication``,
``PasswordAuthenticator``); documented setters (poetry's ``config http-basic.R USER PASS`` and
``pypi-token.R``, ``nuget setapikey``, ``<tool> token set|add``); an anaconda.org channel's
``/t/<token>/``; a command across a shell line continuation, and a token a continuation cuts
(its rest); Markdown an agent writes (``| Password | `x` |``, ``- **Password:** `x` ``); Redis
``AUTH`` at redis-cli's prompt and in RESP; a value alone under a label line that names a secret
and ends in a colon; ``cat`` of a file named for a secret (also in a container); a secret part
inside a long, whitespace-separated property name (``spark-defaults.conf``) given key
material; Python's adjacent string literals under a secret's name; Groq and Resend keys. Kept: a
name that says hash, UUID, path, directory or URL; a mask with the word a tool prints
(``*****(redacted)``); a placeholder addressed to the reader (``your_auth_token``); a
documentation's filler (ten or more of one character in a row); an id whose type prefix
abbreviates its name (``organization: "org-..."``).

:func:`redact` is idempotent. ``benchmarks/coding_memory.py`` measures it on six labelled sets
(``benchmarks/coding_sets``): 1,103 identities and 75 secret shapes; written from the
documented option grammars of credential-taking tools, 1,180 identities and 222 secrets;
written from the documented formats a transcript holds (config files, connection strings,
HTTP, cloud CLIs, tool output, PEM, JWT, vendor tokens), 516 identities and 230 secrets; and
written from the places a session reaches outside an application's config (CI/CD, mobile
signing, IDE and API clients, platforms, webhooks, secret stores, OAuth, shell sessions,
framework output, a vendor catalogue), 300 identities and 223 secrets; and written from source
code, git output, logs, processes, infrastructure state, network and VPN configuration and
protocol sessions, 320 identities and 236 secrets; and written from data, ML, package-registry
and agent-tooling places, 342 identities and 258 secrets.
"""

from __future__ import annotations

import base64
import binascii
import functools
import math
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from deltamem._util.lazyre import lazy
from deltamem.core.model import Episode, Experience, experience_from_dict, experience_to_dict
from deltamem.errors import register_redactor

PREFIX = "[REDACTED:"
T = TypeVar("T")


def marker(kind: str) -> str:
    """The text a secret of ``kind`` is replaced with."""
    return f"{PREFIX}{kind}]"


# -- the contexts: (kind, pattern, hints); group "s" (when present) is what is replaced --------
_B = r"(?<![A-Za-z0-9_\-])"  # a token boundary on the left ...
_E = r"(?![A-Za-z0-9_\-])"   # ... and on the right
# A flag's or an assignment's value: quoted, or a run without blanks and shell separators.
_VALUE = r"(?:'[^'\n]*'|\"[^\"\n]*\"|[^\s'\"|;<>()]+)"
# the rest of one simple command, up to the flag (across a line continuation, ``\`` newline)
_SEG = r"(?:[^\n|;\\]|\\(?:\r?\n)?)*?"
# ``-p``/``-P`` as a password flag (``-pX``, ``-p X``), not the head of the word ``-Password``
# a token a shell line continuation cuts in two (``"sk-...\`` newline ``...rest"``): its rest
_CONT = r"(?:\\\r?\n[ \t]*[A-Za-z0-9_\-+/=.~]+)*"
_P_FLAG = r"-[pP](?!(?i:ass(?:word|wd|phrase)?)\b)"
_SECRET_FLAG_WORD = (r"(?:password|passwd|passphrase|pass|pwd|token|secret|api-?key|apikey|"
                     r"api_key|credentials?|storepass|keypass)")
# A name that holds a secret: it ends with one of these words (any case, any separator).
_SECRET_WORD = (r"(?:pass(?:word|wd|phrase)?|pwd|secret|token|api[_\-.]?key|apikey|"
                r"access[_\-.]?key(?:[_\-.]?id)?|secret[_\-.]?key|private[_\-.]?key(?:[_\-.]?id)?|"
                r"client[_\-.]?key(?:[_\-.]?data)?|signing[_\-.]?key|encryption[_\-.]?key|"
                r"master[_\-.]?key|account[_\-.]?key|auth[_\-.]?key|credentials?|"
                r"connection[_\-.]?string|_authtoken|session[_\-.]?key|cookie|salt|psk|key)")
# Commands documented to print a secret on their standard output (a token, a password, a key
# they create or read from a store); what follows the command line in a transcript is that
# output. :data:`_PRINTS_SECRET` matches the command, :func:`_printed_secret` finds the value.
_SECRET_PRINTERS = (
    r"heroku\s+auth:token|(?:fly|flyctl)\s+(?:tokens\s+create|auth\s+token)|firebase\s+login:ci|"
    r"bw\s+get\s+(?:password|totp|notes)|pass\s+show|lpass\s+show\s+(?:\S+\s+)*--password|"
    r"doppler\s+secrets\s+get\s+(?:\S+\s+)*--plain|op\s+read(?!\s+(?:\S+\s+)*--out-file)|"
    r"gh\s+auth\s+token|gcloud\s+auth\s+(?:application-default\s+)?print-(?:access|identity)-token|"
    r"gcloud\s+secrets\s+versions\s+access|aws\s+ecr\s+get-login-password|"
    r"vault\s+(?:kv\s+get|read)\s+(?:\S+\s+)*-field[= ]|"
    r"security\s+find-(?:generic|internet)-password\s+(?:\S+\s+)*-w|"
    r"az\s+account\s+get-access-token\s+(?:\S+\s+)*(?:-o|--output)\s+tsv|"
    r"kubectl\s+get\s+secrets?\s[^\n|]*\|\s*base64\s+(?:-d|--decode|-D)|"
    r"openssl\s+rand\s+(?:-hex|-base64)|"
    # a file named for a secret, printed (``cat /nexus-data/admin.password``, also in a container)
    r"(?:(?:docker|podman|kubectl)\s+exec\s+(?:-\S+\s+)*\S+\s+(?:--\s+)?)?cat\s+"
    r"\S*(?i:password|passwd|token|secret|api[_\-]?key)(?:\.txt)?(?=[ \t]*$)|"
    r"wg\s+(?:genkey|genpsk|show\s+\S+\s+(?:private-key|preshared-keys))")
# A store's or tool's getter of a key named for a secret (``consul kv get app/db_password``,
# ``etcdctl get /app/token``, ``salt '*' pillar.get app:api_key``): it prints the value.
_SECRET_GETTER = (
    r"[\w.\-]+(?:[ \t]+[^\s|;]+)*?[ \t]+(?:[\w\-]+[.:])?(?:get|show|read)[ \t]+(?:-\S+[ \t]+)*"
    r"[\w./:\-]*(?i:password|passwd|secret|token|api[_\-]?key|apikey)(?=[ \t]*$)")
_PROMPT = r"(?:[$%#>]|PS[^>\n]*>)"
_PRINTS_SECRET = lazy(r"(?:sudo\s+)?(?:" + _SECRET_PRINTERS + "|" + _SECRET_GETTER
                      + r")\b")
# (a command at a prompt, and its output up to the next prompt)
_PRINTED = (r"(?m:^[ \t]*" + _PROMPT + r"[ \t]*(?:sudo\s+)?(?:{})\b[^\n]*\n)"
            r"(?P<s>(?:(?![ \t]*" + _PROMPT + r"[ \t])[^\n]*(?:\n|\Z)){{1,12}})")
# Hints shared by the contexts of rarely met tools and protocol sessions, so that they are
# switched on together (each distinct set of contexts is one more compiled expression, ``_master``).
_TOOL_HINTS = ("snmp", "createuser", "radtest", "wpa_passphrase", "psk", "eap", "xauth", "ntlm",
               "<auth-user-pass>", "auth plain", "ugfzc3dvcmq6", "> auth", "\\r\\nauth")
# Hints of the contexts that read a secret's name in prose or output (switched on together).
_NAMED_HINTS = ("key", "token", "secret", "password", "passphrase", "credential", "pat")
# (kind, pattern, hints[, judge]): a judge (named, see ``_contexts``) decides on the value.
_FORMATS: tuple[tuple[str, str, tuple[str, ...]] | tuple[str, str, tuple[str, ...], str], ...] = (
    # a secret-printing command at a shell prompt, and its output (up to the next prompt)
    ("printed-secret", _PRINTED.format(_SECRET_PRINTERS),
     ("auth:token", "tokens create", "auth token", "login:ci", "bw get", "pass show", "lpass",
      "--plain", "op read", "print-access-token", "print-identity-token", "versions access",
      "get-login-password", "-field", "-password", "get-access-token", "base64",
      "openssl rand", "genkey", "genpsk", "private-key", "preshared-keys", "cat ")),
    ("printed-secret", _PRINTED.format(_SECRET_GETTER),
     ("password", "passwd", "secret", "token", "api_key", "api-key", "apikey")),
    ("private", r"(?is:<private>.*?(?:</private>|\Z))", ("<private",)),
    ("private-close", r"(?i:</private>)", ("</private",)),
    ("private-key", r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----(?s:.*?)"
                    r"(?:-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|\Z)", ("private key",)),
    ("anthropic-key", _B + r"sk-ant-[A-Za-z0-9_\-]{20,}" + _CONT, ("sk-ant-",)),
    ("openai-key", _B + r"sk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_\-]{20,}" + _CONT,
     ("sk-",)),
    ("stripe-key", _B + r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}" + _E, ("_live_", "_test_")),
    ("stripe-webhook-secret", _B + r"whsec_[A-Za-z0-9+/=]{20,}", ("whsec_",)),
    ("aws-access-key", r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|"
                       r"APKA)[A-Z0-9]{16}(?![A-Z0-9])",
     ("akia", "asia", "abia", "acca", "agpa", "aida", "aroa", "aipa", "anpa", "anva", "apka")),
    ("gcp-api-key", _B + r"AIza[0-9A-Za-z_\-]{35}" + _E, ("aiza",)),
    ("gcp-oauth-token", _B + r"ya29\.[0-9A-Za-z_\-]{20,}", ("ya29.",)),
    ("gcp-client-secret", _B + r"GOCSPX-[0-9A-Za-z_\-]{20,}", ("gocspx-",)),
    ("azure-client-secret", _B + r"[A-Za-z0-9_~.\-]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}" + _E, ("q~",)),
    ("github-token", _B + r"(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}" + _E,
     ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    ("github-token", _B + r"github_pat_[A-Za-z0-9_]{40,}", ("github_pat_",)),
    ("gitlab-token", _B + r"(?:glpat|glptt|gldt|glrt|glsoat|glcbt|gloas)-[A-Za-z0-9_\-]{20,}",
     ("glpat-", "glptt-", "gldt-", "glrt-", "glsoat-", "glcbt-", "gloas-")),
    ("gitlab-token", _B + r"GR1348941[A-Za-z0-9_\-]{20,}", ("gr1348941",)),
    ("slack-token", _B + r"xox[abposer]-[A-Za-z0-9\-]{10,}", ("xox",)),
    ("slack-webhook", r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9/_\-]+",
     ("hooks.slack.com",)),
    ("npm-token", _B + r"npm_[A-Za-z0-9]{36}" + _E, ("npm_",)),
    ("groq-key", _B + r"gsk_[A-Za-z0-9]{48,}" + _E, ("gsk_",)),
    ("resend-key", _B + r"re_[A-Za-z0-9]{8}_[A-Za-z0-9]{20,}" + _E, ("re_",)),
    ("pypi-token", _B + r"pypi-[A-Za-z0-9_\-]{50,}", ("pypi-",)),
    ("huggingface-token", _B + r"hf_[A-Za-z0-9]{30,}" + _E, ("hf_",)),
    ("twilio-key", _B + r"SK[0-9a-fA-F]{32}" + _E, ("sk",)),
    ("sendgrid-key", _B + r"SG\.[A-Za-z0-9_\-]{16,32}\.[A-Za-z0-9_\-]{30,50}", ("sg.",)),
    ("mailgun-key", _B + r"key-[0-9a-f]{32}" + _E, ("key-",)),
    ("mailchimp-key", _B + r"[0-9a-f]{32}-us[0-9]{1,2}" + _E, ("-us",)),
    ("shopify-token", _B + r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}" + _E,
     ("shpat_", "shpca_", "shppa_", "shpss_")),
    ("digitalocean-token", _B + r"do[pors]_v1_[a-f0-9]{64}" + _E, ("_v1_",)),
    ("databricks-token", _B + r"dapi[a-f0-9]{32}(?:-\d)?" + _E, ("dapi",)),
    ("square-token", _B + r"(?:EAAA|sq0atp-|sq0csp-)[A-Za-z0-9_\-]{22,}",
     ("eaaa", "sq0atp-", "sq0csp-")),
    ("telegram-token", _B + r"[0-9]{8,10}:AA[A-Za-z0-9_\-]{33}" + _E, (":aa",)),
    ("discord-token", _B + r"[MN][A-Za-z\d]{23,25}\.[\w-]{6}\.[\w-]{27,38}" + _E, (".",)),
    ("age-secret-key", r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}",
     ("age-secret-key-1",)),
    ("jwt", _B + r"eyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]*", ("eyj",)),
    # Authorization: [<auth-scheme>] <credentials> (RFC 9110: any token names the scheme:
    # Bearer, SSWS, ShippoToken, FlyV1, ...); Basic may be written as user and password, which
    # REST clients' request files encode themselves.
    ("authorization", r"(?i:\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)"
                      r"(?:(?i:basic)[ \t]+[^\s:'\"]{1,64}[ \t:](?=\S{6,}))?"
                      r"(?:[A-Za-z][\w\-]{1,30}[ \t]+(?=\S{8,}))?"
                      r"(?P<s>[A-Za-z0-9._~+/\-]{8,}=*(?:,[A-Za-z0-9._~+/\-]{8,}=*)*" + _CONT + ")",
     ("authorization",)),
    ("bearer-token", r"(?i:\b(?:bearer|token)\s+)(?P<s>[A-Za-z0-9._~+/\-]{16,}=*" + _CONT + ")",
     ("bearer", "token")),
    ("basic-auth", r"(?i:\bbasic\s+)(?P<s>[A-Za-z0-9+/]{12,}={0,2})(?![A-Za-z0-9+/=])",
     ("basic",)),
    # 5: URLs
    # (userinfo holds no '[' or ']': RFC 3986 keeps them for an IP literal host)
    ("password", r"(?i:\b[a-z][a-z0-9+.\-]{1,20}://)[^\s/:@'\"<>\[\]]*:(?P<s>[^\s/@'\"<>\[\]]+)@",
     ("://",)),
    ("url-credential", r"(?i:\b[a-z][a-z0-9+.\-]{1,20}://)(?P<s>[A-Za-z0-9_\-]{16,})@", ("://",)),
    # a webhook's capability URL: the random path segment after the segment that names the hook
    # (``/hooks/<token>``, ``/IncomingWebhook/<token>/...``, ``/webhooks/<id>/<token>``)
    ("webhook", r"(?i:https?://[^\s/'\"<>]+/(?:[^\s/'\"<>?#]+/)*[\w\-]*hooks?[\w\-]*/"
                r"(?:\d{6,}/)?)(?P<s>[A-Za-z0-9_\-]{20,})(?![A-Za-z0-9_\-])", ("hook",),
     "capability"),
    ("url-secret", r"(?i:[?&;](?:access_token|refresh_token|id_token|api[_-]?key|apikey|"
                   r"token|secret|client_secret|password|passwd|pwd|sig|signature|auth|"
                   r"x-amz-signature|x-amz-credential|x-amz-security-token|key|code)=)"
                   r"(?P<s>[^&\s#'\"<>]{4,})", ("=",)),
    # prose that names a secret and then gives it: "the key was X", "token is X", "store this
    # credential somewhere safe: X" (a value that is key material, a vendor's prefixed token or a
    # long hex string; the handler judges it)
    ("named-in-prose", r"(?i:\b(?:api[ _\-]?key|key|token|secret|password|passphrase|"
                       r"credential|pat)s?\b(?:(?:[ \t]+[\w'’,.\-]+){1,10}?[ \t]*[:=]|"
                       r"(?:[ \t]+[\w'’,.\-]+){0,10}?[ \t]+(?:is|was))"
                       r"[ \t]+)(?P<s>[A-Za-z0-9][A-Za-z0-9_\-+/=.~]{15,})(?=[\s,;)]|\Z)",
     _NAMED_HINTS, "token-shaped"),
    # 6: credentials files
    ("password", r"(?m:^[^\s:#]+:(?:\d+|\*):[^\s:]+:[^\s:]+:(?P<s>\S+)$)", (":",)),
    ("password", r"\b(?:machine\s+\S+|default)(?:\s+(?:login|account)\s+\S+)*\s+password\s+"
                 r"(?P<s>\S+)", ("password",)),
    ("password", r"(?i:<(?P<tag>[\w.:-]*(?:password|passwd|secret|token|api[_-]?key)[\w.:-]*)>)"
                 r"(?P<s>[^<\s]{3,})</(?P=tag)>", ("</",)),
    # 7: flags, by the programs' documented options
    ("password", r"\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlshow|mysqlcheck|mysqlsh|"
                 r"mariadb|mariadb-dump)\b" + _SEG + r"\s-p(?P<s>[^\s-]\S*)", ("mysql", "mariadb")),
    ("password", r"\bsshpass\s+(?:-\w+\s+)*?-p\s*(?P<s>" + _VALUE + ")", ("sshpass",)),
    ("password", r"\b(?:(?:docker|podman|nerdctl|buildah|skopeo|oras|crane|helm\s+registry)"
                 r"\s+login|az\s+login|dotnet\s+nuget\s+(?:add|update)\s+source|"
                 r"mongo(?:sh|dump|restore|import|export)?)\b" + _SEG
                 + r"\s-p\s+(?P<s>(?!-)" + _VALUE + ")", ("login", "nuget", "mongo")),
    ("password", r"\b(?:sqlcmd|bcp|osql|isql)\b" + _SEG + r"\s-P\s*(?P<s>" + _VALUE + ")",
     ("sqlcmd", "bcp", "sql")),
    ("password", r"\bredis-cli\b" + _SEG + r"\s-a\s+(?P<s>" + _VALUE + ")", ("redis-cli",)),
    ("password", r"\bldap\w+\b" + _SEG + r"\s-w\s*(?P<s>(?!-)" + _VALUE + ")", ("ldap",)),
    # lftp -u USER,PASSWORD
    ("password", r"\blftp\b" + _SEG + r"\s(?:-u|--user)\s+['\"]?[^\s,'\"]+,(?P<s>[^\s'\"]+)",
     ("lftp",)),
    # Oracle's tools: USER/PASSWORD[@CONNECT]
    ("password", r"\b(?:sqlplus|sqlldr|expdp|impdp)\s+(?:-\w+\s+)*['\"]?"
                 r"[A-Za-z][\w$#.]*/(?P<s>[^\s@/'\"]+)(?=@|['\"]?(?:\s|$))",
     ("sqlplus", "sqlldr", "expdp", "impdp")),
    # Oracle's JDBC thin URL: jdbc:oracle:thin:USER/PASSWORD@[//]host[:port]...
    ("password", r"(?i:\bjdbc:oracle:thin:)[^\s/@:'\"]+/(?P<s>[^\s@'\"]+)@", ("jdbc:oracle",)),
    # a package manager's or CLI's config setter: ``npm config set KEY VALUE`` of a secret KEY
    ("password", r"\b(?:npm|pnpm|yarn|aws|git|heroku|gh)\s+(?:config|configure)\s+set\s+"
                 r"(?:-{1,2}[\w-]+(?:[ =]\S+)?\s+)*[\w./:@-]*(?i:" + _SECRET_WORD + r")\s+"
                 r"(?P<s>(?!-)" + _VALUE + ")", ("config",)),
    # poetry's ``config http-basic.REPO USER PASSWORD`` and ``config pypi-token.REPO TOKEN``
    ("password", r"\bpoetry[ \t]+config[ \t]+(?:-{1,2}[\w-]+[ \t]+)*(?:http-basic\.\S+[ \t]+"
                 r"(?!-)" + _VALUE + r"|pypi-token\.\S+)[ \t]+(?P<s>(?!-)" + _VALUE + ")",
     ("poetry",)),
    # a subcommand that stores a key or a token given to it (``nuget setapikey KEY``,
    # ``conda token set TOKEN``, ``<tool> token add TOKEN``)
    ("secret", r"(?i:\b(?:set-?api-?key|setapikey|(?:token|auth)[ \t]+(?:set|add)))[ \t]+"
               r"(?:-\S+[ \t]+)*(?P<s>(?!-)[^\s'\"]{8,})", _NAMED_HINTS),
    # anaconda.org's token in a channel URL (``https://conda.anaconda.org/t/<token>/<channel>``)
    ("secret", r"(?i:\bhttps?://[\w.\-]+/t/)(?P<s>[A-Za-z0-9][A-Za-z0-9\-]{19,})(?=/)", ("/t/",)),
    ("password", r"\b(?:curl|wget|http|xh)\b" + _SEG + r"\s(?:-u|--user|--proxy-user|-U)"
                 r"[ =]?['\"]?[^\s:'\"]+:(?P<s>[^\s'\"]+)", ("curl", "wget", "http", "xh")),
    # (read on the whole text only: the head of ``-u user:PASSWORD``, re-read alone once the
    # password is out, also ends in a colon)
    ("api-key", r"\b(?:curl|wget|http|xh)\b" + _SEG + r"\s(?:-u|--user)[ =]?['\"]?"
                r"(?P<s>[A-Za-z0-9_\-]{16,}):(?=['\"]?(?:\s|$))", ("curl", "wget", "http", "xh")),
    ("password", r"\bsmbclient\b" + _SEG + r"\s-U\s*['\"]?[^\s%'\"]+%(?P<s>[^\s'\"]+)",
     ("smbclient",)),
    # htpasswd -b[cmBdpsDv] [-C cost] [-r rounds] FILE USER PASSWORD; with -n no FILE
    ("password", r"\bhtpasswd(?=(?:\s+-[A-Za-z]+(?:\s+\d+)?)*?\s+-[A-Za-z]*b)"
                 r"(?:(?=(?:\s+-[A-Za-z]+(?:\s+\d+)?)*?\s+-[A-Za-z]*n)(?P<n>))?"
                 r"(?:\s+-(?:[A-Za-z]*[Cr]\s+\d+|[A-Za-z]+))++(?(n)|\s+(?!-)" + _VALUE + r")"
                 r"\s+(?!-)" + _VALUE + r"\s+(?P<s>(?!-)" + _VALUE + ")", ("htpasswd",)),
    ("password", r"(?<![\w-])-pass(?:in|out)?\s+pass:(?P<s>" + _VALUE + ")", ("pass:",)),
    # SQL's user DDL: ``CREATE|ALTER USER|ROLE ... IDENTIFIED BY 'x'`` (MySQL, Oracle),
    # ``... [WITH] [ENCRYPTED] PASSWORD 'x'`` (PostgreSQL), ``SET PASSWORD ... = 'x'``
    ("password", r"(?i:(?<![\w'\"])(?:identified\s+(?:with\s+\w+\s+)?by|"
                 r"(?:with\s+|encrypted\s+)password|set\s+password(?:\s+for\s+\S+)?\s*="
                 r"(?:\s*(?:old_)?password\s*\()?)\s*)"
                 r"(?P<s>'[^'\n]+'|\"[^\"\n]+\")", ("identified", "password")),
    # rabbitmqctl add_user|change_password USER PASSWORD
    ("password", r"\brabbitmqctl\s+(?:-\S+\s+)*(?:add_user|change_password)\s+" + _VALUE
                 + r"\s+(?P<s>(?!-)" + _VALUE + ")", ("rabbitmqctl",)),
    # a here-string or echo given to a login: what it feeds is the credential
    ("secret", r"\b(?:login|auth)\b" + _SEG + r"<<<\s*(?P<s>" + _VALUE + ")", ("<<<",)),
    # expect scripts: what is sent after a password prompt is expected
    ("password", r"(?i:expect\s+[^\n]*(?:password|passphrase|passcode)[^\n]*\n\s*send\s+)"
                 r"(?P<s>\"(?![$\[])[^\"\n]+\"|'(?![$\[])[^'\n]+'|\{[^}\n]+\})", ("send",)),
    # oathtool KEY: the shared TOTP/HOTP secret is its positional argument
    ("secret", r"\boathtool\b(?:\s+-[-\w=]+)*\s+(?P<s>(?!-)[A-Za-z0-9=]{10,})", ("oathtool",)),
    ("password", r"\bopenssl\b" + _SEG + r"\s-k\s+(?P<s>" + _VALUE + ")", ("openssl",)),
    # network and service configuration grammars, a keyword then the value (Cisco IOS
    # ``username U password [0-7] X``, ``enable secret``, ``key-string``, OSPF's
    # ``message-digest-key N md5 X``; net-snmp's ``rocommunity``/``rwcommunity`` and
    # ``snmp-server community``; HAProxy's ``insecure-password``; redis.conf's ``requirepass``,
    # ``masterauth`` and Sentinel's ``auth-pass <master>``; nmcli's ``password``): judged by the
    # value's shape (:func:`_password_shaped`), since the same words start prose
    ("password", r"(?i:(?<![\w-])(?:password|passwd|passphrase|insecure-password|"
                 r"(?:ro|rw)?community|key-string|requirepass|masterauth|enable[ \t]+secret|"
                 r"message-digest-key[ \t]+\d+[ \t]+md5|authentication-key|"
                 r"auth-pass[ \t]+[\w.\-]+)(?:[ \t]+[0-7](?=[ \t]))?[ \t]+)"
                 r"(?P<s>\"[^\"\n]+\"|'[^'\n]+'|(?![=:])[^\s'\"]+)",
     ("password ", "password\t", "passwd ", "passphrase ", "insecure-password", "community",
      "key-string", "requirepass", "masterauth", "enable secret", "md5", "authentication-key",
      "auth-pass"), "password-shaped"),
    # net-snmp: ``snmpwalk -c COMMUNITY``; ``createUser NAME (MD5|SHA) AUTHPASS [(DES|AES) PRIV]``
    ("secret", r"\bsnmp\w*\b" + _SEG + r"\s-c\s*(?P<s>(?!-)" + _VALUE + ")", _TOOL_HINTS),
    ("password", r"\bcreateUser\s+(?:-e\s+\S+\s+)?\S+\s+(?:MD5|SHA[\w-]*)\s+" + _VALUE
                 + r"\s+(?:DES|AES[\w-]*)\s+(?P<s>" + _VALUE + ")", _TOOL_HINTS),
    ("password", r"\bcreateUser\s+(?:-e\s+\S+\s+)?\S+\s+(?:MD5|SHA[\w-]*)\s+(?P<s>" + _VALUE + ")",
     _TOOL_HINTS),
    # FreeRADIUS radtest USER PASSWORD SERVER NAS-PORT SECRET
    ("secret", r"\bradtest\s+(?:-\S+\s+)*" + _VALUE + r"\s+" + _VALUE + r"\s+\S+\s+\S+\s+(?P<s>"
               + _VALUE + ")", _TOOL_HINTS),
    ("password", r"\bradtest\s+(?:-\S+\s+)*" + _VALUE + r"\s+(?P<s>" + _VALUE + ")", _TOOL_HINTS),
    # wpa_passphrase SSID PASSPHRASE
    ("password", r"\bwpa_passphrase\s+" + _VALUE + r"\s+(?P<s>" + _VALUE + ")", _TOOL_HINTS),
    # an option named for a key whose value is key material or 64+ hexadecimal digits
    # (``kubeadm join --certificate-key <hex>``); a path, an id or a name given there stays
    ("secret", r"(?<![\w-])--?(?!(?i:[\w.\-]*public))[\w.\-]*-key(?:[ \t]+|=)(?P<s>(?!-)" + _VALUE
               + ")", ("-key",), "key-shaped"),
    # Windows tools' ``/pass:X`` (cmdkey), ``/password:X``
    ("password", r"(?<![\w/])/(?i:pass(?:word)?|pwd)[:=](?P<s>" + _VALUE + ")", ("/pass",)),
    # strongSwan's ipsec.secrets: ``[selectors] : PSK|EAP|XAUTH|NTLM "secret"``
    ("secret", r"(?m:^[^\n:]*:[ \t]*(?:PSK|EAP|XAUTH|NTLM)[ \t]+(?P<s>\"[^\"\n]+\"|'[^'\n]+'|"
               r"[^\s\"']+))",
     ("psk", "eap", "xauth", "ntlm")),
    # OpenVPN's inline ``<auth-user-pass>`` block: a user line, then the password line
    ("password", r"<auth-user-pass>[ \t]*\n[^\n]*\n[ \t]*(?P<s>[^\s<][^\n<]*?)[ \t]*\n",
     ("<auth-user-pass>",)),
    # mail and file-transfer protocol sessions: SMTP ``AUTH PLAIN <base64>`` and the reply to
    # AUTH LOGIN's password challenge (base64 of "Password:", RFC 4954); FTP's and POP3's
    # ``USER`` then ``PASS``; IMAP's ``<tag> LOGIN user password``; Redis ACL ``>password``
    ("password", r"\bAUTH[ \t]+PLAIN[ \t]+(?P<s>[A-Za-z0-9+/]{8,}={0,2})", ("auth plain",)),
    ("password", r"\b334[ \t]+UGFzc3dvcmQ6[^\n]*\n[<> \t]*(?P<s>[A-Za-z0-9+/]{4,}={0,2})",
     ("ugfzc3dvcmq6",)),
    ("password", r"(?m:^[<> \t]*USER[ \t]+\S+[^\n]*\n(?:[^\n]*\n){0,2}?[<> \t]*PASS[ \t]+"
                 r"(?P<s>\S+))", ("pass ", "pass\t")),
    ("password", r"(?m:^[<> \t]*[A-Za-z0-9.]+[ \t]+LOGIN[ \t]+(?:\"[^\"\n]*\"|\S+)[ \t]+"
                 r"(?P<s>\"[^\"\n]*\"|\S+)[ \t]*$)", (" login ", " login\t")),
    ("password", r"(?m:^[^\n>]{0,80}>[ \t]*AUTH[ \t]+(?:\S+[ \t]+)?(?P<s>\S+)[ \t]*$)",
     _TOOL_HINTS),
    ("password", r"\$4\\r\\nAUTH\\r\\n(?:\$\d+\\r\\n[^\\\s]+\\r\\n)?\$\d+\\r\\n"
                 r"(?P<s>[^\\\s]+)", _TOOL_HINTS),
    # a label that names a secret, then its value alone on the next line (Elasticsearch's
    # "Password for the elastic user (...):" then the password; judged by the value's shape)
    ("labelled-below", r"(?m:(?<=:)[ \t]*\n[ \t]*(?P<s>[^\s:]{8,})[ \t]*$)", _NAMED_HINTS),
    ("password", r"(?m:^[ \t]*(?:ACL[ \t]+SETUSER|user)[ \t]+\S+(?:[ \t]+[^\s>]\S*)*?[ \t]+>"
                 r"(?P<s>\S+))", ("setuser", " on >", " on\t>")),
    # a call that authenticates, with the user and the password as its two first string
    # arguments (``conn.login("u", "p")``, ``simple_bind_s(dn, "p")``, ``HTTPBasicAuth("u",
    # "p")``, ``new NetworkCredential("u", "p")``, ``auth=("u", "p")``)
    ("password", r"(?i:(?:login|logon|signin|sign_in|bind_s|bind|authenticate|credentials?|"
                 r"auth(?:entication|enticator)?|basic_auth|\bauth[ \t]*=)"
                 r"[ \t]*\([ \t]*)(?:\"[^\"\n]*\"|'[^'\n]*')[ \t]*,[ \t]*"
                 r"(?P<s>\"[^\"\s]{3,}\"|'[^'\s]{3,}')",
     ("login", "logon", "signin", "sign_in", "bind", "authenticate", "credential", "auth"),
     "password-shaped"),
    ("password", r"\bConvertTo-SecureString\s+(?:-String\s+)?(?P<s>'[^'\n]*'|\"[^\"\n]*\")",
     ("convertto-securestring",)),
    ("password", r"\b(?:echo|printf)\s+(?:-n\s+)?(?P<s>" + _VALUE + r")\s*\|" + _SEG
                 + r"--password-stdin", ("password-stdin",)),
    ("password", r"(?<![\w-])--?[\w.-]*" + _SECRET_FLAG_WORD + r"[\w.-]*[ =]<\(\s*(?:echo|printf)"
                 r"\s+(?:-n\s+)?(?P<s>" + _VALUE + r")\s*\)", ("<(",)),
    # (a flag that only asks for one, ``--ask-password``, ``--no-password``, takes none)
    ("password", r"(?<![\w-])(?P<flag>--?(?!(?i:ask|no|prompt|with|show|hide)[-_])(?:[\w.]+[-_.]?)?"
                 r"(?i:" + _SECRET_FLAG_WORD + r"))(?:\s+(?![-=])|=)(?P<s>" + _VALUE + ")", ("-",)),
    ("password", r"(?<!\S)-[uU]\s*[^\s-]\S*" + _SEG + r"\s" + _P_FLAG
                 + r"\s*(?P<s>(?!\d+(?:\s|$))(?!-)" + _VALUE + ")", ("-u", "-U")),
    ("password", r"(?<!\S)" + _P_FLAG + r"\s*(?P<s>(?!\d+(?:\s|$))(?!-)"
                 + _VALUE + ")" + _SEG
                 + r"\s-[uU]\s*[^\s-]", ("-u", "-U")),
)

# -- 8: assignments ------------------------------------------------------------------------------
# A name and its value written apart, judged as an assignment of that name (``_named_pair``):
# a two-column row (``vault kv get``'s Key/Value table), a reply's numbered pair (``redis-cli
# CONFIG GET``), a name/value object (``<env name="X" value="..."/>``, ``{"name": "X", "value":
# ...}``, a Kubernetes ``env`` list), a block's default (CloudFormation's ``Parameters``).
_SECRETISH = (r"[\w.\-]{0,40}(?i:pass|pwd|secret|token|key|credential|auth|cookie|salt|psk)"
              r"[\w.\-]{0,40}")
_PAIR_HINTS = ("pass", "pwd", "secret", "token", "key", "credential", "auth", "cookie", "salt",
               "psk")
_PAIRS = (
    r"(?m:^[ \t]*(?P<name>[A-Za-z_][\w.\-]{0,120})(?:\t+|[ ]{2,})(?P<s>[^\s'\"]{3,})[ \t]*$)",
    # Python's adjacent string literals, one value in pieces (``TOKEN = (\n "ab" \n "cd"\n)``)
    r"(?m:(?P<name>[A-Za-z_]\w{0,60})[ \t]*=[ \t]*\([ \t]*\n(?P<s>(?:[ \t]*(?:\"[^\"\n]*\"|"
    r"'[^'\n]*')[ \t]*\n){2,8})[ \t]*\))",
    r"(?m:^[ \t]*\d+\)[ \t]+\"(?P<name>[A-Za-z_][\w.\-]{0,60})\"[ \t]*\n[ \t]*\d+\)[ \t]+"
    r"\"(?P<s>[^\"\n]+)\")",
    r"(?i:\b(?:name|key)\b[\"']?\s*[=:]\s*[\"'](?P<name>" + _SECRETISH + r")[\"'][ \t,]*"
    r"(?:\n[ \t]*-?[ \t]*)?[\"']?\bvalue\b[\"']?\s*[=:]\s*)"
    r"(?P<s>\"[^\"\n]*\"|'[^'\n]*'|[^\s\"',}/>]+)",
    r"(?m:^(?P<ind>[ \t]*+)(?P<name>[A-Za-z_][\w.\-]{0,60}+):[ \t]*+\n"
    r"(?:(?P=ind)[ \t]++(?!(?i:default|value):)[^\n]*+\n){0,8}+"
    r"(?P=ind)[ \t]++(?i:default|value):[ \t]*+(?P<s>[^\s#]+))",
    # the same block in JSON (``terraform output -json``: ``"db_password": {"sensitive": true,
    # ..., "value": "..."}``)
    r"\"(?P<name>" + _SECRETISH + r")\"[ \t]*:[ \t]*\{[^{}]{0,300}?\"value\"[ \t]*:[ \t]*"
    r"(?P<s>\"[^\"\n]*\")",
    # a typed declaration: NAME: TYPE = "value" (Python, TypeScript, Kotlin, Swift, Rust)
    r"(?<![\w.])(?P<name>[A-Za-z_]\w{0,60}+)[ \t]*:[ \t]*&?(?:'static[ \t]+)?"
    r"[A-Za-z_][\w.<>\[\]?]{0,40}[ \t]*=[ \t]*(?P<s>\"[^\"\n]*\"|'[^'\n]*')",
    # a quoted name and its value as a call's two first arguments (PHP's ``define('DB_PASSWORD',
    # 'x')``, ``setProperty("db.password", "x")``, ``os.environ.setdefault("API_KEY", "x")``)
    r"\([ \t]*(?P<nq>[\"'])(?P<name>" + _SECRETISH + r")(?P=nq)[ \t]*,[ \t]*"
    r"(?P<s>\"[^\"\s]{3,}\"|'[^'\s]{3,}')",
    # Markdown, as an agent's reply lays settings out: a table row ``| Password | `x` |`` and a
    # labelled item ``- **Password:** `x` ``
    r"(?m:^[ \t]*\|[ \t]*(?:\*\*)?(?P<name>[A-Za-z_][\w .\-]{0,40}?)(?:\*\*)?[ \t]*\|[ \t]*"
    r"`?(?P<s>[^`|\s]{3,})`?[ \t]*\|)",
    r"(?m:^[ \t]*(?:[-*+][ \t]+)?(?:\*\*|__)(?P<name>[A-Za-z_][\w .\-]{0,40}?):?(?:\*\*|__):?"
    r"[ \t]*`(?P<s>[^`\n]{3,})`)",
)
_NAME_END = lazy(_SECRET_WORD + r"\Z", re.IGNORECASE)
_ASSIGN = (r"(?P<name>(?<![A-Za-z0-9_\-./])(?<![A-Za-z0-9_\-.]:)[A-Za-z_][A-Za-z0-9_\-.]{1,99}"
           r"(?:\[[A-Za-z_][A-Za-z0-9_\-.]{0,40}\])?)"
           r"(?P<q>\\?[\"']?)"
           r"(?P<sep>[ \t]*(?::=|=>|(?<![=!<>:])=(?![=>])|:(?![:/]|\\(?![\"'])))[ \t]*|"
           r"[ \t]+(?=\\?[\"']))"
           r"(?:(?P<oq>\\?[\"'])(?P<qv>[^\"'\n\\]*)(?P=oq)|(?P<v>[^\s\"',;}{)\]\\]+))")
# Values that are not secrets: references to one, placeholders, types, literals.
_NOT_A_VALUE = lazy(
    r"(?:\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|%\(?[A-Za-z_]+\)?s?|\{\{.*\}\}|<[^>]*>|x+|\.{3}|"
    # a mask, with the word a tool prints beside it (``****``, ``*********(redacted)``)
    r"\*+[ \t]*(?:\(?(?i:redacted|hidden|masked|sensitive|filtered|secret)\)?)?|"
    # a documentation placeholder addressed to the reader (``your_auth_token``, ``your-api-key``)
    r"(?i:your[_\-][\w\-]+)|"
    # a mask a tool printed instead of the value (``[FILTERED]``, ``[Filtered]``, ``[hidden]``)
    r"\[[A-Za-z][A-Za-z _\-]{1,30}\]|"
    # where a tool reads the password from, not the password (openssl, apksigner, jarsigner:
    # ``env:VAR``, ``file:PATH``, ``fd:N``, ``stdin``)
    r"(?:env|file|fd):[^\s]+|stdin|"
    # a reference to a secret kept in a store, by its URI (``op://vault/item/field``,
    # ``vault://...``): a locator without credentials
    r"[a-z][a-z0-9+.\-]{1,20}://[^\s@?#]+(?: [^\s@?#]+)*(?:#[^\s@]*)?|"
    r"[a-z][a-z0-9+.\-]{1,20}:[\w.\-]+(?:/[\w.\-]+)+(?:#[\w/.\-]*)?|"
    # a file the secret is read from (``/run/secrets/db``; systemd's ``LoadCredential=ID:PATH``)
    r"(?:[\w.\-]+:)?/[\w.\-]+(?:/[\w.\-]+)+|"
    # a placeholder written as a constant's name (``YOUR_API_KEY_HERE``)
    r"[A-Z]{2,}(?:_[A-Z]+)+|"
    r"(?i:true|false|yes|no|on|off|null|none|nil|undefined|required|optional|changeme|redacted|secret|"
    r"password|token|str|string|bytes|int|bool|any|text|varchar.*|char.*|uuid|"
    r"(?:os\.)?environ.*|(?:os\.)?getenv.*|process\.env.*|env\(.*|secrets?\..*))")
_SECRET_KEY = lazy(r"[A-Za-z0-9_\-.]*(?:" + _SECRET_WORD[3:-1] + r"|pw)",
                   re.IGNORECASE)
_SUBSTITUTION = lazy(r"\$[({]|`|#\{|\{\{")
# A namespaced command's part after the colon (``rails credentials:show``, ``rake db:migrate``).
_NAMESPACE_PART = lazy(r"[a-z]+(?:[_\-][a-z]+)*")
# Ciphertext in the envelope of the tool that encrypted it (sops ``ENC[AES256_GCM,...]``, EJSON
# ``EJ[1:...]``, a Jenkins or Maven encrypted secret ``{AQAAAB...}``, Ansible Vault's header):
# stored encrypted, so no secret's value. ``_ENVELOPE_OPEN``: the same cut by the value's
# grammar at a comma or a brace.
_ENVELOPE = lazy(r"(?<![A-Za-z0-9_])[A-Z][A-Z0-9_]{1,9}\[[^\]\s]*\]|"
                 r"\{[A-Za-z0-9+/]{16,}={0,2}\}|\$ANSIBLE_VAULT;[\d.;A-Z0-9_]+")
_ENVELOPE_OPEN = lazy(r"[A-Z][A-Z0-9_]{1,9}\[[\w-]*")
_CODE_REF = lazy(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
_CAMEL_CASE = lazy(r"[a-z]+(?:[A-Z][a-z]+)+")
# Names that refer to a secret kept elsewhere: a chart's ``existingSecret`` names a Kubernetes
# Secret object (the Helm charts' documented convention), not a value.
_REFERENCE_NAME = lazy(r"(?i)existing[_\-.]?secret\Z")
# Names of an HTTP Basic credential pair (RFC 7617: base64 of ``user:password``), as .npmrc's
# ``_auth``, docker's config.json ``auth`` and ``basicAuth`` fields hold it.
_AUTH_NAME = lazy(r"(?i)auth|cred")
_PAIR = lazy(r"[^\s:]{1,128}:(?!\d+\Z)[^\n]{3,}")
# A build coordinate (``group:artifact[:packaging]:version``, Maven and Gradle): the group
# before the colon is no secret's name, whatever word ends it.
_COORDINATE = lazy(r"[A-Za-z][\w-]*(?:\.[\w-]+)+:[A-Za-z][\w.-]*(?::[\w.-]+)*:v?\d[\w.+-]*")
# Names that say their value identifies or checks something (``kid``, ``UserId``,
# ``X-Request-Id``, ``client-certificate-data``, ``checksum``): a random-looking value under
# one is an identity, not key material (a name that ends in a secret word still is one).
_IDENTITY_NAME = lazy(r"(?i:(?:\A|[_\-.])k?id(?:[_\-.]?\d+)?)\Z|[a-z]Id\Z|[a-z0-9]ID\Z|"
                      r"(?i:recipients?|public[_\-.]?key|pubkey)\Z|"
                      r"(?i:cert(?:ificate)?(?:[_\-.]?authority)?(?:[_\-.]?data)?|crt|"
                      r"fingerprint|thumbprint|checksum|digest|integrity|etag|revision|"
                      r"peer|hash|uuid|guid|path|dir|directory|url|uri)\Z|(?i:(?:\A|[_\-.])(?:sha\d*|md5|crc32c?))\Z")
# A digest's algorithm label before its value (``sha256:...``; go.sum's ``h1:<base64>``, the
# Go module hash) and a test runner's result word (``--- PASS: TestX``, automake ``PASS:``)
# are no names.
_LABEL_NAME = lazy(r"(?i:sha\d*|sha3-\d+|md5|blake2[bs]?|h1)|PASS|FAIL|SKIP")
# Names that say their value is public: a browser bundle's variable (``NEXT_PUBLIC_*``, which
# Next.js documents as shipped to every visitor), a publishable key, an attribute of served
# markup (``data-sitekey``): whatever is under them is shown to anyone.
_PUBLIC_NAME = lazy(r"(?i)public|publishable|\Adata-")
# A name written after "public" (``public key: ...``, ``wg show``'s output) and a command's first
# word at a shell prompt (``$ sudo salt 'web*' ...``): no secret's name.
_PUBLIC_BEFORE = lazy(r"(?i)\bpublic[ \t]+\Z")
_COMMAND_START = lazy(r"(?m:^[ \t]*[$#%>][ \t]*(?:sudo[ \t]+)?\Z)")
_STRONG_PART = lazy(r"(?i)(?:\A|[_\-.])(?:secret|password|passwd|token|api[_\-.]?key|"
                    r"private[_\-.]?key)(?:[_\-.]|\Z)")
_LONG_HEX = lazy(r"[0-9a-fA-F]{32,}")
_KEY_PART = lazy(r"(?i)(?:\A|[_\-.])(?:account|access|secret|private|signing|master)?"
                 r"[_\-.]?key(?:[_\-.]|\Z)")
_STRONG_NAME = lazy(r"(?i)(?:pass|pwd|pw$|psk|secret|token|credential|auth|private|apikey|"
                    r"api.key|access.key|client.key|account.key|cookie|salt)")

# -- 9: encoded values ---------------------------------------------------------------------------
_ENCODED = r"(?<![A-Za-z0-9+/_\-])[A-Za-z0-9+/_\-]{16,}={0,2}(?![A-Za-z0-9+/_\-=])"
_HEXISH = lazy(r"[0-9a-fA-F\-]+")
_HEX_TAGGED = lazy(r"[0-9a-fA-F]{8,}-[A-Z]{2,4}")  # a hex id and a site code (a CDN's ray id)
_DIGEST = lazy(r"(?i)(?:sha1|sha224|sha256|sha384|sha512|md5|blake2b?)[-:]")
_VERSIONISH = lazy(r"v?\d+(?:[.\-_]\w+)*")
# The parts of an identifier built of words and a hash or version
# (``node-cache-Linux-x64-npm-<sha256>``, ``Linux-gradle-<sha256>``, ``actions/checkout@<commit>``).
_ID_SEPARATOR = lazy(r"[\-_./@]")
_ID_WORD = lazy(r"[A-Za-z]{3,}\d*")
_ID_PART = lazy(r"[0-9a-fA-F]{7,128}|v?\d[\w.]*|[A-Za-z0-9]{1,4}")
_WORDS = lazy(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_VOWEL = lazy(r"[aeiouyAEIOUY]")
_FILLER = lazy(r"([A-Za-z0-9*])\1{9,}")
_MIN_PROPAGATE = 6  # a found value this long is removed wherever else it occurs in the text


@dataclass(frozen=True, slots=True)
class _Context:
    kind: str
    pattern: str
    hints: tuple[str, ...]
    handler: Callable[[re.Match[str], str, list[str]], str | int]


# -- configured secrets --------------------------------------------------------------------------
_configured: set[str] = set()
_configured_lock = threading.Lock()
_configured_pattern: list[str] = []  # one alternation of every configured piece (or empty)


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
        pieces = set(_configured) | {p for v in _configured for p in re.findall(r"[A-Za-z0-9]{8,}",
                                                                               v)}
        _configured_pattern[:] = ["|".join(re.escape(p) for p in sorted(pieces, key=len,
                                                                        reverse=True))]
        _master.cache_clear()


def configured_secrets() -> frozenset[str]:
    """The secrets registered with :func:`register_secret`."""
    with _configured_lock:
        return frozenset(_configured)


def redact_configured(text: str) -> str:
    """``text`` with only the configured secrets (and their pieces) replaced."""
    pattern = _configured_pattern[0] if _configured_pattern else ""
    return re.sub(pattern, marker("configured-secret"), text) if pattern else text


# -- the redactor --------------------------------------------------------------------------------
def redact(text: str) -> str:
    """``text`` with every secret replaced by ``[REDACTED:<kind>]`` and ``<private>`` spans
    dropped (see the module docstring for the rules): one pass of one compiled expression over
    the text, then the values it found removed wherever else they occur."""
    if not text:
        return text
    found: list[str] = []
    out = _pass(text, found)
    values = sorted({v for v in found if len(v) >= _MIN_PROPAGATE and v in out}, key=len,
                    reverse=True)
    if values:  # (never inside a marker: a value may be a piece of a marker's word)
        out = re.sub(r"\[REDACTED:[\w\-]+\]|" + "|".join(re.escape(v) for v in values),
                     lambda m: m.group(0) if m.group(0).startswith(PREFIX) else marker("secret"),
                     out)
    return out


def _pass(text: str, found: list[str], inner: bool = False) -> str:
    lowered = text.lower()
    active = tuple(i for i, c in enumerate(_CONTEXTS)
                   if not c.hints or any(h in lowered for h in c.hints))
    pattern, names = _master(active, bool(_configured_pattern))
    out: list[str] = []
    pos = done = 0
    while (match := pattern.search(text, pos)) is not None:
        name = match.lastgroup or ""
        if name == "configured":
            result: str | int = marker("configured-secret")
        elif inner and _CONTEXTS[names[name]].kind == "api-key":
            result = match.start() + 1
        else:
            result = _CONTEXTS[names[name]].handler(match, name + "_", found)
        if isinstance(result, int):  # declined: scan on from there (inside the match)
            pos = max(result, match.start() + 1)
            continue
        out += [text[done:match.start()], result]
        pos = done = match.end()
    out.append(text[done:])
    return "".join(out)


def _inner(text: str, found: list[str]) -> str:
    """``text`` (a part of a match the match does not replace) through the same pass."""
    return _pass(text, found, inner=True) if text else text


# One compiled expression per set of contexts a text can hold (about 20 KB each); a few hundred
# sets cover the texts of a project's sessions, and a set compiled again costs 5-35 ms.
@functools.lru_cache(maxsize=1024)
def _master(active: tuple[int, ...], configured: bool) -> tuple[re.Pattern[str], dict[str, int]]:
    """One expression of the contexts ``active``: each an outer group ``c<i>`` whose inner
    groups are renamed ``c<i>_<name>`` (the configured secrets first, when there are some)."""
    parts: list[str] = []
    if configured and _configured_pattern:
        parts.append(f"(?P<configured>{_configured_pattern[0]})")
    names: dict[str, int] = {}
    for i in active:
        prefix = f"c{i}"
        body = re.sub(r"\(\?P<(\w+)>", rf"(?P<{prefix}_\1>", _CONTEXTS[i].pattern)
        body = re.sub(r"\(\?P=(\w+)\)", rf"(?P={prefix}_\1)", body)
        body = re.sub(r"\(\?\((\w+)\)", rf"(?({prefix}_\1)", body)  # a conditional on a group
        parts.append(f"(?P<{prefix}>{body})")
        names[prefix] = i
    return re.compile("|".join(parts) or r"(?!x)x"), names


def _replace_group(kind: str, judge: Callable[[str], bool] | None = None
                   ) -> Callable[[re.Match[str], str, list[str]], str | int]:
    """A handler: the match with its ``s`` group replaced (the whole match when it has none);
    the rest of the match goes through the pass again. A reference or a placeholder where the
    value stands is declined (the scan goes on inside the match)."""

    def handler(match: re.Match[str], prefix: str, found: list[str]) -> str | int:
        whole = match.group(0)
        group = prefix + "s"
        if group not in match.re.groupindex or match.group(group) is None:
            if whole.startswith(PREFIX):
                return whole
            if _FILLER.search(whole):
                return match.start() + 1  # a documentation's placeholder in the format
            found.append(whole)
            return marker(kind)
        value = match.group(group)
        if value.startswith(PREFIX) or _not_a_value(value.strip("'\"")) \
                or (judge is not None and not judge(value)):
            return match.start() + 1
        base = match.start()
        start, end = match.span(group)
        found.append(value.strip("'\""))
        return (_inner(whole[: start - base], found) + marker(kind)
                + _inner(whole[end - base:], found))

    return handler


def _drop(match: re.Match[str], prefix: str, found: list[str]) -> str | int:
    return ""


def _printed(match: re.Match[str], prefix: str, found: list[str]) -> str | int:
    """A secret-printing command's output with the secret in it replaced."""
    start = match.start(prefix + "s") - match.start()
    whole = match.group(0)
    output = _printed_secret(whole[start:], found)
    return match.start() + 1 if output is None else whole[:start] + output


def _printed_secret(output: str, found: list[str]) -> str | None:
    """``output`` of a secret-printing command with its secret replaced: the first line of at
    most two words whose last word is 8+ characters and no path or URL (the value, or a scheme
    and the value: ``FlyV1 fm2_...``); a warning or a label above it has more words, and
    ``pass``'s lines after the password are its metadata. None when no line qualifies."""
    lines = output.split("\n")
    for i, line in enumerate(lines):
        words = line.split()
        if 1 <= len(words) <= 2 and len(words[-1]) >= 8 and "://" not in words[-1] \
                and not words[-1].startswith(("/", "~/", "./", PREFIX)) \
                and not words[-1].endswith(":"):
            value = words[-1]
            found.append(value)
            lines[i] = line.replace(value, marker("secret"))
            return "\n".join(lines)
    return None


_LABEL_LINE = lazy(r"(?i)\b(?:password|passphrase|token|secret|api[ _\-]?key)\b[^\n]*:\Z")


def _labelled_below(match: re.Match[str], prefix: str, found: list[str]) -> str | int:
    """A value alone on its line under a label line that names a secret and ends in a colon
    (``Password for the elastic user (...):``): replaced when it looks like a token or a
    password."""
    line_start = match.string.rfind("\n", 0, match.start()) + 1
    label = match.string[line_start:match.start()].rstrip()
    value = match.group(prefix + "s")
    if not _LABEL_LINE.search(label) or value.startswith(PREFIX) or _not_a_value(value) \
            or not (_token_shaped(value) or _password_shaped(value)):
        return match.start() + 1
    found.append(value)
    start = match.start(prefix + "s") - match.start()
    return match.group(0)[:start] + marker("secret") + match.group(0)[start + len(value):]


def _keep(match: re.Match[str], prefix: str, found: list[str]) -> str | int:
    return match.group(0)


def _named_pair(match: re.Match[str], prefix: str, found: list[str]) -> str | int:
    """A name and its value written apart (:data:`_PAIRS`): the value replaced when the name
    holds a secret by the assignment rule; else the scan goes on inside the match."""
    name, value = match.group(prefix + "name"), match.group(prefix + "s")
    bare = value.strip("'\"")
    named = _NAME_END.search(name) and _is_secret_value(name, bare, True)
    # a secret's part inside a longer name (``...account.key.<account>.dfs.core.windows.net``):
    # the value counts by its shape
    inside = (_STRONG_PART.search(name) or _KEY_PART.search(name)) \
        and not _IDENTITY_NAME.search(name) and _key_material(bare)
    if not ((named or inside) and not _REFERENCE_NAME.search(name)
            and not _PUBLIC_NAME.search(name)):
        return match.start() + 1
    start, end = match.span(prefix + "s")
    whole, base = match.group(0), match.start()
    found.append(bare)
    kind = "password" if re.search(r"(?i)pass|pwd", name) else "secret"
    quote = value[0] if value[:1] in "'\"" and value[-1:] == value[0] and len(value) > 1 else ""
    return whole[: start - base] + quote + marker(kind) + quote + whole[end - base:]


def _assignment(match: re.Match[str], prefix: str, found: list[str]) -> str | int:
    def g(name: str) -> str | None:
        return match.group(prefix + name)

    name = g("name") or ""
    if name.endswith("]"):  # an indexed name (``config[secret]``, ``params[password]``)
        name = name[name.index("[") + 1:-1]
    quoted = g("qv") is not None
    value = (g("qv") if quoted else g("v")) or ""
    group = prefix + ("qv" if quoted else "v")
    start, end = match.span(group)
    base = match.start()
    whole = match.group(0)
    head, tail = whole[: start - base], whole[end - base:]
    if value.startswith(PREFIX):
        return end
    if g("sep") == ":" and not quoted and not g("q") and _NAMESPACE_PART.fullmatch(value):
        return end  # ``credentials:show``, ``db:migrate``: a namespaced command, not a mapping
        # (YAML puts a blank after a mapping's colon; JSON quotes its strings)
    if _ENVELOPE.fullmatch(value.strip()) or _ENVELOPE_OPEN.match(value.strip()):
        return start  # ciphertext in its tool's envelope: kept whole by its own context
    if (g("sep") or "").strip() == ":" and _COORDINATE.fullmatch(f"{name}:{value}"):
        return end
    if (g("sep") or "").strip() == ":" and _LABEL_NAME.fullmatch(name):
        return start
    before = match.string[max(0, base - 40):base]
    if _PUBLIC_NAME.search(name) or _PUBLIC_BEFORE.search(before):
        return start  # public by its name; the value may still hold a secret (a URL's password)
    if not (g("sep") or "").strip() and _COMMAND_START.search(before):
        return start  # a command's first word at a prompt (``salt 'web*' ...``): no name
    named = bool(_NAME_END.search(name)) and not _REFERENCE_NAME.search(name) \
        and _is_secret_value(name, value, quoted, quoted and bool((g("sep") or "").strip()))
    # A secret word inside the name (``secret_key_base``, ``api_token_v2``): its value counts by
    # its shape (key material, or a long hexadecimal key as Rails and Django generate them).
    named = named or bool(_STRONG_PART.search(name)) and not _IDENTITY_NAME.search(name) \
        and (_key_material(value) or bool(_LONG_HEX.fullmatch(value.strip())))
    # A value's shape alone makes it a secret only after a real separator (``=``, ``:``), not
    # after a blank (``... up to date with 'origin/x'`` is prose), and not under a name that
    # says it identifies.
    shaped = bool((g("sep") or "").strip()) and not _IDENTITY_NAME.search(name) \
        and not _self_typed(name, value) and _key_material(value)
    if named or shaped or (_AUTH_NAME.search(name) and _credential_pair(value)):
        found.append(value)
        kind = "private-key" if "private" in name.lower() or "client" in name.lower() and \
            "key" in name.lower() else "password" if re.search(r"(?i)pass|pwd", name) else \
            "secret"
        return head + marker(kind) + tail
    # Not a secret by its name or shape: what it holds may still be one (a URL's password, a
    # flag): the scan goes on at the value.
    return start


def _encoded(match: re.Match[str], prefix: str, found: list[str]) -> str | int:
    token = match.group(0)
    if token.startswith(("sha1-", "sha256-", "sha384-", "sha512-")) or len(token) > 4096:
        return match.start() + 1  # a subresource-integrity digest (package-lock.json)
    decoded = _decoded_text(token)
    if decoded is None:
        return match.start() + 1  # not encoded text: other contexts may still match inside
    if "PRIVATE KEY" in decoded:
        found.append(token)
        return marker("private-key")
    if len(decoded) >= 6 and _pass(decoded, []) != decoded:
        found.append(token)
        return marker("encoded-secret")
    return match.start() + 1


def _credential_pair(value: str) -> bool:
    """Whether ``value`` is base64 of a ``user:password`` pair (RFC 7617)."""
    decoded = _decoded_text(value.strip()) if len(value.strip()) >= 8 else None
    return decoded is not None and _PAIR.fullmatch(decoded.strip()) is not None


def _is_secret_value(name: str, value: str, quoted: bool, literal: bool | None = None) -> bool:
    """Whether ``value``, assigned to the secret-named ``name``, is a secret's value: not a
    reference, placeholder, type or code. ``literal``: the value is a quoted string after a
    real separator (``=``, ``:``), so brackets in it are characters, not code (by default, as
    ``quoted``)."""
    literal = quoted if literal is None else literal
    value = value.strip()
    if len(value) < 3 or value.startswith(PREFIX) or _not_a_value(value):
        return False
    if quoted and _SUBSTITUTION.search(value):
        return False  # a shell or template substitution: the value is elsewhere
    if (not literal or " " in value) and (any(c in value for c in "()[]")
                                         or value.endswith(("{", ","))):
        return False  # code: a call, an index, a literal opening (a quoted word is a literal)
    if not quoted and _CODE_REF.fullmatch(value) and not any(c.isdigit() for c in value):
        return False  # ``token = self.token``, ``key: value.name``
    if not quoted and _CAMEL_CASE.fullmatch(value):
        return False  # a variable (``Token: apiToken`` in a struct literal), not a literal
    if _STRONG_NAME.search(name):
        return True
    if _composite_id(value):
        return False  # words joined to a hash or a version: a cache key, an artifact, a pin
    # A name that only ends in "key" (``primary_key``, ``sort key``, ``key=lambda``): the value
    # must look like one (a digit, or long, and not a plain word or identifier).
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value) and not re.search(r"\d", value):
        return len(value) >= 20 and _key_material(value)
    return bool(re.search(r"\d", value)) and len(value) >= 8 or len(value) >= 20


def _self_typed(name: str, value: str) -> bool:
    """Whether ``value`` carries its type as a prefix that abbreviates ``name`` (``organization:
    "org-..."``, ``project: "proj_..."``, ``customer = "cus_..."``): an object's id, as APIs
    that prefix their ids write them."""
    prefix = re.match(r"([A-Za-z]{2,8})[-_]", value)
    bare = re.sub(r"[^a-z]", "", name.lower().rsplit(".", 1)[-1])
    return prefix is not None and bare.startswith(prefix.group(1).lower())


def _composite_id(value: str) -> bool:
    """Whether ``value`` is an identifier built of two or more words joined (``-``, ``_``, ``.``,
    ``/``, ``@``) to nothing but short tokens, versions and hex digests: a cache key, an
    artifact's name, a pinned action (``actions/checkout@<commit>``). Key material has no words
    for parts."""
    parts = _ID_SEPARATOR.split(value)
    words = sum(1 for p in parts if _ID_WORD.fullmatch(p))
    return words >= 2 and all(_ID_WORD.fullmatch(p) or _ID_PART.fullmatch(p) for p in parts)


def _token_shaped(value: str) -> bool:
    """Whether a value named a secret in prose looks like one: key material, a vendor's token (a
    short prefix, a separator, a random or long hexadecimal body) or 32+ hexadecimal digits;
    not an identifier of words, a path, a URL or a version."""
    value = value.rstrip(".")
    if _composite_id(value) or _not_a_value(value) or _VERSIONISH.fullmatch(value) \
            or "/" in value and "=" not in value and not _key_material(value):
        return False
    if re.fullmatch(r"[0-9a-fA-F]{32,}", value) or _key_material(value):
        return True
    prefixed = re.fullmatch(r"[A-Za-z][A-Za-z0-9]{1,15}(?:[_\-][A-Za-z0-9]{1,15}){0,2}[_\-]+"
                            r"(?P<body>[A-Za-z0-9_\-+/=]{16,})", value)
    body = prefixed.group("body") if prefixed else ""
    return bool(body) and (_random_run(body) or bool(re.fullmatch(r"[0-9a-fA-F\-]{24,}\w?",
                                                                  body)))


def _password_shaped(value: str) -> bool:
    """Whether a value after a keyword that may also start prose (``password X``, ``community
    X``) looks like a password rather than a word or a name: 6+ characters without blanks, a
    digit or a symbol other than an identifier's joiners (``-``, ``_``, ``.``) and at least two
    character classes; not a reference, placeholder, path, URL, version or word-joined id."""
    value = value.strip("'\"")
    if len(value) < 6 or any(c.isspace() for c in value) or _not_a_value(value) \
            or value.startswith(("~", "$", "<", "-", "%")) or "/" in value \
            or _VERSIONISH.fullmatch(value) or _composite_id(value):
        return False
    symbol = any(not c.isalnum() and c not in "-_." for c in value)
    digit = any(c.isdigit() for c in value)
    classes = sum((any(c.isupper() for c in value), any(c.islower() for c in value), digit,
                   symbol))
    return (digit or symbol) and classes >= 2


def _key_shaped(value: str) -> bool:
    """Whether a value given to an option named for a key is one: key material, or 64+
    hexadecimal digits (``kubeadm join --certificate-key``)."""
    value = value.strip("'\"")
    return _key_material(value) or bool(re.fullmatch(r"[0-9a-fA-F]{64,}", value))


def _capability(value: str) -> bool:
    """Whether a webhook URL's path segment is its capability token (random, or 24+ hex)."""
    return _random_run(value) or bool(re.fullmatch(r"[0-9a-fA-F]{24,}", value))


def _not_a_value(value: str) -> bool:
    """Whether ``value`` stands where a secret would but is none: a reference to one, a
    placeholder or mask, a type or literal (``_NOT_A_VALUE``), ciphertext in its envelope, or a
    documentation's filler (``hf_xxxxxxxx...``, ``AKIAXXXXXXXXXXXXXXXX``: ten or more of one
    character in a row, which no random value has)."""
    return bool(_NOT_A_VALUE.fullmatch(value) or _ENVELOPE.fullmatch(value)
                or _FILLER.search(value))


def _key_material(value: str) -> bool:
    """Whether an assigned value is key material: 16+ characters of a key alphabet, random
    (:func:`_random_run`; for a value with slashes, some segment of it), not an identity (a path
    or a ref made of words, a hexadecimal hash or id, a UUID, a version, a digest), and not
    base64 of readable text."""
    token = value.strip().rstrip("=")
    n = len(token)
    if n < 16 or n > 512 or not re.fullmatch(r"[A-Za-z0-9+/_\-.~!@#$%^&*]+", token):
        return False
    if _HEXISH.fullmatch(token) or _VERSIONISH.fullmatch(token) or token.count(".") >= 2 \
            or _DIGEST.match(token) or _HEX_TAGGED.fullmatch(token) \
            or _composite_id(token):
        return False
    if _file_content(token):
        return False
    if "/" in token:  # a path or a ref when no segment of it is random
        return any(_random_run(part) for part in token.split("/")) \
            and _decoded_text(value.strip()) is None
    if not _random_run(token):
        return False
    return _decoded_text(value.strip()) is None  # base64 of text: the encoded rule judges it


# The magic numbers of file formats a transcript embeds in base64 (a data URI, a JSON field):
# PNG, JPEG, GIF, PDF, ZIP (and so JAR, DOCX, APK), gzip, WebP/WAV (RIFF), WebAssembly.
_MAGIC = (b"\x89PNG", b"\xff\xd8\xff", b"GIF8", b"%PDF", b"PK\x03\x04", b"\x1f\x8b", b"RIFF",
          b"\x00asm")


def _file_content(token: str) -> bool:
    """Whether base64 ``token`` starts with a file format's magic number (file content, not
    key material)."""
    try:
        head = base64.b64decode(token[:16], validate=True)
    except (binascii.Error, ValueError):
        return False
    return head.startswith(_MAGIC)


def _random_run(token: str) -> bool:
    """Whether a run of characters is random rather than words, an identifier or a number:
    12+ characters, two or more character classes spread evenly (entropy), and less than
    half of its letters in pronounceable words."""
    n = len(token)
    if n < 12 or _HEXISH.fullmatch(token):
        return False
    classes = sum((any(c.isupper() for c in token), any(c.islower() for c in token),
                   any(c.isdigit() for c in token)))
    if classes < 2:
        return False
    counts: dict[str, int] = {}
    for c in token:
        counts[c] = counts.get(c, 0) + 1
    entropy = -sum(k / n * math.log2(k / n) for k in counts.values())
    if entropy < min(3.5, math.log2(n) - 0.8):
        return False
    letters = sum(c.isalpha() for c in token)
    wordy = sum(len(w) for w in _WORDS.findall(token) if len(w) >= 4 and w.isalpha()
                and _VOWEL.search(w[1:]) and not re.search(r"[^aeiouy]{4}", w.lower()))
    return not (letters and wordy / letters >= 0.5)


def _decoded_text(token: str) -> str | None:
    """The text ``token`` encodes in base64 (standard or URL-safe), or None when it does not
    decode to mostly printable text."""
    raw = token.rstrip("=")
    if len(raw) % 4 == 1:
        return None
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


def _contexts() -> tuple[_Context, ...]:
    out = [_Context("envelope", _ENVELOPE.pattern, ("[", "{", "$ansible_vault"), _keep)]
    judges = {"password-shaped": _password_shaped, "token-shaped": _token_shaped,
              "capability": _capability,
              "key-shaped": _key_shaped}
    for kind, pattern, hints, *judge in _FORMATS:
        handler = _drop if kind.startswith("private") and kind != "private-key" else \
            _printed if kind == "printed-secret" else \
            _labelled_below if kind == "labelled-below" else \
            _replace_group(kind, judges[judge[0]] if judge else None)
        # (a one-character hint is in most texts: it would only multiply the expressions)
        gate = () if all(len(h) == 1 for h in hints) else tuple(h.lower() for h in hints)
        out.append(_Context(kind, pattern, gate, handler))
    out += [_Context("pair", pattern, _PAIR_HINTS, _named_pair) for pattern in _PAIRS]
    out.append(_Context("assignment", _ASSIGN, (), _assignment))
    out.append(_Context("encoded", _ENCODED, (), _encoded))
    return tuple(out)


_CONTEXTS = _contexts()


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
    steps = tuple(replace(s, action=redact(s.action),
                          observation=redact(_output_of(s.action, s.observation)),
                          thought=redact(s.thought) if s.thought is not None else None)
                  for s in episode.steps)
    return replace(episode, task=redact(episode.task), env=redact(episode.env), steps=steps,
                   meta=redact_value(dict(episode.meta)))


def _output_of(command: str, output: str) -> str:
    """``output`` of ``command`` with the secret in it replaced when the command is documented to
    print one (:data:`_SECRET_PRINTERS`: a step's action and its observation are apart)."""
    if not output or not _PRINTS_SECRET.search(command):
        return output
    printed = _printed_secret(output, [])
    return output if printed is None else printed


def redact_experience(experience: Experience) -> Experience:
    """``experience`` with every text redacted."""
    return experience_from_dict(redact_value(experience_to_dict(experience)))


register_redactor(redact)
