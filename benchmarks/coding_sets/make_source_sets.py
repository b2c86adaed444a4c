"""Generate the source-format sets (``source_secrets.jsonl``, ``source_identities.jsonl``): a
third secret and identity set, written apart from the first two and from the redactor's rules
(issue 44, turn 7), before any rule was read or changed against it.

The first set (``make_secrets.py``) lists secret shapes seen in sessions; the second
(``make_grammar_sets.py``) follows the option grammars of credential-taking command-line tools.
This one starts from the *documented formats of the text a coding agent's transcript holds*,
broader than command-line options:

* files the agent reads or writes: ``.env`` (with ``export``, quotes, comments), docker compose
  ``environment:`` (list and map forms), kubeconfig users and Kubernetes ``Secret`` manifests,
  ``.npmrc`` / ``.yarnrc.yml`` / ``.pypirc`` / ``pip.conf`` / ``.netrc`` / ``.pgpass`` /
  ``.git-credentials`` / docker ``config.json`` / Maven ``settings.xml`` / ``gradle.properties``
  / composer ``auth.json`` / cargo ``credentials.toml`` / gem ``credentials``, application config
  in JSON, YAML, TOML, INI and Java properties, framework settings (Django, Rails, Spring,
  ASP.NET ``appsettings.json``), Terraform ``.tfvars``, Ansible vars, Helm values, source code
  that hard-codes a client key;
* connection strings: JDBC (MySQL, PostgreSQL, SQL Server, Oracle thin), ODBC and ADO.NET,
  SQLAlchemy URLs, MongoDB (``mongodb+srv``), Redis (``redis://:pw@``, ``rediss://``), AMQP,
  Kafka SASL JAAS, SMTP/FTP URLs, Azure Storage connection strings and SAS query strings;
* git remotes with credentials in the URL (``git clone``, ``git remote -v`` output);
* HTTP: request headers in ``curl -H``, HTTPie and code, verbose ``curl -v`` logs
  (``> Authorization:``), cookies, query-string keys;
* cloud CLIs and their outputs: ``aws configure set``, ``~/.aws/credentials``, STS JSON, GCP
  service-account keys, ``gcloud auth print-access-token``, Azure service principals;
* tool output lines that echo a secret: ``printenv``, ``docker inspect`` env, ``vault login``,
  ``terraform output``, ``kubectl get secret -o yaml``, ``npm token create``;
* PEM private key blocks (PKCS#1, SEC1, PKCS#8, encrypted PKCS#8, OpenSSH, PGP), raw and
  JSON-escaped; JWTs (RFC 7519) in headers, cookies and logs;
* vendor token formats by their documented prefix and length (GitHub with its CRC32 checksum,
  GitLab, Slack, Stripe, OpenAI, Anthropic, Google, npm, PyPI, SendGrid, Twilio, Shopify,
  DigitalOcean, Hugging Face, Databricks, HashiCorp Vault, Grafana, Sentry, Postman, Linear,
  New Relic), in prose, commands and config.

The identity set is what the same transcripts hold that must pass untouched: project roots
and file paths on Linux, macOS, Windows, WSL and UNC (some named ``secrets``/``token``/``auth``),
tracebacks and stack frames, agent session files (Claude Code project folders, Codex rollouts),
branch names, commit hashes and git output, UUIDs used as ids (request ids, Kubernetes uids,
Azure subscription/tenant/client ids, session ids), test ids of ten runners, image digests and
``sha256sum`` lines, lockfile integrity fields (npm, yarn, poetry, pip ``--hash``, go.sum,
Cargo.lock, SwiftPM), package versions, URLs without credentials (and with a user name only),
references that carry no value (``${VAR}``, ``$(cmd)``, ``${{ secrets.X }}``, Helm templates,
``process.env.X``, ``os.environ[...]``, ``secretKeyRef``, ``*_FILE`` paths, placeholders), config
keys that name a credential but hold none (``token_ttl: 3600``), tool output without a secret
(``Login Succeeded``, ``ssh-keygen`` fingerprints, ``aws sts get-caller-identity``), public keys
and certificates, and trace/request headers.

Every secret row lists each exact substring that must disappear (``secrets``) and the context
that must stay (``keep``). Values are fake and drawn from a seeded generator.

Split: by source family, half and half *within each family* (ordered by a salted hash of the
row id), so every family has rows in both ``dev`` and ``test``: test has the shapes dev has,
with fresh values. The split was committed with the set, before any rule was looked at.

    python benchmarks/coding_sets/make_source_sets.py   # rewrites both files
"""

# ruff: noqa: E501  (a data table: one format per line reads best)

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import random
import string
import urllib.parse
import uuid
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
RNG = random.Random(47_007)
AN = string.ascii_letters + string.digits
LOW = string.ascii_lowercase + string.digits
HEX = "0123456789abcdef"
B64 = AN + "+/"
B64URL = AN + "-_"

HOSTS = ["db.prod.internal", "10.20.1.15", "postgres-0.postgres.data.svc.cluster.local", "mysql.eu-west-1.rds.amazonaws.com",
         "localhost", "redis-master.cache.svc", "rabbitmq.mq.internal", "kafka-1.stream.acme.net", "sql01.corp.acme.local",
         "cluster0.ab1cd.mongodb.net", "smtp.mailgun.org", "ftp.partner.example.com", "172.31.8.44", "es-logs.acme.io"]
USERS = ["app", "api_rw", "deploy", "svc-billing", "etl", "grafana", "root", "admin", "ci", "sa", "reporting_ro", "gitlab-ci-token"]
DBS = ["payments", "app_production", "ledger", "events", "users_v3", "warehouse", "tenants"]
PROJECTS = ["payments-api", "SecretsRotator", "auth-service", "token-bridge", "web", "PasswordVault.Web", "mono", "infra-live",
            "api-keys-admin", "ledger", "dotfiles", "KeyCloakThemes", "jwt-playground", "shop"]
ORGS = ["acme", "globex-corp", "initech", "umbrella-labs", "hooli"]


def family_split(rows: list[dict[str, object]], salt: str) -> None:
    """Set each row's ``split``: within its family, rows ordered by a salted hash of their id,
    the first half ``dev``, the rest ``test`` (an odd family's middle row goes by the hash of
    the family's name)."""
    families: dict[str, list[dict[str, object]]] = {}
    for r in rows:
        families.setdefault(str(r["family"]), []).append(r)
    for family, members in families.items():
        members.sort(key=lambda r: hashlib.sha256(f"{salt}:{r['id']}".encode()).hexdigest())
        extra = len(members) % 2 * (hashlib.sha256(f"{salt}:{family}".encode()).digest()[0] % 2)
        for i, r in enumerate(members):
            r["split"] = "dev" if i < len(members) // 2 + extra else "test"


def identity_rows_of(families: list[tuple[str, Callable[[], list[Callable[[], str]]], int]],
                     prefix: str, width: int, salt: str) -> list[dict[str, object]]:
    """Identity rows of a set written apart: each family's forms called in turn until it holds
    ``count`` distinct texts (50 tries a row at most); ids ``<prefix><n>`` (``width`` digits),
    split within families (:func:`family_split`). Shared by the fourth to sixth sets."""
    out: list[dict[str, object]] = []
    seen: set[str] = set()
    for family, forms, count in families:
        made = tries = 0
        while made < count and tries < 50 * count:
            templates = forms()
            text = templates[tries % len(templates)]()
            tries += 1
            if text in seen:
                continue
            seen.add(text)
            out.append({"id": f"{prefix}{len(out):0{width}d}", "family": family, "text": text})
            made += 1
    family_split(out, salt)
    return out


def write_sets(sets: dict[str, list[dict[str, object]]]) -> None:
    """Write each set as JSON lines next to this script."""
    for name, data in sets.items():
        (HERE / name).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in data),
                                 encoding="utf-8")
        print(f"{name}: {len(data)} rows")


# -- values ----------------------------------------------------------------------------------
def run(n: int, alphabet: str = AN) -> str:
    return "".join(RNG.choice(alphabet) for _ in range(n))


def password() -> str:
    """A password as people and generators make them (no quote, backslash or blank, so that it
    appears verbatim in JSON, YAML and INI values)."""
    shape = RNG.randrange(6)
    if shape == 0:
        return RNG.choice(["Sunset", "tiger", "Orchid", "falcon", "Harbor", "mango", "Nimbus", "cobalt"]) + RNG.choice("!#%&@$*") + str(RNG.randrange(10, 9999)) + RNG.choice(["", "!", "x", "Q"])
    if shape == 1:
        return run(RNG.randrange(14, 30))
    if shape == 2:
        return run(RNG.randrange(16, 26), AN + "!#%^&*()-_=+[]{}<>.?~")
    if shape == 3:
        return run(RNG.randrange(20, 33), LOW)
    if shape == 4:
        return "-".join(run(6, string.ascii_lowercase) for _ in range(3)) + str(RNG.randrange(0, 9))
    return run(24, B64) + "=="


