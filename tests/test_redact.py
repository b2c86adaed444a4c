"""Secret redaction: realistic secrets never reach the database, its WAL, an export or a log;
ordinary code and text pass untouched (deltamem.privacy.redact and the facade's choke point)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from deltamem.core.model import Episode, Skill, Step, Tree
from deltamem.embed.hashing import HashingEmbedder
from deltamem.engine.memory import DeltaMem
from deltamem.extract.trace import TraceExtractor
from deltamem.privacy import redact as R
from deltamem.store.sqlite import SQLiteStore
from helpers import TEST_SETTINGS

# Fake secrets, shaped like the real formats (none of them is valid anywhere).
STRIPE = "sk_live_51Hq8RkLmN0pQ2rS4tUvW6xYz8aBcDeFgH"
AWS_ID = "AKIAQ3EGRTWX7YZK5M2P"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ8x2kL9vT"
GITHUB = "ghp_8fK2mQ9xR4tL7vN1pZ3sW6yB0cD5eH2jA4gU"
GITLAB = "glpat-Xy7Kq2Lm9Np4Rs6Tv8Wz"
SLACK = "xoxb-2048193847-5829384756-Zq8Xk2Lm9Np4Rs6Tv8Wz1Yb"
OPENAI = "sk-proj-Qm8Xk2Lz9Np4Rs6Tv8Wz1Yb3Cd5Ef7Gh9Jk"
ANTHROPIC = "sk-ant-api03-Zq8Xk2Lm9Np4Rs6Tv8Wz1Yb3Cd5Ef7Gh9Jk-AAAA"
NPM = "npm_Zq8Xk2Lm9Np4Rs6Tv8Wz1Yb3Cd5Ef7Gh9Jk0"
PYPI = "pypi-AgEIcHlwaS5vcmcCJGI4ZjQ3YzE2LWFhYjktNDk2Zi04ZDUyLTk0ZTc5ZWM5N2M4Mg"
SENDGRID = "SG.Zq8Xk2Lm9Np4Rs6Tv8Wz1Y.b3Cd5Ef7Gh9Jk0Lm2Np4Rs6Tv8Wz1Yb3Cd5Ef7Gh9J"
TWILIO = "SK2f9c1e8b7a6d5c4b3a2f1e0d9c8b7a6d"
GCP = "AIzaSyD8xK2mQ9xR4tL7vN1pZ3sW6yB0cD5eH2j"
DB_PASS = "Tr0ub4dor&3xyzzy"
WEBHOOK = "whsec_Mq2Lk9Zx7Wv4Tr6Np8Bd1Fh3Jg5"
JWT = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkJvYiJ9."
       "Qm8Xk2Lz9Np4Rs6Tv8Wz1Yb3Cd5Ef7Gh9Jk0Lm2Np4")
K8S_TOKEN = "kX9mQ2vL8pR4tN6wZ1yB3cD5fG7hJ0kM2nP4qS6uV8xA"
PEM_BODY = ("MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi8xOtM1H7kW2nQ9vL4pR8tZ6yB3cD5fG7hJ0kM2nP4"
            "qS6uV8xAZq8Xk2Lm9Np4Rs6Tv8Wz1Yb3Cd5Ef7Gh9Jk0Lm2Np4Rs6Tv8Wz")
PEM = (f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY[:64]}\n{PEM_BODY[64:]}\n"
       "-----END RSA PRIVATE KEY-----")
CLIENT_KEY_DATA = "LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlFcEFJQkFBS0NBUUVBM1R6Mm1yN1Na"

SECRETS = [STRIPE, AWS_ID, AWS_SECRET, GITHUB, GITLAB, SLACK, OPENAI, ANTHROPIC, NPM, PYPI,
           SENDGRID, TWILIO, GCP, DB_PASS, WEBHOOK, JWT, K8S_TOKEN, PEM_BODY[:40],
           CLIENT_KEY_DATA, "hunter2-is-my-pw"]

DOTENV = f"""$ cat .env
DATABASE_URL=postgres://shop:{DB_PASS}@db.internal:5432/shop
STRIPE_SECRET_KEY={STRIPE}
STRIPE_WEBHOOK_SECRET={WEBHOOK}
export GITHUB_TOKEN={GITHUB}
SLACK_BOT_TOKEN="{SLACK}"
OPENAI_API_KEY='{OPENAI}'
NODE_ENV=production
PORT=8080
"""

ENV_OUTPUT = f"""$ env
PATH=/usr/local/bin:/usr/bin:/bin
HOME=/home/bob
AWS_ACCESS_KEY_ID={AWS_ID}
AWS_SECRET_ACCESS_KEY={AWS_SECRET}
ANTHROPIC_API_KEY={ANTHROPIC}
NPM_TOKEN={NPM}
TWINE_PASSWORD={PYPI}
SENDGRID_API_KEY={SENDGRID}
TWILIO_API_KEY={TWILIO}
GOOGLE_API_KEY={GCP}
GITLAB_TOKEN={GITLAB}
PGPASSWORD=hunter2-is-my-pw
"""

KUBECONFIG = f"""$ cat ~/.kube/config
apiVersion: v1
clusters:
- cluster:
    server: https://10.0.0.1:6443
  name: prod
users:
- name: deployer
  user:
    token: {K8S_TOKEN}
    client-key-data: {CLIENT_KEY_DATA}