def url_password() -> str:
    """A password as it stands in URL userinfo: percent-encoded where RFC 3986 requires."""
    return urllib.parse.quote(password(), safe="")


def uid() -> str:
    """A random (version 4) UUID."""
    return str(uuid.UUID(int=RNG.getrandbits(128), version=4))


def hexrun(n: int) -> str:
    return run(n, HEX)


def b64bytes(n: int) -> str:
    return base64.b64encode(RNG.randbytes(n)).decode()


def b62(n: int) -> str:
    chars = string.digits + string.ascii_letters
    out = ""
    while n:
        n, r = divmod(n, 62)
        out = chars[r] + out
    return out or "0"


def github_token(prefix: str) -> str:
    """GitHub's documented token format: prefix, 30 random base62 characters, and a 6-character
    base62 CRC32 checksum of them."""
    body = run(30)
    return prefix + body + b62(binascii.crc32(body.encode())).rjust(6, "0")


def jwt() -> str:
    header = {"alg": RNG.choice(["HS256", "RS256", "ES256"]), "typ": "JWT"}
    payload = {"sub": str(RNG.randrange(1000, 99999)), "iat": 1_733_400_000 + RNG.randrange(10**6),
               "exp": 1_733_500_000 + RNG.randrange(10**6), "scope": RNG.choice(["read", "admin", "api write"])}

    def enc(obj: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj, separators=(",", ":")).encode()).decode().rstrip("=")
    return f"{enc(header)}.{enc(payload)}.{run(RNG.choice([43, 86]), B64URL)}"


VENDOR: dict[str, Callable[[], str]] = {
    "github-classic": lambda: github_token("ghp_"),
    "github-oauth": lambda: github_token("gho_"),
    "github-app": lambda: github_token("ghs_"),
    "github-fine": lambda: "github_pat_" + run(22) + "_" + run(59),
    "gitlab": lambda: "glpat-" + run(20, B64URL),
    "slack-bot": lambda: f"xoxb-{RNG.randrange(10**11, 10**12)}-{RNG.randrange(10**12, 10**13)}-{run(24)}",
    "slack-user": lambda: f"xoxp-{RNG.randrange(10**11, 10**12)}-{RNG.randrange(10**11, 10**12)}-{RNG.randrange(10**12, 10**13)}-{hexrun(32)}",
    "stripe": lambda: RNG.choice(["sk_live_", "sk_test_", "rk_live_"]) + run(RNG.choice([24, 99])),
    "stripe-webhook": lambda: "whsec_" + run(32),
    "openai": lambda: "sk-proj-" + run(RNG.choice([48, 120]), B64URL),
    "anthropic": lambda: "sk-ant-api03-" + run(93, B64URL) + "AA",
    "google": lambda: "AIza" + run(35, B64URL),
    "npm": lambda: "npm_" + run(36),
    "pypi": lambda: "pypi-AgEIcHlwaS5vcmc" + run(RNG.choice([50, 140]), B64URL),
    "sendgrid": lambda: "SG." + run(22, B64URL) + "." + run(43, B64URL),
    "twilio": lambda: "SK" + hexrun(32),
    "shopify": lambda: RNG.choice(["shpat_", "shpss_"]) + hexrun(32),
    "digitalocean": lambda: "dop_v1_" + hexrun(64),
    "huggingface": lambda: "hf_" + run(34, string.ascii_letters),
    "databricks": lambda: "dapi" + hexrun(32),
    "vault": lambda: "hvs." + run(24),
    "grafana": lambda: "glsa_" + run(32) + "_" + hexrun(8),
    "sentry": lambda: "sntrys_" + run(60, B64URL),
    "postman": lambda: "PMAK-" + hexrun(24) + "-" + hexrun(34),
    "linear": lambda: "lin_api_" + run(40),
    "newrelic": lambda: "NRAK-" + run(27, string.ascii_uppercase + string.digits),
    "mailgun": lambda: "key-" + hexrun(32),
    "doppler": lambda: "dp.st.prd." + run(40),
}


def vendor() -> tuple[str, str]:
    name = RNG.choice(sorted(VENDOR))
    return name, VENDOR[name]()


def pem(kind: str) -> tuple[str, list[str]]:
    """A PEM private key block (RFC 7468) and its body lines (each a secret)."""
    prefix = {"RSA PRIVATE KEY": "MIIEpAIBAAKCAQEA", "EC PRIVATE KEY": "MHcCAQEEI", "PRIVATE KEY": "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
              "ENCRYPTED PRIVATE KEY": "MIIFHDBOBgkqhkiG9w0BBQ0wQTApBgkqhkiG9w0BBQwwHAQI",
              "OPENSSH PRIVATE KEY": "b3BlbnNzaC1rZXktdjEAAAAA", "PGP PRIVATE KEY BLOCK": "lQVYBGV"}[kind]
    n = {"EC PRIVATE KEY": 3, "OPENSSH PRIVATE KEY": 7}.get(kind, RNG.randrange(8, 14))
    body = prefix + run(64 * n - len(prefix) - RNG.randrange(0, 40), B64)
    lines = [body[i:i + 64] for i in range(0, len(body), 64)]
    if kind == "PGP PRIVATE KEY BLOCK":
        lines = ["", *lines, "=" + run(4, B64)]
    block = "\n".join([f"-----BEGIN {kind}-----", *lines, f"-----END {kind}-----"])
    return block, [line for line in lines if len(line) > 8]


def one(*options: Callable[[], tuple[str, list[str], list[str]]]) -> tuple[str, list[str], list[str]]:
    return RNG.choice(options)()


Item = tuple[str, list[str], list[str]]


# -- secret families -----------------------------------------------------------------------------
CRED_KEYS = ["DB_PASSWORD", "DATABASE_PASSWORD", "POSTGRES_PASSWORD", "MYSQL_ROOT_PASSWORD", "REDIS_PASS", "SMTP_PASSWORD",
             "API_KEY", "SECRET_KEY", "APP_SECRET", "JWT_SECRET", "SESSION_SECRET", "CLIENT_SECRET", "AUTH_TOKEN",
             "ACCESS_TOKEN", "ENCRYPTION_KEY", "WEBHOOK_SECRET", "MAIL_PASSWORD", "LDAP_BIND_PASSWORD",
             "RABBITMQ_DEFAULT_PASS", "MINIO_ROOT_PASSWORD", "KEYCLOAK_ADMIN_PASSWORD", "NEXTAUTH_SECRET",
             "OAUTH_CLIENT_SECRET", "PRIVATE_API_KEY", "S3_SECRET_KEY", "ADMIN_PASS", "BASIC_AUTH_PASSWORD"]


def s_dotenv() -> Item:
    key, val = RNG.choice(CRED_KEYS), password()
    quote = RNG.choice(["", "'", '"'])
    other = RNG.choice([f"APP_ENV={RNG.choice(['production', 'staging'])}", f"PORT={RNG.randrange(3000, 9000)}", f"DB_HOST={RNG.choice(HOSTS)}", "LOG_LEVEL=info"])
    line = f"{RNG.choice(['', '', 'export '])}{key}={quote}{val}{quote}"
    if RNG.random() < 0.3:
        line += RNG.choice(["  # rotated in March", " # prod only"])
    lines = [other, line] if RNG.random() < 0.5 else [line, other]
    keep = [other.split("=")[0], key]
    if RNG.random() < 0.3:  # a uuid-shaped key where the name says credential
        k2, v2 = RNG.choice(["HEROKU_API_KEY", "NEW_RELIC_LICENSE_KEY", "CLIENT_SECRET"]), uid()
        lines.append(f"{k2}={v2}")
        return "\n".join(lines), [val, v2], keep + [k2]
    return "\n".join(lines), [val], keep


def s_compose() -> Item:
    svc = RNG.choice(["db", "postgres", "mysql", "redis", "rabbitmq", "api", "keycloak", "minio"])
    key, val = RNG.choice(CRED_KEYS), password()
    image = RNG.choice(["postgres:16-alpine", "mysql:8.4", "bitnami/redis:7.2", "rabbitmq:3-management", "quay.io/keycloak/keycloak:25.0", "minio/minio:latest"])
    if RNG.random() < 0.5:
        env = f"      - {key}={val}\n      - TZ=Europe/Berlin"
    else:
        env = f"      {key}: {RNG.choice([val, chr(34) + val + chr(34)])}\n      TZ: UTC"
    return f"services:\n  {svc}:\n    image: {image}\n    environment:\n{env}\n    ports:\n      - \"5432:5432\"", [val], [image, key]


def s_kube() -> Item:
    form = RNG.randrange(4)
    if form == 0:
        t = jwt()
        return f"users:\n- name: ci-deployer\n  user:\n    token: {t}\ncontexts:\n- context:\n    cluster: prod-eu\n    user: ci-deployer\n  name: prod-eu", [t], ["ci-deployer", "prod-eu"]
    if form == 1:
        k = b64bytes(RNG.randrange(600, 900))
        c = b64bytes(300)
        return f"- name: kubernetes-admin\n  user:\n    client-certificate-data: {c}\n    client-key-data: {k}", [k], ["kubernetes-admin", c]
    if form == 2:
        p = password()
        return f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: db-credentials\n  namespace: {RNG.choice(['prod', 'billing'])}\ntype: Opaque\nstringData:\n  username: {RNG.choice(USERS)}\n  password: {p}", [p], ["db-credentials"]
    p = password()
    enc = base64.b64encode(p.encode()).decode()
    return f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: api-auth\ntype: Opaque\ndata:\n  {RNG.choice(['password', 'api-key', 'token', 'DB_PASSWORD'])}: {enc}", [enc], ["api-auth"]


def s_pkg_rc() -> Item:
    form = RNG.randrange(9)
    if form == 0:
        t = VENDOR["npm"]()
        return f"//registry.npmjs.org/:_authToken={t}\n@{RNG.choice(ORGS)}:registry=https://npm.pkg.github.com", [t], ["@", "npm.pkg.github.com"]
    if form == 1:
        t = github_token("ghp_")
        return f"@{RNG.choice(ORGS)}:registry=https://npm.pkg.github.com/\n//npm.pkg.github.com/:_authToken={t}\nalways-auth=true", [t], ["always-auth=true"]
    if form == 2:
        pair = base64.b64encode(f"{RNG.choice(USERS)}:{password()}".encode()).decode()
        return f"registry=https://nexus.{RNG.choice(ORGS)}.com/repository/npm-group/\n_auth={pair}\nemail=ci@example.com", [pair], ["npm-group"]
    if form == 3:
        t = VENDOR["pypi"]()
        return f"[distutils]\nindex-servers =\n    pypi\n\n[pypi]\nusername = __token__\npassword = {t}", [t], ["__token__"]
    if form == 4:
        p = url_password()
        u = RNG.choice(USERS)
        return f"[global]\nindex-url = https://{u}:{p}@pypi.{RNG.choice(ORGS)}.internal/simple\ntimeout = 60", [p], ["timeout = 60"]
    if form == 5:
        t = "npm_" + run(36)
        return f"npmRegistryServer: \"https://registry.npmjs.org\"\nnpmAuthToken: {t}\nnodeLinker: node-modules", [t], ["nodeLinker"]
    if form == 6:
        t = "cio" + run(32)
        return f"[registry]\ntoken = \"{t}\"", [t], ["[registry]"]
    if form == 7:
        t = "rubygems_" + hexrun(48)
        return f"---\n:rubygems_api_key: {t}", [t], [":rubygems_api_key:"]
    t = github_token("ghp_")
    return f"{{\n    \"github-oauth\": {{\n        \"github.com\": \"{t}\"\n    }}\n}}", [t], ["github-oauth"]


def s_netrc_like() -> Item:
    form = RNG.randrange(5)
    h, u, p = RNG.choice(HOSTS), RNG.choice(USERS), password()
    if form == 0:
        return f"machine {h}\n  login {u}\n  password {p}", [p], [h]
    if form == 1:
        v = uid()
        return f"machine api.heroku.com\n  login me@example.com\n  password {v}", [v], ["api.heroku.com"]
    if form == 2:
        db = RNG.choice(DBS)
        return f"{h}:5432:{db}:{u}:{p.replace(':', '')}", [p.replace(":", "")], [db]
    if form == 3:
        t = RNG.choice([github_token("ghp_"), "glpat-" + run(20, B64URL)])
        host = "github.com" if t.startswith("ghp_") else "gitlab.com"
        return f"https://{u}:{t}@{host}", [t], [host]
    auth = base64.b64encode(f"{u}:{p}".encode()).decode()
    reg = RNG.choice(["ghcr.io", "registry.gitlab.com", "123456789012.dkr.ecr.eu-west-1.amazonaws.com", "https://index.docker.io/v1/"])
    return f'{{\n  "auths": {{\n    "{reg}": {{\n      "auth": "{auth}"\n    }}\n  }},\n  "credsStore": "desktop"\n}}', [auth], [reg]


def s_jvm_dotnet_config() -> Item:
    form = RNG.randrange(6)
    p = password()
    if form == 0:
        return f"<server>\n  <id>ossrh</id>\n  <username>{RNG.choice(USERS)}</username>\n  <password>{p.replace('<', '').replace('>', '').replace('&', '')}</password>\n</server>", [p.replace("<", "").replace(">", "").replace("&", "")], ["<id>ossrh</id>"]
    if form == 1:
        k = RNG.choice(["ossrhPassword", "signing.password", "artifactoryPassword", "nexusPassword", "gpr.key"])
        return f"org.gradle.jvmargs=-Xmx2g\n{k}={p}", [p], [k, "org.gradle.jvmargs=-Xmx2g"]
    if form == 2:
        k = RNG.choice(["spring.datasource.password", "spring.mail.password", "spring.rabbitmq.password", "app.jwt.secret"])
        return f"spring.datasource.url=jdbc:postgresql://{RNG.choice(HOSTS)}:5432/{RNG.choice(DBS)}\n{k}={p}", [p], ["spring.datasource.url"]
    if form == 3:
        return f"spring:\n  datasource:\n    username: {RNG.choice(USERS)}\n    password: {p}\n  jpa:\n    open-in-view: false", [p], ["open-in-view: false"]
    if form == 4:
        h, u, db = RNG.choice(HOSTS), RNG.choice(USERS), RNG.choice(DBS)
        pw = p.replace(";", "")
        return f'{{\n  "ConnectionStrings": {{\n    "Default": "Server={h};Database={db};User Id={u};Password={pw};TrustServerCertificate=True"\n  }},\n  "Logging": {{ "LogLevel": {{ "Default": "Information" }} }}\n}}', [pw], [db, "TrustServerCertificate=True"]
    k = RNG.choice(["ClientSecret", "ApiKey", "SigningKey"])
    return f'"AzureAd": {{\n  "Instance": "https://login.microsoftonline.com/",\n  "TenantId": "{uid()}",\n  "ClientId": "{uid()}",\n  "{k}": "{p}"\n}}', [p], ["https://login.microsoftonline.com/"]


def s_app_config() -> Item:
    form = RNG.randrange(9)
    p = password()
    if form == 0:
        k = RNG.choice(["apiKey", "api_key", "clientSecret", "secret", "password", "accessToken", "privateKey", "authToken"])
        return f'{{\n  "service": "{RNG.choice(PROJECTS)}",\n  "{k}": "{p}",\n  "timeoutMs": 5000\n}}', [p], ['"timeoutMs": 5000']
    if form == 1:
        k = RNG.choice(["password", "secret_key", "api_token", "client_secret", "auth_token"])
        return f"[{RNG.choice(['database', 'smtp', 'upstream', 'oauth'])}]\nhost = \"{RNG.choice(HOSTS)}\"\n{k} = \"{p}\"\nport = 5432", [p], ["port = 5432"]
    if form == 2:
        k = RNG.choice(["password", "api_key", "token", "secret", "client_secret"])
        return f"upstream:\n  url: https://api.{RNG.choice(ORGS)}.com\n  {k}: \"{p}\"\n  retries: 3", [p], ["retries: 3"]
    if form == 3:
        v = "django-insecure-" + run(50, string.ascii_lowercase + string.digits + "!@#%^&*(-_=+)")
        return f"DEBUG = False\nSECRET_KEY = '{v}'\nALLOWED_HOSTS = ['*']", [v], ["ALLOWED_HOSTS"]
    if form == 4:
        v = hexrun(128)
        return f"production:\n  secret_key_base: {v}", [v], ["production:"]
    if form == 5:
        k = RNG.choice(["db_password", "admin_password", "api_token", "client_secret"])
        return f'region = "eu-west-1"\n{k} = "{p}"\ninstance_type = "t3.medium"', [p], ["instance_type"]
    if form == 6:
        k = RNG.choice(["ansible_become_password", "ansible_password", "mysql_root_password", "vault_api_token"])
        return f"---\nansible_user: deploy\n{k}: {p}", [p], ["ansible_user: deploy"]
    if form == 7:
        return f"auth:\n  enabled: true\n  rootPassword: \"{p}\"\n  replicaSetKey: \"{(k := run(32))}\"\narchitecture: replicaset", [p, k], ["architecture: replicaset"]
    h, u = RNG.choice(HOSTS), RNG.choice(USERS)
    return f"[client]\nuser={u}\npassword={p}\nhost={h}", [p], ["[client]"]