"""

SAMPLES = [
    ("cat .env", DOTENV),
    ("env", ENV_OUTPUT),
    ("kubeconfig", KUBECONFIG),
    ("dsn", f"sqlalchemy.exc.OperationalError: connection to "
            f"postgresql://admin:{DB_PASS}@10.1.2.3/prod failed"),
    ("jwt", f'curl -H "Authorization: Bearer {JWT}" https://api.example.com/me'),
    ("pem", f"$ cat deploy_key\n{PEM}\n$ ssh-add deploy_key"),
    ("json", f'{{"apiKey": "{OPENAI}", "region": "eu-west-1", "retries": 3}}'),
]

# Ordinary text that must pass untouched.
KEEP = [
    "commit 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39 (HEAD -> main)",
    "git checkout 3f2a9c1",
    "cached at /home/bob/.cache/uv/archive-v0/0c8e2a4f-7d3b-4a1e-9f6c-2b5d8e1a7c3f/lib",
    "request id 123e4567-e89b-12d3-a456-426614174000 failed",
    "sha256:9b2c1e8f7a6d5c4b3a2f1e0d9c8b7a6d5c4b3a2f1e0d9c8b7a6d5c4b3a2f1e0d",
    'FIXTURE = "SGVsbG8sIHRoaXMgaXMgYSB0ZXN0IGZpeHR1cmUgZm9yIHRoZSBwYXJzZXI="',
    "def test_checkout_applies_discount_once(cart): assert total(cart) == 90",
    "TestCheckoutDiscountAppliedTwiceRegression2 FAILED",
    "src/deltamem/integrations/claude_code.py:245: in run_hook",
    "node_modules/@typescript-eslint/eslint-plugin/dist/rules/no-unused-vars.js",
    "password = os.environ['DB_PASSWORD']",
    'api_key: str | None = None',
    "token = tokens[0]",
    "export DB_PASSWORD=${DB_PASSWORD}",
    "sorted(rows, key=lambda r: r.id)",
    "id = Column(Integer, primary_key=True)",
    "if password == confirm: save()",
    "Set STRIPE_SECRET_KEY in .env (see README)",
    "pip install deltamem==0.9.1 pyyaml>=6.0",
    "ERROR tests/test_checkout.py::test_discount - AssertionError: assert 100 == 90",
    "kubectl apply -f k8s/deployment.yaml --namespace prod",
    "postgres://localhost:5432/shop",
    "https://github.com/openai/openai-python/blob/main/README.md",
    "Compiled 42 modules in 3.2s; bundle index-4f9a2c1b.js 128 KiB",
    '"integrity": "sha512-Zq8Xk2Lm9Np4Rs6Tv8Wz1Yb3Cd5Ef7Gh9Jk0Lm2Np4Rs6Tv8Wz1Yb3Cd5Ef7Gh9Jk0Lm'
    '2Np4Rs6Tv8Wz1Yb3Cd5Ef7Gh9Jk0Lm2Np4Rs6Tv8Wz1Yb3Cd5Ef7Gh9J=="',
    "Caused by: org.springframework.beans.factory.BeanCreationException: UserRepoImpl2",
    "docker pull ghcr.io/acme/api@sha256:9b2c1e8f7a6d5c4b3a2f1e0d9c8b7a6d5c4b3a2f1e0d9c8b7a",
]


@pytest.mark.parametrize(("name", "text"), SAMPLES, ids=[s[0] for s in SAMPLES])
def test_secret_samples_are_redacted(name, text):
    out = R.redact(text)
    for secret in SECRETS:
        assert secret not in out, (name, secret, out)
    assert "[REDACTED:" in out


def test_secret_pieces_are_redacted():
    out = R.redact("\n".join(text for _, text in SAMPLES))
    for secret in SECRETS:
        for i in range(0, len(secret) - 12):
            assert secret[i:i + 12] not in out, secret


@pytest.mark.parametrize("text", KEEP)
def test_ordinary_text_is_kept(text):
    assert R.redact(text) == text


def test_context_around_a_secret_is_kept():
    out = R.redact(DOTENV)
    assert "NODE_ENV=production" in out and "PORT=8080" in out
    assert "STRIPE_SECRET_KEY=[REDACTED:" in out
    assert "postgres://shop:[REDACTED:password]@db.internal:5432/shop" in out


def test_private_spans_are_dropped():
    text = "deploy with <private>my home address is 1 Elm St</private> the usual script"
    assert R.redact(text) == "deploy with  the usual script"
    assert R.redact("a <PRIVATE>never closed\nsecret") == "a "


def test_redaction_is_idempotent():
    for _, text in SAMPLES:
        once = R.redact(text)
        assert R.redact(once) == once


def test_configured_secret_and_its_escaped_pieces():
    key = "sk-FAKE4089920bb6fa57a060d732fed5f5d2a1d4ad26c9"
    R.register_secret(key + "\n")
    echoed = 'answer: "sk\\u002dFAKE4089920bb6fa57a060d732fed5f5d2a1d4ad26c9"'
    out = R.redact_configured(echoed)
    assert "4089920bb6fa57a060d732fed" not in out
    assert key not in R.redact(f"Illegal header value b'Bearer {key}\\n'")


def _episode(text: str) -> Episode:
    return Episode(task=f"fix the webhook ({text[:40]})", env="software project shop at /src/shop",
                   steps=(Step("Bash: cat .env", text), Step(f"echo {STRIPE}", "ok",
                                                              thought=f"key {GITHUB}")),
                   success=True, meta={"note": f"token {SLACK}", "nested": [{"pw": DB_PASS}]})


def _leaks(blob: bytes) -> list[str]:
    return [s for s in SECRETS if s.encode() in blob]


def test_no_secret_reaches_the_database_wal_export_or_log(tmp_path, caplog):
    db = tmp_path / "mem.db"
    caplog.set_level(logging.DEBUG)
    mem = DeltaMem(SQLiteStore(db), HashingEmbedder(), TraceExtractor(), settings=TEST_SETTINGS)
    try:
        for _, text in SAMPLES:
            mem.learn(_episode(text))
        mem.learn_many([_episode(text) for _, text in SAMPLES[:3]])
        mem.add_roots([(Tree.TASK, f"rotate {AWS_ID}", Skill(f"when {GITHUB} leaks",
                                                              (f"revoke {STRIPE}",)),
                        {"source": JWT})])
        wal = Path(str(db) + "-wal")
        blobs = {"db": db.read_bytes(), "wal": wal.read_bytes() if wal.exists() else b""}
        export = tmp_path / "out.jsonl"
        mem.export(export)
        blobs["export"] = export.read_bytes()
        recalled = mem.recall("fix the webhook", "software project shop at /src/shop")
        blobs["context"] = recalled.context.encode()
    finally:
        mem.close()
    blobs["db-closed"] = db.read_bytes()
    blobs["log"] = caplog.text.encode()
    assert b"[REDACTED:" in blobs["export"]
    for name, blob in blobs.items():
        assert _leaks(blob) == [], name


def test_import_is_redacted(tmp_path):
    raw = DeltaMem(SQLiteStore(tmp_path / "raw.db"), HashingEmbedder(), TraceExtractor(),
                   settings=TEST_SETTINGS.with_(redact=False))
    with raw:
        raw.learn(_episode(DOTENV))
        raw.learn(_episode(DOTENV + "\nretry\n"))
        raw.export(tmp_path / "raw.jsonl")
    assert _leaks((tmp_path / "raw.jsonl").read_bytes())
    db = tmp_path / "clean.db"
    with DeltaMem(SQLiteStore(db), HashingEmbedder(), TraceExtractor(),
                  settings=TEST_SETTINGS) as clean:
        clean.import_(tmp_path / "raw.jsonl")
        assert clean.check() == []
        clean.export(tmp_path / "clean.jsonl")
    assert _leaks((tmp_path / "clean.jsonl").read_bytes()) == []
    assert _leaks(db.read_bytes()) == []


def test_scrub_removes_every_byte_of_old_secrets(tmp_path):
    db = tmp_path / "old.db"
    old = DeltaMem(SQLiteStore(db), HashingEmbedder(), TraceExtractor(),
                   settings=TEST_SETTINGS.with_(redact=False))
    with old:  # a database written before redaction existed
        for _, text in SAMPLES:
            old.learn(_episode(text))
        old.learn(_episode(DOTENV + "\nagain\n"))
        before = old.stats()
    assert _leaks(db.read_bytes()) or _leaks(Path(str(db) + "-wal").read_bytes())
    with DeltaMem(SQLiteStore(db), HashingEmbedder(), TraceExtractor(),
                  settings=TEST_SETTINGS) as mem:
        counts = mem.scrub(every_space=True)
        assert counts["nodes"] > 0 and counts["episodes"] == len(SAMPLES) + 1
        assert mem.check() == []
        assert mem.stats().episodes == before.episodes
        assert mem.scrub()["nodes"] == 0  # nothing left to redact
        files = [db, Path(str(db) + "-wal")]
        blob = b"".join(f.read_bytes() for f in files if f.exists())
        recalled = mem.recall(_episode(DOTENV).task, "software project shop at /src/shop")
        assert recalled.task.matched
    assert _leaks(blob) == []
    assert _leaks(db.read_bytes()) == []


def test_cli_scrub_mirrors_the_library(tmp_path):
    import json
    import os
    import subprocess
    import sys

    db = tmp_path / "old.db"
    for space in ("a", "b"):
        with DeltaMem(SQLiteStore(db), HashingEmbedder(), TraceExtractor(), space=space,
                      settings=TEST_SETTINGS.with_(redact=False)) as old:
            old.learn(_episode(ENV_OUTPUT))
    env = {**os.environ, "DELTAMEM_EMBEDDER": "hashing"}
    proc = subprocess.run([sys.executable, "-m", "deltamem", "scrub", "--db", str(db),
                           "--json"], capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"nodes": 4, "episodes": 2, "spaces": 2}
    assert _leaks(db.read_bytes()) == []
    proc = subprocess.run([sys.executable, "-m", "deltamem", "scrub", "--db",
                           str(tmp_path / "missing.db")], capture_output=True, text=True,
                          env=env, check=False)
    assert proc.returncode == 4 and proc.stderr.startswith("error: ")


def test_a_key_standing_alone_as_a_urls_user_is_redacted():
    """A Sentry-style DSN carries its key as the URL's user, with no password (a 32-digit hex
    key, which the entropy rule leaves alone as an identifier)."""
    dsn = "SENTRY_DSN=https://a360bf9f89cc67d1771da831a7fd419a@o450123.ingest.sentry.io/5512345"
    out = R.redact(dsn.replace("SENTRY_DSN=", "dsn: "))
    assert "a360bf9f89cc67d1771da831a7fd419a" not in out
    assert "@o450123.ingest.sentry.io/5512345" in out
    for kept in ("ssh://git@github.com/acme/api.git", "https://user@example.com/path",
                 "mailto:dev@example.com"):
        assert R.redact(kept) == kept


# ---- issue 44: identity is not a secret; secrets by context ---------------------------------
SETS = Path(__file__).resolve().parents[1] / "benchmarks" / "coding_sets"


def _rows(name: str) -> list[dict]:
    import json

    return [json.loads(line) for line in (SETS / name).read_text(encoding="utf-8").splitlines()]


def _untouched_by_configured(rows: list[dict]) -> list[dict]:
    """The rows holding no piece of a secret other tests of this process registered: those are
    redacted anywhere, by design (an earlier test may register a value that a row's kept
    context holds, such as an account id)."""
    import re

    pieces = {p for v in R.configured_secrets() for p in re.findall(r"[A-Za-z0-9]{8,}", v)}
    return [r for r in rows if not any(p in r["text"] for p in pieces)]


def test_no_identity_of_the_regression_set_is_changed():
    """Project roots, file paths, branches, test ids, hashes, digests and UUIDs in paths (the
    entropy rule changed about 30 % of them)."""
    rows = _untouched_by_configured(_rows("identities.jsonl"))
    assert len(rows) >= 1000
    assert [r["text"] for r in rows if R.redact(r["text"]) != r["text"]] == []


def test_every_secret_of_the_dev_split_is_removed_and_its_context_kept():
    for row in (r for r in _rows("secrets.jsonl") if r["split"] == "dev"):
        out = R.redact(row["text"])
        assert not [s for s in row["secrets"] if s in out], (row["id"], out)
        assert not [k for k in row["keep"] if k not in out], (row["id"], out)


@pytest.mark.parametrize("text,secret", [
    ("mysql -u root -pS3cr3t!pw -h db shop", "S3cr3t!pw"),
    ("sshpass -p 'Hunter#2024' ssh deploy@10.0.0.5", "Hunter#2024"),
    ("curl -u admin:Pa55w0rd! https://ci.example.com/job", "Pa55w0rd!"),
    ("docker login -u bot -p Zk81mQpL0x9vTq registry.example.com", "Zk81mQpL0x9vTq"),
    ("db.internal:5432:ledger:app:Sup3rS3cret", "Sup3rS3cret"),
    ("machine api.example.com login jane password Qx7Lm2Np9", "Qx7Lm2Np9"),
    ("$ env\nFOO_VALUE=qH7xK2mZ9pLw4Rt8Vn3Bc6\nSHELL=/bin/bash", "qH7xK2mZ9pLw4Rt8Vn3Bc6"),
    ("cGFzc3dvcmQ9VGlnZXIjMTIzNA==", "cGFzc3dvcmQ9VGlnZXIjMTIzNA=="),  # password=Tiger#1234
    ("SMTP_PASSWORD=abc123&tail9876", "tail9876"),
    ("keytool -importkeystore -srcstorepass Blue#1707 -deststorepass Blue#1707", "Blue#1707"),
    ("echo 'Qp0xZ7mLk2' | docker login --password-stdin -u ci ghcr.io", "Qp0xZ7mLk2"),
    ("INFO args: --db-password 1N3r1m4cNQPb --port 8080", "1N3r1m4cNQPb"),
    ("Authorization: Basic YWRtaW46U3VtbWVyITI2NTc=", "YWRtaW46U3VtbWVyITI2NTc="),
    ("SIGNING_BLOB=hb/CXUVoZvn5K6tgNJsp7+Q/MIxNmDXKLD20B2p0", "CXUVoZvn5K6tgNJsp7"),
])
def test_secret_shapes_the_rules_missed_are_removed(text, secret):
    assert secret not in R.redact(text)


def test_a_repository_root_names_its_project_after_redaction():
    scene = "software project MyApp at /Users/jane/Developer/MyApp"
    assert R.redact(scene) == scene
    assert R.redact("mysql -P 3306 -u app shop") == "mysql -P 3306 -u app shop"  # a port
    for ref in ("BRANCH=perf/n+1-queries", "TEST=TestRateLimiter/Allow_burst_of_10_then_429"):
        assert R.redact(ref) == ref


# ---- the option-grammar set (benchmarks/coding_sets/make_grammar_sets.py) --------------------
@pytest.mark.parametrize("text,secret", [
    # htpasswd's flags grouped any way, -C taking its cost, -n printing (no file)
    ("htpasswd -c -b /srv/web/.htpasswd maria Vr7&kq2Lp", "Vr7&kq2Lp"),
    ("htpasswd -B -C 10 -b users.htpasswd ops Tm4#zz91Q", "Tm4#zz91Q"),
    ("htpasswd -nbB ops Lw0pZ-aq8", "Lw0pZ-aq8"),
    ("openssl enc -aes-128-cbc -in a.tar -out a.enc -k Gr8teful4u", "Gr8teful4u"),
    ("ldapdelete -x -D 'cn=root,dc=ex,dc=com' -wMn5&qpT 'uid=x,dc=ex,dc=com'", "Mn5&qpT"),
    ("lftp -u uploader,Qz9vL2mK sftp://files.example.com", "Qz9vL2mK"),
    ("sqlplus scott/Tg7wq2Lm@//orahost:1521/XEPDB1", "Tg7wq2Lm"),
    ("npm config set //npm.example.com/:_authToken Hk2mQ9vLp4Zx8Rt6Wn3Bc", "Hk2mQ9vLp4Zx8Rt6Wn3Bc"),
    # base64 right after a neutral name's '=': JSON with a password inside
    ("SEED=eyJwYXNzd29yZCI6ICJSNHZlbiFxdWlldCJ9", "eyJwYXNzd29yZCI6ICJSNHZlbiFxdWlldCJ9"),
    # an RFC 7617 user:password pair under an auth name (.npmrc _auth, docker auth)
    ("_auth=Y2ktYm90OlNlY3JldDQ0IXh5", "Y2ktYm90OlNlY3JldDQ0IXh5"),
    ('{"auths": {"ghcr.io": {"auth": "Y2ktYm90OlNlY3JldDQ0IXh5"}}}', "Y2ktYm90OlNlY3JldDQ0IXh5"),
])
def test_credential_grammars_are_read_as_documented(text, secret):
    assert secret not in R.redact(text)


@pytest.mark.parametrize("text", [
    "mysql --user=app --password --port=3307 orders",  # --password alone prompts
    "mongosh --host db1 -u app -p --authenticationDatabase admin",  # so does -p
    "wget --user=ci --ask-password https://files.example.com/a.zip",  # a flag, no value
    "helm upgrade api ./chart --set auth.existingSecret=api-credentials",  # a Secret's name
    "implementation 'io.jsonwebtoken:jjwt-api:0.12.6'",  # a build coordinate
    "htpasswd -c /srv/web/.htpasswd maria",  # no -b: htpasswd prompts
    "psql -f sql migrations/0042_add_index.sql",  # a path, not Oracle's user/password
    'auth: "dG9rZW4gcm90YXRpb24gbm90ZXM="',  # base64 of text, no user:password pair
])
def test_the_same_tools_options_without_a_credential_pass(text):
    assert R.redact(text) == text


def test_the_grammar_sets_dev_split():
    secrets = [r for r in _rows("grammar_secrets.jsonl") if r["split"] == "dev"]
    identities = [r for r in _rows("grammar_identities.jsonl") if r["split"] == "dev"]
    assert [r["id"] for r in secrets if any(s in R.redact(r["text"]) for s in r["secrets"])] == []
    assert [r["id"] for r in secrets if any(k not in R.redact(r["text"]) for k in r["keep"])] == []
    assert [r["text"] for r in identities if R.redact(r["text"]) != r["text"]] == []


# ---- the source-format set (benchmarks/coding_sets/make_source_sets.py) ----------------------
@pytest.mark.parametrize("text,secret", [
    # a quoted string after '=' or ':' is a literal: brackets in it are characters, not code
    ('MAIL_PASSWORD: "q(7Lm]2x#Np9"', "q(7Lm]2x#Np9"),
    ("SECRET_KEY = 'k3y-(w1th)-br4ck3ts[0]'", "k3y-(w1th)-br4ck3ts[0]"),
    # Oracle's JDBC thin URL: jdbc:oracle:thin:USER/PASSWORD@host
    ("jdbc:oracle:thin:scott/tiger-lily-42@orahost:1521/XEPDB1", "tiger-lily-42"),
])
def test_source_formats_are_read_as_documented(text, secret):
    assert secret not in R.redact(text)


@pytest.mark.parametrize("text", [
    # a boolean, not a password
    "ERROR 1045 (28000): Access denied for user 'ops'@'localhost' (using password: NO)",
    'password: "$(vault read -field=pw kv/db)"',  # a substitution: the value is elsewhere
    "arn:aws:secretsmanager:us-east-2:210987654321:secret:ci/npm-Ab12Cd",  # an ARN: no names
    "golang.org/x/text v0.14.0 h1:ScX5w1eTa3QqT8oi6+ziP7dTV1S2+ALU0bI+0zXKWiQ=",  # go.sum
    "--- PASS: TestSecretRotation/expired_key (0.01s)",  # go test's result line
    '{"kid": "Zk4mQ8vL2pR6tN0wX3yB7cD9fG1hJ5kM", "alg": "RS256"}',  # a key's id (RFC 7517)
    "X-Correlation-Id: evt_Qm8Xk2Lz9Np4Rs6Tv8Wz",  # a name that says it identifies
    "cf-ray: 8a1b2c3d4e5f6a7b-AMS",  # a hex id and a site code
    "certificate-authority-data: Qm8Xk2Lz9Np4Rs6Tv8Wz1Yb3Cd5Ef7Gh9Jk0Lm2Np4",  # public
    "Your branch is up to date with 'origin/fix/CVE-2025-1234-oauth'.",  # prose, not a name
    "ldapwhoami -x -y /etc/ldap.secret '(uid=ops)'",  # a path's file name, a filter
])
def test_identities_of_the_source_formats_pass(text):
    assert R.redact(text) == text


def test_the_source_sets_dev_split():
    secrets = [r for r in _untouched_by_configured(_rows("source_secrets.jsonl"))
               if r["split"] == "dev"]
    identities = [r for r in _untouched_by_configured(_rows("source_identities.jsonl"))
                  if r["split"] == "dev"]
    assert len(secrets) >= 100 and len(identities) >= 240
    missed = [r["id"] for r in secrets if any(s in R.redact(r["text"]) for s in r["secrets"])]
    # Known misses: a hexadecimal password alone on an output line, told only by the prose
    # above it (a commit hash has the same shape); see docs/results.md.
    assert len(missed) <= 2, missed
    assert [r["id"] for r in secrets if any(k not in R.redact(r["text"]) for k in r["keep"])] == []
    assert [r["text"] for r in identities if R.redact(r["text"]) != r["text"]] == []


# -- the field sets (make_field_sets.py): the places a session reaches outside an app's config --
@pytest.mark.parametrize("text,secret", [
    # a command documented to print a secret, at a prompt, and its output
    ("$ gh auth token\ngho_Zq8Xk2Lz9Np4Rs6Tv8Wz1Yb3Cd5Ef7Gh9Jk0",
     "gho_Zq8Xk2Lz9Np4Rs6Tv8Wz1Yb3Cd5Ef7Gh9Jk0"),
    ("$ openssl rand -base64 24\nq8Xk2Lz9Np4Rs6Tv8Wz1Yb3Cd5Ef7Gh9",
     "q8Xk2Lz9Np4Rs6Tv8Wz1Yb3Cd5Ef7Gh9"),
    # an auth scheme of any name (RFC 9110), Basic as user and password
    ('curl -H "Authorization: Klaviyo-API-Key pk_9f8e7d6c5b4a39281706f5e4d3c2b1a0" x',
     "pk_9f8e7d6c5b4a39281706f5e4d3c2b1a0"),
    ("Authorization: Basic ops Tq7-wBz2-Lm9x", "Tq7-wBz2-Lm9x"),
    # an API key given to curl as the user, with an empty password
    ("curl https://api.example.com/v1/charges -u zkTq8Lm2Xw9Pb4Rs6Nv1Yc3D:",
     "zkTq8Lm2Xw9Pb4Rs6Nv1Yc3D"),
    # user DDL, a positional password, a here-string fed to a login, an expect script
    ("ALTER ROLE app WITH PASSWORD 'pl4in-Text-pw';", "pl4in-Text-pw"),
    ("rabbitmqctl change_password ops 'Zq8!xk2Lz'", "Zq8!xk2Lz"),
    ("vault login -method=userpass username=ops <<< Zq8xk2Lz9Np4", "Zq8xk2Lz9Np4"),
    ('expect "Enter passphrase:"\nsend "Wq8-xk2Lz9\\r"', "Wq8-xk2Lz9"),
    # a webhook's capability URL
    ("https://hooks.example.dev/webhooks/1234567/Zq8Xk2Lz9Np4Rs6Tv8Wz1Yb3",
     "Zq8Xk2Lz9Np4Rs6Tv8Wz1Yb3"),
    # prose that names a secret and gives it
    ("the staging api key is zq8Xk2Lz9Np4Rs6Tv8Wz1Yb3", "zq8Xk2Lz9Np4Rs6Tv8Wz1Yb3"),
    # a name and its value written apart: a Key/Value table, a name/value object, a block default
    ("Key          Value\n---          -----\napi_token    Zq8Xk2Lz9Np4Rs6T", "Zq8Xk2Lz9Np4Rs6T"),
    ('[{"name": "SMTP_PASSWORD", "value": "mail-Pw-2291"}]', "mail-Pw-2291"),
    ("AdminPassword:\n  Type: String\n  Default: Admin-Pw-7781", "Admin-Pw-7781"),
    # an index, an escaped quote, a secret word inside the name
    ("curl -d 'user[password]=Qx7-kLm2-Zp9' https://example.com/login", "Qx7-kLm2-Zp9"),
    ('"Value": "{\\"token\\":\\"Zq8Xk2Lz9Np4Rs6Tv8Wz\\"}"', "Zq8Xk2Lz9Np4Rs6Tv8Wz"),
    ("SESSION_SECRET_V2=7f3a9c1e5b7d9f2a4c6e8a0b2d4f6a8c", "7f3a9c1e5b7d9f2a4c6e8a0b2d4f6a8c"),
])
def test_secrets_of_the_field_mechanisms_are_removed(text, secret):
    assert secret not in R.redact(text)


@pytest.mark.parametrize("text", [
    "Cache restored from key: setup-python-Linux-x64-pip-7d3f0c2a9b8e6d4c1f0a",  # a cache key
    "uses: actions/setup-node@60edb5dd545a775178f52524783378180af0d1f8 # v4.0.2",  # a pin
    "password: [FILTERED]",  # a mask printed instead of the value
    "openssl pkcs12 -export -passout env:P12_PASS -out cert.p12",  # where the value is read
    'DB_PASSWORD="op://Infra/postgres/password"',  # a reference to a store
    "mac: ENC[AES256_GCM,data:Zq8Xk2Lz9Np4Rs6Tv8Wz1Y=,iv:Lm2Xw9Pb4Rs6Nv1Yc3D=,type:str]",
    "VITE_PUBLIC_MAPS_KEY=Zq8Xk2Lz9Np4Rs6Tv8Wz1Yb3",  # public by its name
    "x-amz-id-2: Zq8Xk2Lz9Np4Rs6Tv8Wz1Yb3Cd5Ef7Gh9Jk0Lm2Np4Q=",  # an id with a number
    "$ rake db:migrate",  # a namespaced command
    'send "$env(DEPLOY_PASS)\\r"',  # a Tcl variable, not a value
    "Settings:\n  token:\n    ttl: 3600",  # a YAML block, not a value
])
def test_identities_of_the_field_mechanisms_pass(text):
    assert R.redact(text) == text


# Turn 10, from the dev split of the fifth set (make_system_sets.py): the mechanisms, each on
# examples written here (not the set's rows).
@pytest.mark.parametrize("text,secret", [
    # a typed declaration; a quoted name and its value as a call's two first arguments
    ('    smtp_password: str = "Qx7-kLm2-Zp9"', "Qx7-kLm2-Zp9"),
    ('const API_TOKEN: &str = "Zq8Xk2Lz9Np4Rs6Tv8Wz";', "Zq8Xk2Lz9Np4Rs6Tv8Wz"),
    ("define( 'AUTH_SALT', 'k2;Lz9N!p4Rs' );", "k2;Lz9N!p4Rs"),
    ('System.setProperty("mail.smtp.password", "Mail-Pw-2291");', "Mail-Pw-2291"),
    # an authenticating call's user and password
    ('server.login("alerts@example.com", "Zp9!kLm2Qx7")', "Zp9!kLm2Qx7"),
    ('requests.get(url, auth=("ci", "Ci-Pw-4417"))', "Ci-Pw-4417"),
    # key/value objects and a JSON block under a secret's name
    ('{"key": "SMTP_PASSWORD", "value": "mail-Pw-2291"}', "mail-Pw-2291"),
    ('"api_token": {"sensitive": true, "type": "string", "value": "Tk-88321-zzq"}',
     "Tk-88321-zzq"),
    # configuration grammars: a keyword then the value
    ("username admin privilege 15 password 0 Cisco-77x!", "Cisco-77x!"),
    ("rocommunity Pq8Lw2Zx 10.0.0.0/8", "Pq8Lw2Zx"),
    ("requirepass Rd5-Tq9!mZ", "Rd5-Tq9!mZ"),
    ("nmcli device wifi connect Office password Lamp-42Q", "Lamp-42Q"),
    ('wpa_psk="Lamp-42Q-home"', "Lamp-42Q-home"),
    ('site-a : PSK "Zq8!Xk2Lz9"', "Zq8!Xk2Lz9"),
    # documented positional passwords and protocol sessions
    ("snmpget -v2c -c Pq8Lw2Zx 10.0.0.1 sysName.0", "Pq8Lw2Zx"),
    ("radtest bob Bob-Pw-11 localhost 0 Shared-Sec-99", "Shared-Sec-99"),
    ("wpa_passphrase Lab 'Lamp-42Q-lab'", "Lamp-42Q-lab"),
    ("cmdkey /generic:host /user:ops /pass:Ops-Pw-3312", "Ops-Pw-3312"),
    ("kubeadm join 10.0.0.1:6443 --certificate-key " + "ab" * 32, "ab" * 32),
    ("USER backup\n331 Password required\nPASS Bk-Pw-8812", "Bk-Pw-8812"),
    ("a1 LOGIN bob Bob-Imap-77", "Bob-Imap-77"),
    ("AUTH PLAIN AGJvYgBCb2ItU210cC0xMg==", "AGJvYgBCb2ItU210cC0xMg=="),
    ("ACL SETUSER worker on >Wk-Pw-5521 ~jobs:* +@all", "Wk-Pw-5521"),
    ("<auth-user-pass>\nbob\nVpn-Pw-6612\n</auth-user-pass>", "Vpn-Pw-6612"),
    # a store getter of a secret-named key, and WireGuard's key commands, print the value
    ("$ consul kv get app/db_password\nZq8Xk2Lz9Np4Rs6Tv8Wz", "Zq8Xk2Lz9Np4Rs6Tv8Wz"),
    ("$ wg genkey\nyAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=",
     "yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk="),
    # prose naming a base64 key that holds slashes
    ("Recovery Key 1: w2Qs8s3Y3/AZIJxdxgtQPXoxnC/j0BHc", "w2Qs8s3Y3/AZIJxdxgtQPXoxnC/j0BHc"),
])
def test_secrets_of_the_system_mechanisms_are_removed(text, secret):
    assert secret not in R.redact(text)


@pytest.mark.parametrize("text", [
    "  public key: KFdO37gh1ds47fKf+A9qiUdanWpLbqje/61RSfROdEM=",  # named public
    "peer: qNRPcKsgFVniAow6ejhG0RE/FqO8h4kFRy1o7P/U92M=",  # a WireGuard peer is its public key
    'pin-sha256="w01zPR0C5YrAxRnpG96M9oHri50pQQEBqtSLX9O+yTY="',  # a digest
    "Content-MD5: WKaNSH+i1Z3OkATNx9m9+w==",
    "  logo.png: iVBORw0KGgoAAAANSUhEUgAAnzPmUkITHbkt/s579NsWjGGCXpB7",  # file content
    "LoadCredential=db-password:/etc/credstore/app.db-password",  # a file it is read from
    'Environment="PGPASSFILE=/etc/app/pgpass" "PGHOST=db01.internal"',
    "JWT_SECRET: vault:secret/data/app/jwt#value",  # store references
    "REDIS_PASSWORD=ref+awssecrets://prod/app/db#/password",
    "API_KEY=YOUR_API_KEY_HERE",  # a placeholder
    " -password = ${MAIL_PASSWORD}",  # a reference after a lone "="
    "$ sudo salt 'web*' test.ping",  # a command at a prompt, not a name
    "Connect-VIServer -Server vc01 -User admin -Password $cred",  # a variable
    "kubectl get secret db-creds-2 -o yaml",  # a keyword before a name
    "vault kv get -field=password secret/db",
    "Token: apiToken,",  # a variable in a struct literal
    "the password field is required",
])
def test_identities_of_the_system_mechanisms_pass(text):
    assert R.redact(text) == text


# Turn 11, from the dev split of the sixth set (make_data_sets.py): the mechanisms, each on
# examples written here (not the set's rows).
@pytest.mark.parametrize("text,secret", [
    # MySQL's SET PASSWORD with the PASSWORD() function; a call named for authentication
    ("SET PASSWORD FOR 'etl'@'%' = PASSWORD('Etl-Pw-4471');", "Etl-Pw-4471"),
    ('client.auth("svc", "Svc-Pw-8812")', "Svc-Pw-8812"),
    ('PasswordAuthenticator("svc", "Svc-Pw-8812")', "Svc-Pw-8812"),
    # documented setters of a credential
    ("poetry config http-basic.corp ana 'Qx7-kLm2-Zp9'", "Qx7-kLm2-Zp9"),
    ("poetry config pypi-token.corp Zq8Xk2Lz9Np4Rs6Tv8Wz", "Zq8Xk2Lz9Np4Rs6Tv8Wz"),
    ("dotnet nuget setapikey zq8xk2lz9np4rs6tv8wz1yb3 --source corp", "zq8xk2lz9np4rs6tv8wz1yb3"),
    ("anaconda token set ab-12345678-90ab-cdef-1234-567890abcdef",
     "ab-12345678-90ab-cdef-1234-567890abcdef"),
    ("channels:\n  - https://conda.example.org/t/zq-8xk2lz9n-p4rs6tv8/private",
     "zq-8xk2lz9n-p4rs6tv8"),
    # a shell line continuation inside a command and inside a token
    ("curl https://api.example.com/v1 \\\n  -u ops:Ops-Pw-3312", "Ops-Pw-3312"),
    ('export OPENAI_API_KEY="sk-proj-Zq8Xk2Lz9Np4Rs6Tv8Wz1Y\\\nb3Cd5Ef7Gh9Jk0Lm2Np4"',
     "b3Cd5Ef7Gh9Jk0Lm2Np4"),
    # Markdown an agent writes: a table row and a labelled item
    ("| Setting | Value |\n|---|---|\n| Password | `Wh-Pw-2291x` |", "Wh-Pw-2291x"),
    ("- **API key:** `Zq8Xk2Lz9Np4Rs6Tv8Wz`", "Zq8Xk2Lz9Np4Rs6Tv8Wz"),
    # Redis AUTH at redis-cli's prompt; a label line, then the value alone under it
    ("10.0.0.5:6379> AUTH Rd5-Tq9!mZ\nOK", "Rd5-Tq9!mZ"),
    ("Your new admin password (store it safely):\n   Zq8Xk2Lz9Np4Rs6T\n", "Zq8Xk2Lz9Np4Rs6T"),
    # a printed file named for a secret
    ("$ cat /var/lib/app/initial_admin_password\nZq8Xk2Lz9Np4Rs6T\n", "Zq8Xk2Lz9Np4Rs6T"),
    # a secret part inside a long property name, whitespace-separated
    ("spark.hadoop.fs.example.account.key.store42.example.net  " + "Zq8Xk2Lz9Np4Rs6Tv8Wz1Y" * 3,
     "Zq8Xk2Lz9Np4Rs6Tv8Wz1Y" * 3),
    # adjacent string literals under a secret's name
    ('API_TOKEN = (\n    "Zq8Xk2Lz9Np4"\n    "Rs6Tv8Wz1Yb3"\n)', "Rs6Tv8Wz1Yb3"),
])
def test_secrets_of_the_data_mechanisms_are_removed(text, secret):
    assert secret not in R.redact(text)


@pytest.mark.parametrize("text", [
    '"contentHash": "Zq8Xk2Lz9Np4Rs6Tv8Wz1Yb3Cd5Ef7Gh9Jk0Lm2Np4Qr6St8Uv0Wx2Yz4Ab6Cd8Ef0Gh=="',
    "Path:    /nix/store/0lmfhrsm3n06sf22nf04arywy1gj98k9-source",  # a path by its name
    "db.password\t*********(redacted)",  # a mask with the word a tool prints
    "# replace hf_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx with your token",  # a filler
    "SMTP_PASSWORD=your_smtp_password",  # a placeholder addressed to the reader
    "GPU 0: Tesla T4 (UUID: GPU-9b7b03d0-d0af-45d6-adb5-0967f846cf0b)",  # named an id
    'organization: "org-Zq8Xk2Lz9Np4Rs6Tv8Wz1Yb3",',  # an id typed by its own prefix
    "$ poetry config http-basic.corp ana\nPassword:",  # the tool prompts
    "$ cat password_policy.md\nOverview of the rules",  # not a file named for a secret
])
def test_identities_of_the_data_mechanisms_pass(text):
    assert R.redact(text) == text


def test_the_data_sets_dev_split():
    """The sixth set's dev split (the rules above were read from it). Known, not fixed: two
    credentials told only by what the API returns (a session id from ``/api/session``) or by a
    vendor's constructor (a search client's admin key); two ids the set calls public under a
    name ending in "key" (``clientKey``, ``key``), and two key ids (``SK...``, an app's
    ``API_KEY``) that the earlier sets count as secrets; see docs/results.md."""
    secrets = [r for r in _untouched_by_configured(_rows("data_secrets.jsonl"))
               if r["split"] == "dev"]
    identities = [r for r in _untouched_by_configured(_rows("data_identities.jsonl"))
                  if r["split"] == "dev"]
    assert len(secrets) >= 120 and len(identities) >= 160
    missed = [r["id"] for r in secrets if any(s in R.redact(r["text"]) for s in r["secrets"])]
    assert len(missed) <= 2, missed
    lost = [r["id"] for r in secrets if any(k not in R.redact(r["text"]) for k in r["keep"])]
    assert len(lost) <= 2, lost
    changed = [r["id"] for r in identities if R.redact(r["text"]) != r["text"]]
    assert len(changed) <= 2, changed


def test_a_found_value_is_never_replaced_inside_a_marker():
    """A value found once is removed wherever else it occurs, but never out of a marker's own
    word: "ded-secret" once turned ``[REDACTED:encoded-secret]`` into ``[REDACTED:enco[...]]``."""
    import base64

    text = "API_KEY=ded-secret then " + base64.b64encode(b"password=hunter2222").decode()
    assert R.redact(text) == "API_KEY=[REDACTED:secret] then [REDACTED:encoded-secret]"