def s_code() -> Item:
    name, t = vendor()
    form = RNG.randrange(6)
    if form == 0:
        return f'client = OpenAI(api_key="{t}")', [t], ["client = OpenAI("]
    if form == 1:
        return f"const stripe = require('stripe')('{t}');", [t], ["require('stripe')"]
    if form == 2:
        return f'os.environ["API_TOKEN"] = "{t}"\nresp = requests.get(url, timeout=10)', [t], ["requests.get(url, timeout=10)"]
    if form == 3:
        return f'private static final String API_KEY = "{t}";', [t], ["private static final String"]
    if form == 4:
        return f'let token = "{t}"\nreq.Header.Set("Accept", "application/json")', [t], ["application/json"]
    return f'headers = {{"Authorization": f"Bearer {t}", "Content-Type": "application/json"}}', [t], ["Content-Type"]


def s_jdbc_dsn() -> Item:
    h, u, db = RNG.choice(HOSTS), RNG.choice(USERS), RNG.choice(DBS)
    p = password().replace(";", "").replace("&", "").replace("{", "").replace("}", "")
    form = RNG.randrange(8)
    if form == 0:
        return f"jdbc:mysql://{h}:3306/{db}?user={u}&password={urllib.parse.quote(p, safe='')}&useSSL=true", [urllib.parse.quote(p, safe="")], [db, "useSSL=true"]
    if form == 1:
        return f"jdbc:postgresql://{h}:5432/{db}?user={u}&password={urllib.parse.quote(p, safe='')}&ssl=true", [urllib.parse.quote(p, safe="")], [db]
    if form == 2:
        return f"jdbc:sqlserver://{h}:1433;databaseName={db};user={u};password={p};encrypt=true", [p], [f"databaseName={db}"]
    if form == 3:
        q = p.replace("@", "").replace("/", "")
        return f"jdbc:oracle:thin:{u}/{q}@{h}:1521/ORCLPDB1", [q], ["ORCLPDB1"]
    if form == 4:
        return f"Driver={{ODBC Driver 18 for SQL Server}};Server=tcp:{h},1433;Database={db};Uid={u};Pwd={p};Encrypt=yes;", [p], ["ODBC Driver 18 for SQL Server"]
    if form == 5:
        return f"Host={h};Port=5432;Database={db};Username={u};Password={p};SSL Mode=Require", [p], [f"Database={db}"]
    if form == 6:
        q = urllib.parse.quote(p, safe="")
        drv = RNG.choice(["postgresql+psycopg", "mysql+pymysql", "mssql+pyodbc", "postgresql+asyncpg"])
        return f'SQLALCHEMY_DATABASE_URI = "{drv}://{u}:{q}@{h}/{db}"', [q], ["SQLALCHEMY_DATABASE_URI"]
    k = RNG.choice(["DATABASE_URL", "DB_URL", "PG_DSN"])
    q = urllib.parse.quote(p, safe="")
    return f"{k}=postgres://{u}:{q}@{h}:5432/{db}?sslmode=require", [q], [k, "sslmode=require"]


def s_broker_dsn() -> Item:
    h, u = RNG.choice(HOSTS), RNG.choice(USERS)
    q = url_password()
    form = RNG.randrange(8)
    if form == 0:
        return f'MONGO_URI="mongodb+srv://{u}:{q}@cluster0.ab1cd.mongodb.net/{RNG.choice(DBS)}?retryWrites=true&w=majority"', [q], ["retryWrites=true"]
    if form == 1:
        return f"REDIS_URL=redis://:{q}@{h}:6379/0", [q], ["REDIS_URL"]
    if form == 2:
        return f"CACHE_URL=rediss://default:{q}@{h}:6380", [q], ["CACHE_URL"]
    if form == 3:
        return f"CELERY_BROKER_URL=amqp://{u}:{q}@{h}:5672/{RNG.choice(['prod', '%2F', 'jobs'])}", [q], ["CELERY_BROKER_URL"]
    if form == 4:
        p = password()
        return f'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="{u}" password="{p}";\nsecurity.protocol=SASL_SSL', [p], ["security.protocol=SASL_SSL"]
    if form == 5:
        return f"EMAIL_URL=smtp://postmaster%40mg.{RNG.choice(ORGS)}.com:{q}@smtp.mailgun.org:587", [q], ["smtp.mailgun.org:587"]
    if form == 6:
        return f"lftp -e 'mirror -R dist /www' ftp://{u}:{q}@ftp.partner.example.com", [q], ["mirror -R dist /www"]
    return f"ELASTICSEARCH_URL=https://elastic:{q}@{h}:9200", [q], [":9200"]


def s_azure_storage() -> Item:
    acct = RNG.choice(["acmeprodstore", "logsarchive01", "tfstateacme"])
    key = b64bytes(64)
    form = RNG.randrange(3)
    if form == 0:
        return f"AZURE_STORAGE_CONNECTION_STRING=DefaultEndpointsProtocol=https;AccountName={acct};AccountKey={key};EndpointSuffix=core.windows.net", [key], [acct]
    if form == 1:
        sig = urllib.parse.quote(b64bytes(32), safe="")
        return f"https://{acct}.blob.core.windows.net/backups/db.bak?sv=2022-11-02&ss=b&srt=co&sp=rl&se=2026-12-31T00:00:00Z&st=2026-12-01T00:00:00Z&spr=https&sig={sig}", [sig], [f"{acct}.blob.core.windows.net"]
    return f'[\n  {{\n    "keyName": "key1",\n    "permissions": "FULL",\n    "value": "{key}"\n  }}\n]', [key], ['"keyName": "key1"']


def s_git_remote() -> Item:
    org, repo = RNG.choice(ORGS), RNG.choice(PROJECTS)
    form = RNG.randrange(5)
    if form == 0:
        t = github_token("ghs_")
        return f"git clone https://x-access-token:{t}@github.com/{org}/{repo}.git", [t], [f"{org}/{repo}.git"]
    if form == 1:
        t = "glpat-" + run(20, B64URL)
        return f"git remote set-url origin https://oauth2:{t}@gitlab.com/{org}/{repo}.git", [t], [f"{org}/{repo}.git"]
    if form == 2:
        t = github_token("ghp_")
        return f"origin\thttps://{RNG.choice(['jdoe', 'ci-bot', 'priya'])}:{t}@github.com/{org}/{repo}.git (fetch)\norigin\thttps://{RNG.choice(['jdoe', 'ci-bot'])}:{t}@github.com/{org}/{repo}.git (push)", [t], ["(fetch)", "(push)"]
    if form == 3:
        p = url_password()
        return f"[remote \"origin\"]\n\turl = https://{RNG.choice(USERS)}:{p}@bitbucket.org/{org}/{repo}.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*", [p], ["fetch = +refs/heads/*:refs/remotes/origin/*"]
    t = "github_pat_" + run(22) + "_" + run(59)
    return f"go env -w GOPRIVATE=github.com/{org}/*\ngit config --global url.\"https://{t}@github.com/\".insteadOf \"https://github.com/\"", [t], [f"GOPRIVATE=github.com/{org}/*"]


def s_http_header() -> Item:
    url = f"https://api.{RNG.choice(ORGS)}.com/v{RNG.randrange(1, 4)}/{RNG.choice(['orders', 'users/me', 'deployments', 'invoices'])}"
    form = RNG.randrange(10)
    if form == 0:
        t = RNG.choice([jwt(), run(40, B64URL), vendor()[1]])
        return f"curl -s -H \"Authorization: Bearer {t}\" {url}", [t], [url]
    if form == 1:
        pair = base64.b64encode(f"{RNG.choice(USERS)}:{password()}".encode()).decode()
        return f"curl -H 'Authorization: Basic {pair}' -H 'Accept: application/json' {url}", [pair], [url, "Accept: application/json"]
    if form == 2:
        t = run(32, LOW)
        h = RNG.choice(["X-API-Key", "x-api-key", "X-Auth-Token", "Api-Key", "X-Vault-Token", "apikey"])
        return f"curl -X POST {url} -H \"{h}: {t}\" -d @payload.json", [t], [url, "@payload.json"]
    if form == 3:
        t = "glpat-" + run(20, B64URL)
        return f"curl --header \"PRIVATE-TOKEN: {t}\" \"https://gitlab.example.com/api/v4/projects/42/pipelines\"", [t], ["api/v4/projects/42/pipelines"]
    if form == 4:
        t = jwt()
        return f"> GET /v1/orders HTTP/2\n> Host: api.example.com\n> User-Agent: curl/8.5.0\n> Authorization: Bearer {t}\n> Accept: */*\n>\n< HTTP/2 200", [t], ["User-Agent: curl/8.5.0"]
    if form == 5:
        s = run(32, LOW + string.ascii_uppercase)
        return f"curl -b 'sessionid={s}; csrftoken={(c := run(32))}' {url}", [s, c], [url]
    if form == 6:
        s = run(48, B64URL)
        return f"< HTTP/1.1 302 Found\n< Location: /dashboard\n< Set-Cookie: _session_id={s}; path=/; HttpOnly; SameSite=Lax", [s], ["Location: /dashboard"]
    if form == 7:
        t = vendor()[1]
        return f"http GET {url} Authorization:\"Bearer {t}\"", [t], [url]
    if form == 8:
        t = run(40, LOW)
        return f"GET {url}?api_key={t}&format=json", [t], ["format=json"]
    pair = base64.b64encode(f"{RNG.choice(USERS)}:{password()}".encode()).decode()
    return f"fetch(url, {{ headers: {{ Authorization: `Basic {pair}` }} }})", [pair], ["fetch(url"]


def s_cloud_cli() -> Item:
    ak = "AKIA" + run(16, string.ascii_uppercase + "234567")
    sk = run(40, B64)
    form = RNG.randrange(9)
    if form == 0:
        return f"aws configure set aws_secret_access_key {sk} --profile {RNG.choice(['prod', 'ci'])}", [sk], ["--profile"]
    if form == 1:
        return f"[default]\naws_access_key_id = {ak}\naws_secret_access_key = {sk}\nregion = eu-central-1", [sk], ["region = eu-central-1"]
    if form == 2:
        st = "IQoJb3JpZ2luX2VjE" + run(300, B64)
        return f'{{\n    "Credentials": {{\n        "AccessKeyId": "ASIA{run(16, string.ascii_uppercase + "234567")}",\n        "SecretAccessKey": "{sk}",\n        "SessionToken": "{st}",\n        "Expiration": "2026-12-06T09:12:44+00:00"\n    }}\n}}', [sk, st], ['"Expiration": "2026-12-06T09:12:44+00:00"']
    if form == 3:
        return f"export AWS_ACCESS_KEY_ID={ak}\nexport AWS_SECRET_ACCESS_KEY={sk}\nexport AWS_DEFAULT_REGION=us-east-2", [sk], ["AWS_DEFAULT_REGION=us-east-2"]
    if form == 4:
        block, lines = pem("PRIVATE KEY")
        esc = block.replace("\n", "\\n") + "\\n"
        return f'{{\n  "type": "service_account",\n  "project_id": "acme-prod-3141",\n  "private_key_id": "{hexrun(40)}",\n  "private_key": "{esc}",\n  "client_email": "deployer@acme-prod-3141.iam.gserviceaccount.com"\n}}', lines, ["deployer@acme-prod-3141.iam.gserviceaccount.com"]
    if form == 5:
        t = "ya29." + run(150, B64URL)
        return f"$ gcloud auth print-access-token\n{t}", [t], ["gcloud auth print-access-token"]
    if form == 6:
        p = run(3, AN) + "8Q~" + run(34, AN + "_-.~")
        return f'{{\n  "appId": "{uid()}",\n  "displayName": "gh-actions-deployer",\n  "password": "{p}",\n  "tenant": "{uid()}"\n}}', [p], ["gh-actions-deployer"]
    if form == 7:
        p = run(3, AN) + "8Q~" + run(34, AN + "_-.~")
        return f"AZURE_CLIENT_ID={uid()}\nAZURE_CLIENT_SECRET={p}\nAZURE_TENANT_ID={uid()}", [p], ["AZURE_TENANT_ID"]
    t = "dop_v1_" + hexrun(64)
    return f"doctl auth init --context {RNG.choice(['prod', 'personal'])} --access-token {t}", [t], ["doctl auth init"]


def s_tool_output() -> Item:
    form = RNG.randrange(8)
    if form == 0:
        t = github_token("ghp_")
        return f"$ printenv | grep -i token\nGITHUB_TOKEN={t}\nTOKEN_TTL=3600", [t], ["TOKEN_TTL=3600"]
    if form == 1:
        p = password()
        return f'            "Env": [\n                "{RNG.choice(["POSTGRES_PASSWORD", "MYSQL_PASSWORD", "RABBITMQ_DEFAULT_PASS"])}={p}",\n                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",\n                "PGDATA=/var/lib/postgresql/data"\n            ],', [p], ["PGDATA=/var/lib/postgresql/data"]
    if form == 2:
        t = "hvs." + run(24)
        return f"Success! You are now authenticated.\n\nKey                  Value\n---                  -----\ntoken                {t}\ntoken_accessor       {run(24)}\ntoken_duration       768h\ntoken_policies       [\"default\"]", [t], ["token_duration       768h"]
    if form == 3:
        p = password()
        return f'$ terraform output -json\n{{\n  "db_password": {{\n    "sensitive": true,\n    "type": "string",\n    "value": "{p}"\n  }}\n}}', [p], ['"sensitive": true']
    if form == 4:
        t = "npm_" + run(36)
        return f"┌────────────────┬──────────────────────────────────────────┐\n│ token          │ {t} │\n├────────────────┼──────────────────────────────────────────┤\n│ readonly       │ false                                    │", [t], ["readonly"]
    if form == 5:
        p = password()
        return f"$ kubectl get secret db-credentials -o jsonpath='{{.data.password}}' | base64 -d\n{p}", [p], ["kubectl get secret db-credentials"]
    if form == 6:
        p = password()
        return f"  Generated password for admin user: {p}\n  Keep it in a safe place; it will not be shown again.", [p], ["Keep it in a safe place"]
    p = run(32, HEX)
    return f"$ docker logs jenkins 2>&1 | grep -A2 'initial'\nPlease use the following password to proceed to installation:\n\n{p}\n\nThis may also be found at: /var/jenkins_home/secrets/initialAdminPassword", [p], ["/var/jenkins_home/secrets/initialAdminPassword"]


def s_pem() -> Item:
    kind = RNG.choice(["RSA PRIVATE KEY", "EC PRIVATE KEY", "PRIVATE KEY", "ENCRYPTED PRIVATE KEY", "OPENSSH PRIVATE KEY", "PGP PRIVATE KEY BLOCK"])
    block, lines = pem(kind)
    form = RNG.randrange(4)
    if form == 0:
        return f"$ cat ~/.ssh/deploy_key\n{block}", lines, ["cat ~/.ssh/deploy_key"]
    if form == 1:
        ind = "\n".join("    " + line for line in block.splitlines())
        return f"tls:\n  key: |\n{ind}\n  cert: /etc/tls/tls.crt", lines, ["cert: /etc/tls/tls.crt"]
    if form == 2:
        return f'PRIVATE_KEY="{block.replace(chr(10), chr(92) + "n")}"', lines, ["PRIVATE_KEY="]
    return block, lines, [f"-----END {kind}-----"]


def s_jwt() -> Item:
    t = jwt()
    form = RNG.randrange(5)
    if form == 0:
        return f"2026-12-05T21:14:03.118Z DEBUG auth middleware: verified token={t} user_id=4412", [t], ["user_id=4412"]
    if form == 1:
        return f"Cookie: access_token={t}; theme=dark", [t], ["theme=dark"]
    if form == 2:
        return f"> localStorage.getItem('id_token')\n'{t}'", [t], ["localStorage.getItem('id_token')"]
    if form == 3:
        return f'{{"access_token":"{t}","token_type":"Bearer","expires_in":3600,"refresh_token":"{(r := run(64, B64URL))}"}}', [t, r], ['"expires_in":3600']
    return f"Here's the token the login endpoint returned, can you see why it is rejected? {t}", [t], ["rejected"]


def s_vendor_prose() -> Item:
    name, t = vendor()
    form = RNG.randrange(6)
    if form == 0:
        return f"use this key for the test run: {t}", [t], ["for the test run"]
    if form == 1:
        return f"{RNG.choice(['SLACK_BOT_TOKEN', 'STRIPE_KEY', 'OPENAI_API_KEY', 'HF_TOKEN', 'SENTRY_AUTH_TOKEN', 'LINEAR_KEY'])}: {t}", [t], []
    if form == 2:
        return f"settings.{RNG.choice(['integrations', 'providers'])}.{name.replace('-', '_')} = {json.dumps(t)}", [t], ["settings."]
    if form == 3:
        return f"gh secret set DEPLOY_TOKEN --body {t} --repo {RNG.choice(ORGS)}/{RNG.choice(PROJECTS)}", [t], ["gh secret set DEPLOY_TOKEN"]
    if form == 4:
        return f"    token: '{t}'  # TODO move to vault", [t], ["TODO move to vault"]
    return f"Error: 401 Unauthorized for key {t} (check that it has not expired)", [t], ["401 Unauthorized"]


def s_slack_webhook() -> Item:
    url_secret = run(24)
    form = RNG.randrange(2)
    path = f"T{run(8, string.ascii_uppercase + string.digits)}/B{run(10, string.ascii_uppercase + string.digits)}/{url_secret}"
    if form == 0:
        return f"SLACK_WEBHOOK_URL=https://hooks.slack.com/services/{path}", [url_secret], ["SLACK_WEBHOOK_URL"]
    return f"curl -X POST -H 'Content-type: application/json' --data '{{\"text\":\"deploy done\"}}' https://hooks.slack.com/services/{path}", [url_secret], ["deploy done"]


SECRET_FAMILIES: list[tuple[str, str, Callable[[], Item], int]] = [
    ("config", "dotenv", s_dotenv, 14), ("config", "compose", s_compose, 8), ("config", "kubernetes", s_kube, 10),
    ("config", "package-rc", s_pkg_rc, 14), ("config", "netrc-like", s_netrc_like, 10),
    ("config", "jvm-dotnet", s_jvm_dotnet_config, 12), ("config", "app-config", s_app_config, 16),
    ("code", "code", s_code, 10), ("dsn", "jdbc-odbc", s_jdbc_dsn, 14), ("dsn", "broker-url", s_broker_dsn, 14),
    ("dsn", "azure-storage", s_azure_storage, 6), ("shell", "git-remote", s_git_remote, 10),
    ("http", "http-header", s_http_header, 18), ("shell", "cloud-cli", s_cloud_cli, 16),
    ("output", "tool-output", s_tool_output, 14), ("pem", "pem", s_pem, 10), ("jwt", "jwt", s_jwt, 10),
    ("vendor", "vendor-token", s_vendor_prose, 20), ("http", "webhook-url", s_slack_webhook, 4),
]


def secret_rows() -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    seen: set[str] = set()
    for where, family, make, count in SECRET_FAMILIES:
        made = 0
        while made < count:
            text, secrets, keep = make()
            if text in seen:
                continue
            seen.add(text)
            assert secrets and all(s and s in text for s in secrets), (family, text)
            out.append({"id": f"ss{len(out):03d}", "where": where, "family": family, "text": text,
                        "secrets": secrets, "keep": [k for k in keep if k and k in text and not any(k in s for s in secrets)]})
            made += 1
    family_split(out, "source-secrets")
    return out


# -- identities ----------------------------------------------------------------------------------
FIRST = ["jane", "alice", "dev", "priya", "mkowalski", "Tomás", "j.smith", "ci", "runner", "chen.wei", "oluwaseun"]
WORDS = ["auth", "token", "secret", "password", "keys", "vault", "credentials", "session", "jwt", "oauth", "signing", "login", "api", "billing", "cache"]


def proj() -> str:
    return RNG.choice(PROJECTS + [f"{RNG.choice(WORDS)}-{RNG.choice(['service', 'worker', 'sdk', 'cli'])}"])


def i_root() -> str:
    u, p = RNG.choice(FIRST), proj()
    return RNG.choice([
        f"/home/{u}/src/{p}", f"/Users/{u}/Projects/{p}", f"/Users/{u}/code/{RNG.choice(ORGS)}/{p}", f"C:\\Users\\{u.replace('.', '')}\\source\\repos\\{p}",
        f"D:\\a\\{p}\\{p}", f"/mnt/c/Users/{u}/dev/{p}", f"\\\\fileserver\\builds\\{p}\\{RNG.choice(['release', 'nightly'])}", f"/workspaces/{p}",
        f"/home/runner/work/{p}/{p}", f"/builds/{RNG.choice(ORGS)}/{p}", f"/var/lib/jenkins/workspace/{p}_main", f"~/go/src/github.com/{RNG.choice(ORGS)}/{p}",
        f"/opt/app/{p}/current", f"C:/dev/{p}", f"/private/var/folders/{run(2, LOW)}/{run(30, LOW)}/T/{p}-{RNG.randrange(1000, 9999)}",
    ])


def i_path() -> str:
    w1, w2 = RNG.choice(WORDS), RNG.choice(WORDS)
    return RNG.choice([
        f"src/{w1}/{w2}_service.py", f"app/services/{w1}/{w2}_manager.rb", f"internal/{w1}/{w2}.go", f"src/main/java/com/{RNG.choice(ORGS).replace('-', '')}/{w1}/{w2.capitalize()}Controller.java",
        f"packages/{w1}/src/{w2}.test.ts", f"config/{RNG.choice(['secrets.example.yml', 'credentials.yml.enc', 'master.key.sample', 'initializers/devise.rb'])}",
        f"deploy/k8s/{w1}-{RNG.choice(['secret', 'sealedsecret', 'externalsecret'])}.yaml", f"~/.aws/{RNG.choice(['config', 'credentials'])}", f"~/.ssh/{RNG.choice(['id_ed25519', 'id_rsa.pub', 'known_hosts', 'config'])}",
        f"/run/secrets/{w1}_{RNG.choice(['password', 'key', 'token'])}", f"{RNG.choice(['.env.example', '.env.template', '.env.sample'])}", f"src/{w1}/__init__.py:{RNG.randrange(1, 400)}:{RNG.randrange(1, 80)}",
        f"C:\\Users\\{RNG.choice(['Dev', 'JSmith'])}\\AppData\\Roaming\\npm\\node_modules\\@{RNG.choice(ORGS)}\\{w1}-cli\\dist\\index.js", f"Sources/{w1.capitalize()}Kit/{w2.capitalize()}Store.swift",
        f"tests/fixtures/{w1}/{RNG.choice(['expired', 'revoked', 'valid'])}_{w2}.json", f"crates/{w1}/src/{w2}.rs", f"lib/{w1}/{w2}.ex",
    ])


def i_trace() -> str:
    w1, w2 = RNG.choice(WORDS), RNG.choice(WORDS)
    return RNG.choice([
        f'  File "/home/{RNG.choice(FIRST)}/src/{proj()}/app/{w1}/{w2}.py", line {RNG.randrange(10, 900)}, in verify_{w2}',
        f"\tat com.acme.{w1}.{w2.capitalize()}Service.refresh({w2.capitalize()}Service.java:{RNG.randrange(10, 500)})",
        f"/home/runner/go/pkg/mod/github.com/golang-jwt/jwt/v5@v5.2.{RNG.randrange(0, 3)}/parser.go:{RNG.randrange(20, 200)} +0x{hexrun(3)}",
        f"    at {w2}Middleware (/app/node_modules/@{RNG.choice(ORGS)}/{w1}/dist/index.js:{RNG.randrange(1, 900)}:{RNG.randrange(1, 60)})",
        f"src/{w1}/{w2}.ts({RNG.randrange(1, 300)},{RNG.randrange(1, 40)}): error TS2345: Argument of type 'string | undefined' is not assignable to parameter of type 'string'.",
        f"app/{w1}/{w2}.py:{RNG.randrange(1, 300)}: error: Incompatible return value type (got \"str | None\", expected \"str\")  [return-value]",
        f"thread 'main' panicked at src/{w1}/{w2}.rs:{RNG.randrange(1, 300)}:{RNG.randrange(1, 60)}:",
    ])


def i_session_file() -> str:
    u = uid()
    root = RNG.choice([f"-Users-{RNG.choice(FIRST).replace('.', '-')}-src-{proj()}", f"-home-{RNG.choice(FIRST)}-code-{proj()}", f"C--Users-dev-source-repos-{proj()}"])
    return RNG.choice([f"~/.claude/projects/{root}/{u}.jsonl", f"~/.codex/sessions/2026/{RNG.randrange(1, 13):02d}/{RNG.randrange(1, 29):02d}/rollout-2026-11-{RNG.randrange(1, 29):02d}T{RNG.randrange(0, 24):02d}-{RNG.randrange(0, 60):02d}-{RNG.randrange(0, 60):02d}-{u}.jsonl",
                       f"session_id: {u}", f'"sessionId": "{u}"', f"claude --resume {u}", f"codex resume {u}"])


def i_branch() -> str:
    w = RNG.choice(WORDS)
    b = RNG.choice([f"feature/{w}-{RNG.choice(['rotation', 'refresh', 'expiry', 'hashing'])}", f"fix/{RNG.choice(['PAY', 'AUTH', 'SEC'])}-{RNG.randrange(100, 9999)}-{w}-leak",
                    f"dependabot/npm_and_yarn/jsonwebtoken-{RNG.randrange(8, 10)}.0.{RNG.randrange(0, 3)}", f"renovate/{RNG.choice(['aws-sdk-go-v2-monorepo', 'hashicorp-vault-1.x', 'passport-jwt-4.x'])}",
                    f"users/{RNG.choice(FIRST)}/{w}-cleanup", f"release/{RNG.randrange(2023, 2027)}.{RNG.randrange(1, 13):02d}", f"hotfix/CVE-2024-{RNG.randrange(1000, 49999)}",
                    f"claude/{w}-{run(5, LOW)}", f"codex/{RNG.choice(['remove', 'rotate'])}-{w}-{run(4, LOW)}"])
    return RNG.choice([b, f"git checkout -b {b}", f"* {b}", f"remotes/origin/{b}", f"git push -u origin {b}", f"On branch {b}\nYour branch is up to date with 'origin/{b}'."])


def i_commit() -> str:
    h = hexrun(40)
    return RNG.choice([h, f"{h[:7]} {RNG.choice(['Rotate', 'Fix', 'Remove'])} {RNG.choice(WORDS)} {RNG.choice(['handling', 'leak in logs', 'cache'])}", f"git cherry-pick {h}",
                       f"Merge: {h[:7]} {hexrun(7)}", f"git diff {h[:7]}..{hexrun(7)} -- src/", f"git rev-parse HEAD\n{h}", f"CI_COMMIT_SHA={h}",
                       f"   {h[:7]}..{hexrun(7)}  main -> main", f"git show {h[:10]}:config/settings.py", f"git bisect bad {h}", f"GITHUB_SHA={h}", f"commit {h} (HEAD -> main, origin/main)"])


def i_uuid() -> str:
    u = uid()
    return RNG.choice([f"X-Request-Id: {u}", f"  uid: {u}", f"/subscriptions/{u}/resourceGroups/rg-{proj()}/providers/Microsoft.KeyVault/vaults/kv-{RNG.choice(ORGS)}",
                       f"AZURE_TENANT_ID={u}", f"AZURE_CLIENT_ID={u}", f"az account set --subscription {u}", f"correlation_id={u}", f'"id": "{u}"',
                       f"/api/v2/tokens/{u}/revoke", f"arn:aws:secretsmanager:eu-west-1:{RNG.randrange(10**11, 10**12)}:secret:prod/db-{run(6)}", f"trace_id={hexrun(32)} span_id={hexrun(16)}",
                       f"https://login.microsoftonline.com/{u}/oauth2/v2.0/token", u.upper(), f"{{{u}}}"])


def i_test() -> str:
    w1, w2 = RNG.choice(WORDS), RNG.choice(WORDS)
    return RNG.choice([
        f"tests/{w1}/test_{w2}.py::test_{RNG.choice(['rejects', 'accepts', 'rotates'])}_{w2}[{RNG.choice(['expired', 'wrong-password', 'empty-secret', 'hs256'])}]",
        f"tests/test_{w1}.py::Test{w2.capitalize()}::test_{w2}_is_masked_in_logs PASSED", f"FAILED tests/integration/test_{w1}.py::test_login_with_bad_{w2} - AssertionError",
        f"--- PASS: Test{w1.capitalize()}{w2.capitalize()}/{RNG.choice(['bcrypt_cost_12', 'empty_token', 'rotated_key'])} (0.{RNG.randrange(0, 99):02d}s)",
        f"com.acme.{w1}.{w2.capitalize()}ServiceTest > refreshesExpired{w2.capitalize()}() PASSED", f"rspec ./spec/{w1}/{w2}_spec.rb:{RNG.randrange(5, 300)}",
        f"test {w1}::tests::rejects_bad_{w2} ... ok", f"  ✓ {RNG.choice(['masks', 'rejects', 'rotates'])} the {w2} ({RNG.randrange(1, 90)} ms)",
        f"  Passed Acme.{w1.capitalize()}.Tests.{w2.capitalize()}HasherTests.Verify_ReturnsFalse_For{w2.capitalize()} [{RNG.randrange(1, 90)} ms]",
        f"Tests\\Feature\\{w1.capitalize()}{w2.capitalize()}Test::test_{w2}_can_be_revoked", f"PASS src/{w1}/{w2}.test.ts ({RNG.randrange(1, 9)}.{RNG.randrange(0, 999):03d} s)",
        f"{w1.capitalize()}Tests.{w2.capitalize()}StoreTests/test{w2.capitalize()}Expires", f"npx vitest run src/{w1}/{w2}.spec.ts -t \"{w2} refresh\"",
    ])


def i_digest() -> str:
    d = hexrun(64)
    img = RNG.choice(["ghcr.io/acme/api", "docker.io/library/postgres", "public.ecr.aws/lambda/python", "gcr.io/distroless/static", "hashicorp/vault"])
    return RNG.choice([f"Digest: sha256:{d}", f"image: {img}@sha256:{d}", f"FROM python:3.12-slim@sha256:{d}", f"{img}   latest   sha256:{d}   {hexrun(12)}   3 days ago   148MB",
                       f"{d}  dist/{proj()}-{RNG.randrange(1, 4)}.{RNG.randrange(0, 20)}.0.tar.gz", f"sha256:{d}", f"{RNG.choice(['latest', 'v2.1.0'])}: digest: sha256:{d} size: {RNG.randrange(500, 4000)}",
                       f"Successfully built {hexrun(12)}", f" => => writing image sha256:{d}", f"  imageID: {img}@sha256:{d}"])


def i_lockfile() -> str:
    pkg = RNG.choice(["jsonwebtoken", "bcryptjs", "passport-oauth2", "jose", "keytar", "dotenv"])
    return RNG.choice([f'      "integrity": "sha512-{b64bytes(64)}"', f'  integrity sha1-{b64bytes(20)}', f'    {{file = "{pkg.replace("-", "_")}-1.2.0-py3-none-any.whl", hash = "sha256:{hexrun(64)}"}},',
                       f"{pkg}==4.{RNG.randrange(0, 20)}.{RNG.randrange(0, 9)} \\\n    --hash=sha256:{hexrun(64)}", f"github.com/golang-jwt/jwt/v5 v5.2.{RNG.randrange(0, 3)} h1:{b64bytes(32)}",
                       f'checksum = "{hexrun(64)}"', f'        "revision" : "{hexrun(40)}",', f"  resolved \"https://registry.yarnpkg.com/{pkg}/-/{pkg}-9.0.2.tgz#{hexrun(40)}\"",
                       f'<script src="https://cdn.jsdelivr.net/npm/{pkg}@3/dist/index.min.js" integrity="sha384-{b64bytes(48)}" crossorigin="anonymous"></script>'])


def i_version() -> str:
    return RNG.choice([f"jsonwebtoken@{RNG.randrange(8, 10)}.{RNG.randrange(0, 6)}.{RNG.randrange(0, 9)}", f'"passport-jwt": "^4.0.{RNG.randrange(0, 3)}"', f"cryptography=={RNG.randrange(38, 44)}.0.{RNG.randrange(0, 8)}",
                       f"golang.org/x/crypto v0.{RNG.randrange(10, 30)}.0", f"org.bouncycastle:bcprov-jdk18on:1.{RNG.randrange(70, 80)}", f"github.com/hashicorp/vault/api v1.{RNG.randrange(8, 15)}.{RNG.randrange(0, 5)}",
                       f"@aws-sdk/client-secrets-manager@3.{RNG.randrange(400, 700)}.0", f"v0.0.0-2024{RNG.randrange(1, 13):02d}{RNG.randrange(10, 29)}{RNG.randrange(100000, 235959)}-{hexrun(12)}",
                       f"keyring {RNG.randrange(23, 26)}.{RNG.randrange(0, 9)}.{RNG.randrange(0, 5)}", f"Successfully installed python-jose-3.3.0 passlib-1.7.{RNG.randrange(2, 5)}", f"node v{RNG.randrange(18, 23)}.{RNG.randrange(0, 15)}.{RNG.randrange(0, 5)}"])


def i_url() -> str:
    org, p = RNG.choice(ORGS), proj()
    return RNG.choice([f"https://github.com/{org}/{p}/pull/{RNG.randrange(1, 5000)}", f"https://github.com/{org}/{p}/blob/{hexrun(40)}/src/auth/token.py#L{RNG.randrange(1, 300)}",
                       f"git@github.com:{org}/{p}.git", f"ssh://git@gitlab.{org}.com:2222/{org}/{p}.git", f"https://{RNG.choice(FIRST).replace('.', '')}@bitbucket.org/{org}/{p}.git",
                       f"postgres://localhost:5432/{RNG.choice(DBS)}_test", f"redis://redis:6379/{RNG.randrange(0, 15)}", f"mongodb://mongo:27017/{RNG.choice(DBS)}", "amqp://rabbitmq:5672/%2F",
                       "https://oauth2.googleapis.com/token", f"https://{org}.okta.com/oauth2/default/v1/authorize?client_id=0oa{run(17)}&response_type=code&scope=openid",
                       f"https://console.aws.amazon.com/secretsmanager/secret?name=prod%2F{p}%2Fdb&region=eu-west-1", f"http://localhost:{RNG.randrange(3000, 9000)}/auth/reset-password",
                       f"https://vault.{org}.internal:8200/v1/secret/data/{p}", f"jdbc:postgresql://{RNG.choice(HOSTS)}:5432/{RNG.choice(DBS)}?sslmode=verify-full", f"https://hub.docker.com/r/{org}/{p}/tags"])


def i_reference() -> str:
    k = RNG.choice(CRED_KEYS)
    return RNG.choice([f"{k}=${{{k}}}", f"{k}=${{{k}:-}}", f'-e {k}="${k}"', f"password: ${{{k}}}", f"{k}=$(op read op://Private/{proj()}/password)",
                       f"{k}=$(pass show deploy/{RNG.choice(DBS)})", f"{k}: ${{{{ secrets.{k} }}}}", "token: ${{ secrets.GITHUB_TOKEN }}", f"password: {{{{ .Values.auth.{RNG.choice(['password', 'rootPassword'])} }}}}",
                       f"const key = process.env.{k};", f'password = os.environ["{k}"]', f'api_key = os.getenv("{k}", "")', f'ENV.fetch("{k}")', f"System.getenv(\"{k}\")", f"$env:{k}", f"%{k}%",
                       f"          valueFrom:\n            secretKeyRef:\n              name: {RNG.choice(['db-credentials', 'api-keys'])}\n              key: {RNG.choice(['password', 'token'])}",
                       f"{k}_FILE=/run/secrets/{k.lower()}", "//registry.npmjs.org/:_authToken=${NPM_TOKEN}", f"Authorization: Bearer ${{{k}}}", 'curl -H "Authorization: Bearer $(gh auth token)" https://api.github.com/user',
                       "RUN --mount=type=secret,id=npmrc,target=/root/.npmrc npm ci", f"ARG {k}", "password: \"<your-password>\"", f"{k}=<{k.lower().replace('_', '-')}>", "api_key: '********'",
                       f"{k}=", "password: !vault |\n  $ANSIBLE_VAULT;1.1;AES256", f"docker login -u AWS --password-stdin {RNG.randrange(10**11, 10**12)}.dkr.ecr.eu-west-1.amazonaws.com",
                       f"{k}=\"$(aws secretsmanager get-secret-value --secret-id prod/db --query SecretString --output text)\""])


def i_config_key() -> str:
    return RNG.choice([f"token_ttl: {RNG.randrange(60, 86400)}", f"password_min_length = {RNG.randrange(8, 20)}", "JWT_ALGORITHM=HS256", f"ACCESS_TOKEN_EXPIRE_MINUTES={RNG.randrange(5, 120)}",
                       "AUTH_TOKEN_HEADER=X-Auth-Token", "api_key_env: OPENAI_API_KEY", "credential_process = aws-vault exec prod --json", "[credential]\n\thelper = osxkeychain",
                       f"role_arn = arn:aws:iam::{RNG.randrange(10**11, 10**12)}:role/{RNG.choice(['Deploy', 'ReadOnly', 'TerraformState'])}", "sso_start_url = https://acme.awsapps.com/start",
                       f"client-certificate: /home/{RNG.choice(FIRST)}/.minikube/profiles/minikube/client.crt", "client-key: ~/.minikube/profiles/minikube/client.key",
                       "    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n      command: aws\n      args: [eks, get-token, --cluster-name, prod]",
                       '"auth": {"type": "oauth2", "tokenUrl": "https://auth.example.com/oauth/token"}', "PASSWORD_HASHERS = ['django.contrib.auth.hashers.Argon2PasswordHasher']",
                       f"secret_name: {RNG.choice(['db-credentials', 'registry-pull', 'tls-cert'])}", "passwordless: true", "auth_method: token", f"session_cookie_age: {RNG.randrange(600, 1209600)}",
                       "keyring_backend: file", f"signing_key_id: {hexrun(16).upper()}", "token_endpoint_auth_method: client_secret_basic", "SECURE_SSL_REDIRECT = True",
                       f"max_token_length: {RNG.choice([512, 2048, 4096])}", "secret_store: aws-secrets-manager", "AUTH_PROVIDER=github"])


def i_output() -> str:
    return RNG.choice(["Login Succeeded", "WARNING! Your password will be stored unencrypted in /home/dev/.docker/config.json.",
                       f"Enter passphrase for key '/home/{RNG.choice(FIRST)}/.ssh/id_ed25519':", f"Your identification has been saved in /Users/{RNG.choice(FIRST)}/.ssh/id_ed25519",
                       f"The key fingerprint is:\nSHA256:{b64bytes(32).rstrip('=')} {RNG.choice(FIRST)}@{RNG.choice(['laptop', 'MacBook-Pro.local', 'devbox'])}",
                       f"secret/{RNG.choice(['db-credentials', 'api-keys'])} created", f"NAME                  TYPE                                  DATA   AGE\ndb-credentials        Opaque                                2      {RNG.randrange(2, 90)}d\ndefault-token-{run(5, LOW)}   kubernetes.io/service-account-token   3      {RNG.randrange(100, 400)}d",
                       f'{{\n    "UserId": "AIDA{run(17, string.ascii_uppercase + "234567")}",\n    "Account": "{RNG.randrange(10**11, 10**12)}",\n    "Arn": "arn:aws:iam::{RNG.randrange(10**11, 10**12)}:user/{RNG.choice(FIRST)}"\n}}',
                       "✓ Logged in to github.com account jdoe (keyring)\n  - Active account: true\n  - Git operations protocol: https\n  - Token: gho_************************************",
                       f"Password for 'https://{RNG.choice(FIRST)}@github.com':", f"remote: Create a pull request for 'fix/{RNG.choice(WORDS)}-refresh' on GitHub by visiting:\nremote:      https://github.com/{RNG.choice(ORGS)}/{proj()}/pull/new/fix/token-refresh",
                       f"gpg: key {hexrun(16).upper()}: public key \"Jane Doe <jane@example.com>\" imported", f"Good \"git\" signature for jane@example.com with ED25519 key SHA256:{b64bytes(32).rstrip('=')}",
                       f"npm warn deprecated {RNG.choice(['request', 'uuid'])}@{RNG.randrange(2, 4)}.{RNG.randrange(0, 88)}.0: this package is no longer supported", "mysql: [Warning] Using a password on the command line interface can be insecure.",
                       f"ERROR 1045 (28000): Access denied for user '{RNG.choice(USERS)}'@'localhost' (using password: YES)", f"Vault v1.{RNG.randrange(12, 18)}.{RNG.randrange(0, 5)} ({hexrun(40)}), built 2024-05-01T10:22:03Z"])


def i_public_key() -> str:
    return RNG.choice([f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{run(43, B64)} {RNG.choice(FIRST)}@{RNG.choice(['laptop', 'devbox'])}", f"github.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{run(43, B64)}",
                       f"ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABgQ{run(300, B64)}= deploy@ci",
                       "-----BEGIN CERTIFICATE-----\n" + "\n".join("MIID" + run(60, B64) if i == 0 else run(64, B64) for i in range(6)) + "\n-----END CERTIFICATE-----",
                       "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA" + run(20, B64) + "\n" + "\n".join(run(64, B64) for _ in range(5)) + "\nIDAQAB\n-----END PUBLIC KEY-----",
                       f'{{"kty":"RSA","kid":"{run(43, B64URL)}","use":"sig","alg":"RS256","n":"{run(342, B64URL)}","e":"AQAB"}}'])


def i_header() -> str:
    return RNG.choice([f"traceparent: 00-{hexrun(32)}-{hexrun(16)}-01", f'ETag: "{hexrun(40)}"', f"X-Amzn-Trace-Id: Root=1-{hexrun(8)}-{hexrun(24)}", f"x-github-request-id: {run(4, HEX.upper())}:{run(5, HEX.upper())}:{run(7, HEX.upper())}:{run(7, HEX.upper())}:{run(8, HEX.upper())}",
                       f"< x-ratelimit-remaining: {RNG.randrange(0, 5000)}", "Authorization: Bearer <token>", "WWW-Authenticate: Bearer realm=\"api\", error=\"invalid_token\"", f"Content-Security-Policy: script-src 'self' 'sha256-{b64bytes(32)}'",
                       f"cf-ray: {hexrun(16)}-FRA", f"Strict-Transport-Security: max-age={RNG.choice([31536000, 63072000])}; includeSubDomains", "Accept: application/vnd.github+json", f"X-Request-Id: req_{run(24)}"])


IDENTITY_FAMILIES: list[tuple[str, Callable[[], str], int]] = [
    ("root", i_root, 36), ("path", i_path, 40), ("traceback", i_trace, 26), ("session-file", i_session_file, 20),
    ("branch", i_branch, 36), ("commit", i_commit, 34), ("uuid", i_uuid, 34), ("test", i_test, 40), ("digest", i_digest, 30),
    ("lockfile", i_lockfile, 28), ("version", i_version, 24), ("url", i_url, 34), ("reference", i_reference, 44),
    ("config-key", i_config_key, 30), ("output", i_output, 24), ("public-key", i_public_key, 14), ("header", i_header, 22),
]


def identity_rows() -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    seen: set[str] = set()
    for family, make, count in IDENTITY_FAMILIES:
        made = tries = 0
        while made < count and tries < 50 * count:
            tries += 1
            text = make()
            if text in seen:
                continue
            seen.add(text)
            out.append({"id": f"si{len(out):04d}", "family": family, "text": text})
            made += 1
    family_split(out, "source-identities")
    return out


def main() -> None:
    write_sets({"source_secrets.jsonl": secret_rows(), "source_identities.jsonl": identity_rows()})


if __name__ == "__main__":
    main()
