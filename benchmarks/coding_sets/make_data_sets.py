"""Generate the data sets (``data_secrets.jsonl``, ``data_identities.jsonl``): a sixth secret and
identity set, written apart from the first five and from the redactor (the redactor's code and
documents were neither read, imported nor run while writing it), and split within each family
before any evaluation was run on it.

The first five sets follow secret shapes seen in sessions (``make_secrets.py``), the option
grammars of credential-taking tools (``make_grammar_sets.py``), an application's own config,
connection strings and vendor tokens (``make_source_sets.py``), the places a session reaches
outside the application (``make_field_sets.py``) and system places (``make_system_sets.py``).
This one starts from the *data, ML, package and agent-tooling places* that a coding agent's
transcript holds (tool outputs, files it reads, commands it runs), each written from the place's
documented format:

* databases and data engineering: SQL DDL/DCL (MySQL ``CREATE USER ... IDENTIFIED BY``, ``SET
  PASSWORD``, PostgreSQL ``CREATE ROLE ... PASSWORD`` and ``ALTER USER``, Oracle, SQL Server
  ``CREATE LOGIN``, Snowflake ``CREATE USER ... PASSWORD``), mongosh ``db.createUser``,
  ``db.changeUserPassword``, ``db.auth`` and Atlas CLI, Redis ``AUTH`` (prompt, RESP wire,
  clients), Elasticsearch/OpenSearch (``elasticsearch-reset-password`` output, first-start output
  with its enrollment token, ``_security/api_key`` responses with ``id``, ``api_key`` and
  ``encoded``, ``Authorization: ApiKey``, ``kibana.yml``, Logstash), ClickHouse ``users.xml``,
  ``users.d`` YAML, ``CREATE USER``, client config and cluster ``<secret>``, Cassandra ``cqlshrc``,
  CQL roles and drivers, Snowflake connector parameters, ``~/.snowsql/config``,
  ``connections.toml``, JDBC URLs and ``SNOWSQL_PWD``, Google service-account JSON (raw, compact,
  base64, in code and in a dbt ``keyfile_json``), Airflow (``airflow connections add``,
  ``AIRFLOW_CONN_*`` URIs and JSON, ``airflow.cfg`` ``fernet_key`` and ``secret_key``, ``airflow
  users create``), dbt ``profiles.yml`` (Postgres, Snowflake, Databricks, Redshift) and
  ``DBT_ENV_SECRET_*``, Spark/Hadoop (``core-site.xml`` ``fs.s3a.secret.key``, ``spark-submit
  --conf spark.hadoop.*``, ``spark-defaults.conf``, Azure account keys, ``hive-site.xml``), Kafka
  client properties (SASL PLAIN and SCRAM JAAS, librdkafka, keystores, Schema Registry
  ``basic.auth.user.info``), Kafka Connect connectors (Debezium ``database.password``, JDBC and S3
  sinks, Snowflake sink), Metabase/Superset/Redash config, Trino (catalog properties, JDBC, Python
  client, OAuth2 and shared secrets, ``TRINO_PASSWORD``);
* ML and AI tooling: Hugging Face (``huggingface-cli login --token``, ``hf auth login``, the
  ``~/.cache/huggingface/token`` file, ``HF_TOKEN``, ``login(token=...)``, git remotes, Bearer
  headers), Weights & Biases (``wandb login``, ``.netrc`` ``machine api.wandb.ai``,
  ``WANDB_API_KEY``), Kaggle ``kaggle.json``, MLflow tracking URIs, ``MLFLOW_TRACKING_PASSWORD``
  and Databricks tokens, Comet/Neptune/Replicate/ClearML keys, LLM provider keys in code and env
  (Groq, Mistral, Together, Cohere, OpenRouter, Perplexity), LangSmith/LangChain and Langfuse keys,
  vector databases (Pinecone, Qdrant ``api-key`` header, Weaviate, Milvus ``token``), notebook
  cells that set ``os.environ[...]``, ``%env`` and ``!huggingface-cli login``;
* agent and editor tooling: MCP server configs (``.mcp.json``, ``claude_desktop_config.json``,
  ``.cursor/mcp.json``, VS Code ``.vscode/mcp.json``) whose ``env``, ``args`` or ``headers`` carry
  a key, ``claude mcp add``, ``codex mcp add``, ``code --add-mcp``, Codex ``config.toml`` providers
  with ``http_headers`` and ``experimental_bearer_token``, ``.aider.conf.yml`` (``api-key`` list)
  and ``aider --api-key``, Continue ``config.yaml``/``config.json``, OpenAI-compatible clients
  (vLLM, LiteLLM proxy, Anthropic), ``.env.local`` of agent frameworks (Tavily, Serper, E2B,
  Firecrawl, Exa, Browserbase);
* package registries and build credentials: ``poetry config http-basic``/``pypi-token``,
  ``POETRY_HTTP_BASIC_*``, ``uv``/``pip`` index URLs with userinfo, ``UV_INDEX_*_PASSWORD``,
  ``[[tool.uv.index]]``, ``.condarc`` ``/t/<token>/`` channels, ``conda token set``, pixi, NuGet
  ``ClearTextPassword``, ``dotnet nuget add source``, ``nuget setapikey``, ``bundle config`` and
  ``BUNDLE_*`` hosts, Gemfile sources, ``GOPRIVATE`` with ``.netrc`` or ``insteadOf``, ``GOPROXY``
  userinfo, Artifactory (``X-JFrog-Art-Api``, ``jf config add --access-token``,
  ``jfrog-cli.conf.v6``) and Nexus (``admin.password``, npm ``_auth``);
* messaging, payments and SaaS: Telegram bot tokens (Bot API URLs, BotFather's reply,
  python-telegram-bot, ``.env``), Discord bot tokens and webhook URLs, Twilio auth tokens and API
  key secrets beside their SIDs, Mailgun/Postmark/Mailchimp/Brevo/Resend keys,
  PayPal/Braintree/Adyen/Square secrets, Algolia admin keys, Auth0/Okta client secrets and SSWS API
  tokens, Shopify ``shpat_``/``shpss_``/``shpca_``, Atlassian ``ATATT``, Notion
  ``secret_``/``ntn_``, Linear ``lin_api_`` and Airtable ``pat`` tokens;
* encodings and wrappers a transcript adds: JSON-escaped files inside tool results (one and two
  levels, a password with ``"`` and ``\\``, an OpenSSH key body with ``\\n``), YAML block scalars,
  URL-encoded values in form bodies, query strings and DSNs, values split across a shell line
  continuation or Python string concatenation, markdown tables, lists and code fences in a chat
  reply, and heredocs that write a config file.

The identity set is the other side of the same places, what must pass unchanged: lockfiles (npm
``integrity: sha512-...``, yarn v1 and berry, pnpm, bun, corepack ``packageManager``, poetry.lock,
uv.lock, pylock, Pipfile.lock, pdm, pip ``--hash=sha256:``, wheel ``RECORD``, conda explicit
URLs with ``#md5``, conda-lock, pixi.lock, Cargo.lock ``checksum``, go.sum ``h1:``, Go build
ids, Gemfile.lock ``CHECKSUMS``, composer.lock, mix.lock, Package.resolved, Podfile.lock,
pubspec.lock, Gradle verification metadata, NuGet ``contentHash``, Nix store paths, SRI
``sha256-``, narinfo signatures and ``trusted-public-keys``), ML artifacts (Hugging Face repo ids,
revision shas, LFS pointers, cache paths, ollama digests, wandb and MLflow run ids and URLs,
ClearML/Comet/Neptune ids, DVC md5s, lakeFS commits, dataset fingerprints), data (SQL with UUID
and hash literals, ``part-00000-<uuid>-c000.snappy.parquet``, ``_delta_log``, Iceberg and Hudi
files, Spark and YARN application ids, Airflow ``run_id``s, dbt ``unique_id``s, checksums and
invocation ids, Snowflake query ids, BigQuery job ids, Databricks cluster ids, Trino query ids),
public identifiers that vendors document as non-secret (Twilio ``AC``/``MG``/``SM`` SIDs, Algolia
application id and search-only key, Auth0/Okta client ids and domains, Stripe ``pk_``, PayPal
client id, Adyen client key, Square application id, Braintree tokenization key, Razorpay key id,
Langfuse ``pk-lf-``, Shopify ``client_id``, Discord application public key, Slack/Discord/
Telegram/Teams ids), SQL and configs that reference a secret without a value
(``IDENTIFIED BY '${DB_PASS}'``, ``{{ env_var('DBT_PASSWORD') }}``, ``sql_alchemy_conn_cmd``,
``PASSWORD_FILE``, ``${file:...}``, ``from_env``, ``${input:hf-token}`` in MCP configs,
``env_key``, ``os.environ["HF_TOKEN"]`` reads), masked output (``***``, ``[hidden]``,
``SecretStr('**********')``, ``sk-proj-****...abcd``), documentation placeholders, SQL and
commands with no credential at all (``CREATE ROLE ... NOLOGIN``, ``IDENTIFIED EXTERNALLY``,
``passwordPrompt()``, Snowflake ``RSA_PUBLIC_KEY``), AI API object ids, GPU/Ray/SageMaker/Vertex
ids, base64 of non-secret content, and paths, branches and test ids of data and ML projects.

Labelling decisions (each from the format's or vendor's documentation):

* Twilio: the Account SID (``AC`` + 32 hex) and API key SID (``SK``...) are identifiers and kept;
  the auth token and the API key secret are secrets.
* Algolia: the application id and the search-only key are identities (documented as safe in
  front-end code); the admin key is a secret.
* Auth0 and Okta: domains, org URLs and client ids are identities (they sit in SPA code); client
  secrets, Okta ``SSWS`` API tokens and nextjs-auth0's ``AUTH0_SECRET`` are secrets.
* Client-side keys are identities: Stripe ``pk_``, PayPal client id (in the JS SDK URL), Adyen
  client key, Square application id, Braintree tokenization key, public key and merchant id,
  Razorpay key id, Langfuse ``pk-lf-``, Shopify app ``client_id``/``SHOPIFY_API_KEY``, Discord
  application public key. Their secret halves (PayPal client secret, Braintree private key and
  access token, Adyen API and HMAC keys, Square access token, ``sk-lf-``, ``shpss_``) are
  secrets.
* Elasticsearch: an API key's ``id`` standing alone in a response is an identity (the docs use it
  to get and invalidate the key); in an ``id:api_key`` pair only the ``api_key`` half is
  labelled; ``encoded`` (base64 of the pair) and the enrollment token (base64 JSON carrying a
  key) are secrets; the HTTP CA certificate SHA-256 fingerprint is an identity.
* A Google service-account key's PEM body is the secret (one substring, with its ``\\n`` escapes
  where it is JSON); ``private_key_id`` is left out of both sets (the key's public id, listed at
  the x509 metadata URL, inside a credential file); ``client_email``, ``project_id`` are kept.
* Key ids beside their secrets are left out of both sets: AWS ``AKIA...``, Confluent Cloud API key
  (the SASL user name), ClearML ``access_key`` (as in the third to fifth sets).
* Telegram: the whole ``<bot id>:<35 chars>`` string is the secret (the Bot API documents it as
  one token); the bot id alone (``getMe``) and chat ids are identities. Discord: the whole bot
  token is the secret; a webhook's numeric id is kept and its token is the secret.
* ``user:password`` pairs (Milvus ``token``, Sidekiq's ``gems.contribsys.com``, ``curl -u``): only
  the password half is labelled; the user name is kept or left unlabelled.
* PEM and OpenSSH private keys: the base64 body is one secret (as in the fifth set); public keys
  (Snowflake ``RSA_PUBLIC_KEY``, ``ssh-ed25519`` lines), public signatures (narinfo ``Sig``) and
  fingerprints are identities.
* Encodings: a secret is labelled as it appears in the text (URL-encoded ``%40``, JSON-escaped
  ``\\"``); a value split across a line continuation or string concatenation is labelled piece by
  piece, and the joining characters are in neither list.
* Password hashes (``SCRAM-SHA-256$...``, bcrypt ``$2y$``, ClickHouse ``password_sha256_hex``,
  Trino ``password.db`` entries) and weak defaults that might be real (``changeme``,
  ``changeit``, ``root:Milvus``, ``admin``) are left out of both sets.
* UUIDs are labelled by role: a UUID that is a credential (Nexus's generated ``admin.password``,
  a Postmark server token, a legacy Pinecone key, an Exa key, a Metabase session id) is a
  secret; UUIDs that name things (query, run, job, object, invocation ids) are identities.
* Keystore and truststore passwords with generated values are secrets; a file hash, lock
  integrity, content hash or dataset md5 is an identity.
* Documentation placeholders (``<YOUR_HF_TOKEN>``, ``your-api-key``, ``sk-...``, ``hf_xxx...``)
  and masked output (``***``, ``[hidden]``, ``(redacted)``) are identities.

Every secret row lists each exact substring that must disappear (``secrets``) and context that
must stay (``keep``); the generator asserts both are substrings and that no kept string overlaps
a secret. Values are fake and drawn from a seeded generator, in each format's documented
alphabet and length; names of people are invented.

Written apart from the redactor: its code and documents were neither read nor run while this set
was written, and the set was not run through it. Split: half and half *within each family*
(``make_source_sets.family_split``), fixed in the files before any evaluation was run on them.

    python benchmarks/coding_sets/make_data_sets.py   # rewrites both files
"""

# ruff: noqa: E501  (a data table: one format per line reads best)

from __future__ import annotations

import base64
import json
import random
import string
import struct
import urllib.parse
import uuid
import zlib
from collections.abc import Callable
from pathlib import Path

# The third set's split rule, shared (the script's folder is on the path when it runs).
from make_source_sets import family_split, identity_rows_of, write_sets

HERE = Path(__file__).resolve().parent
RNG = random.Random(60_613)
AN = string.ascii_letters + string.digits
LOW = string.ascii_lowercase + string.digits
UP = string.ascii_uppercase + string.digits
LETTERS = string.ascii_letters
HEX = "0123456789abcdef"
B64 = AN + "+/"
B64URL = AN + "-_"
NIX32 = "0123456789abcdfghijklmnpqrsvwxyz"

ORGS = ["northwind", "contoso", "fabrikam", "tailspin", "wingtip", "adatum", "lakeshore", "bluefin"]
DBS = ["analytics", "orders", "warehouse", "features", "events", "billing", "inventory", "telemetry"]
DB_USERS = ["etl_rw", "svc_loader", "dbt_runner", "reporting", "airflow", "app_rw", "ml_reader", "ingest"]
HOSTS = ["db01.data.internal", "10.42.8.17", "pg-primary.data.svc.cluster.local", "warehouse.corp.internal",
         "172.20.4.31", "mysql-analytics.internal", "10.0.3.44", "db02.data.internal"]
USERS = ["mlops", "dana", "ci-bot", "kenji", "priya-dev", "ops", "researcher", "build"]
PROJECTS = ["churn-model", "demand-forecast", "search-ranking", "doc-qa", "fraud-detect", "rec-sys",
            "etl-orders", "feature-store"]
TEAMS = ["ml-platform", "data-eng", "applied-ai", "growth-analytics", "search-team"]
MODELS = ["llama-mini-1b", "bert-tiny-ner", "whisper-small-de", "coder-7b-ft", "t5-base-summarize",
          "clip-vit-b32-retail", "mistral-7b-support", "e5-small-embed"]
DAGS = ["etl_daily_orders", "refresh_features", "load_events_hourly", "train_churn_weekly", "export_finance"]
PYPKGS = ["numpy", "pandas", "pyarrow", "torch", "transformers", "scikit-learn", "polars", "duckdb",
          "sqlalchemy", "pydantic", "fastapi", "httpx", "tokenizers", "safetensors"]
NPMPKGS = ["react", "lodash", "zod", "vite", "esbuild", "axios", "typescript", "undici", "chalk", "ws"]
CRATES = ["serde", "tokio", "arrow", "parquet", "rayon", "clap", "anyhow", "datafusion"]
GOMODS = ["github.com/apache/arrow/go/v17", "golang.org/x/sync", "github.com/jackc/pgx/v5",
          "google.golang.org/grpc", "github.com/segmentio/kafka-go", "go.uber.org/zap"]
ADJ = ["brisk", "quiet", "amber", "lucky", "hidden", "rapid", "gentle", "frosty"]
NOUN = ["river", "sparrow", "comet", "meadow", "lantern", "harbor", "glacier", "pine"]


# -- values ----------------------------------------------------------------------------------
def run(n: int, alphabet: str = AN) -> str:
    return "".join(RNG.choice(alphabet) for _ in range(n))


def hexrun(n: int) -> str:
    return run(n, HEX)


def digits(n: int) -> str:
    return str(RNG.randrange(10 ** (n - 1), 10**n))


def uid() -> str:
    return str(uuid.UUID(int=RNG.getrandbits(128), version=4))


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def b64bytes(n: int) -> str:
    return b64(RNG.randbytes(n))


def password() -> str:
    """A password as people and generators make them; its characters need no quoting in a shell
    word, SQL or source string, JSON, YAML, INI (no ``%``) or XML (``-_.@+=~^!``), and it starts
    with a letter or digit."""
    shape = RNG.randrange(5)
    if shape == 0:
        return RNG.choice(["Harbor", "quokka", "Basalt", "marigold", "Tempest", "willow", "Orchid", "sprocket"]) + RNG.choice("@+=_-.!") + digits(RNG.randrange(2, 5)) + RNG.choice(["", "x", "Z", "^"])
    if shape == 1:
        return run(RNG.randrange(14, 28))
    if shape == 2:
        return run(1) + run(RNG.randrange(15, 25), AN + "-_.@+=~^!")
    if shape == 3:
        return "-".join(run(RNG.randrange(4, 8), string.ascii_lowercase) for _ in range(RNG.choice([3, 4])))
    return run(1) + run(RNG.choice([23, 31]), B64URL)


def apw() -> str:
    """A generated password that needs no escaping anywhere (URLs, unquoted shell words)."""
    return run(RNG.randrange(16, 33))


def api_key() -> str:
    shape = RNG.randrange(3)
    if shape == 0:
        return hexrun(RNG.choice([32, 40, 64]))
    if shape == 1:
        return run(RNG.choice([32, 40, 48]), B64URL)
    return run(RNG.choice([24, 32]), AN)


def base62(n: int, width: int) -> str:
    out = ""
    while n:
        n, r = divmod(n, 62)
        out = (string.digits + string.ascii_uppercase + string.ascii_lowercase)[r] + out
    return out.rjust(width, "0")


def ghp(prefix: str = "ghp_") -> str:
    """A GitHub token: 30 random characters and a 6-character base62 CRC32 checksum."""
    body = run(30)
    return prefix + body + base62(zlib.crc32(body.encode()), 6)


def github_pat() -> str:
    return f"github_pat_{run(22)}_{run(59)}"


def glpat() -> str:
    return "glpat-" + run(20, B64URL)


def hf_token() -> str:
    return "hf_" + run(34, LETTERS)


def wandb_key() -> str:
    return hexrun(40)


def openai_key() -> str:
    return f"sk-proj-{run(74, B64URL)}T3BlbkFJ{run(74, B64URL)}"


def anthropic_key() -> str:
    return f"sk-ant-api03-{run(93, B64URL)}AA"


def gemini_key() -> str:
    return "AIza" + run(35, B64URL)


def dapi() -> str:
    return "dapi" + hexrun(32)


def aws_secret() -> str:
    return run(40, B64)


def akia() -> str:
    return "AKIA" + run(16, string.ascii_uppercase + "234567")


def azure_storage_key() -> str:
    return b64bytes(64)


def fernet() -> str:
    return base64.urlsafe_b64encode(RNG.randbytes(32)).decode()


def tg_token() -> str:
    return f"{RNG.randrange(10**8, 10**10)}:AA{run(33, B64URL)}"


def snowflake_id() -> str:
    return str(RNG.randrange(10**17, 1_400_000_000_000_000_000))


def discord_bot_token() -> str:
    bot_id = base64.b64encode(snowflake_id().encode()).decode().rstrip("=")
    return f"{bot_id}.{run(6, B64URL)}.{run(38, B64URL)}"


def sf_account() -> str:
    return f"{run(6, string.ascii_uppercase)}-{run(7, string.ascii_uppercase + string.digits)}"


def slack_bot() -> str:
    return f"xoxb-{digits(12)}-{digits(13)}-{run(24)}"


def conda_token() -> str:
    return f"{run(2, string.ascii_lowercase)}-{uid()}"


def jfrog_reftoken() -> str:
    return b64(f"reftkn:01:{RNG.randrange(1_801_000_000, 1_900_000_000)}:{run(32)}".encode()).rstrip("=")


def pypi_token() -> str:
    return "pypi-AgEIcHlwaS5vcmcCJ" + run(150, B64URL)


def jwt_like() -> str:
    def enc(obj: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj, separators=(",", ":")).encode()).decode().rstrip("=")
    iat = 1_801_000_000 + RNG.randrange(10**6)
    head = enc({"ver": "2", "typ": "JWT", "alg": "RS256", "kid": run(43, B64URL)})
    body = enc({"sub": f"jfac@{uid()[:8]}/users/ci", "scp": "applied-permissions/user", "aud": "*@*", "iss": "jfac@" + uid()[:8], "exp": iat + 31_536_000, "iat": iat, "jti": uid()})
    return f"{head}.{body}.{run(342, B64URL)}"


def pkcs8_body() -> list[str]:
    """The base64 lines of a PKCS#8 RSA-2048 private key (its DER prefix, then random bytes)."""
    prefix = bytes.fromhex("308204bd020100300d06092a864886f70d0101010500048204a7308204a30201000282010100")
    text = b64(prefix + RNG.randbytes(1217 - len(prefix)))
    return [text[i:i + 64] for i in range(0, len(text), 64)]


def openssh_body() -> list[str]:
    """The base64 lines of an unencrypted OpenSSH ed25519 private key (PROTOCOL.key framing)."""
    def s(b: bytes) -> bytes:
        return struct.pack(">I", len(b)) + b
    pub, priv, check = RNG.randbytes(32), RNG.randbytes(32), RNG.randbytes(4)
    pubblob = s(b"ssh-ed25519") + s(pub)
    sec = check + check + s(b"ssh-ed25519") + s(pub) + s(priv + pub) + s(b"ci@build")
    sec += bytes(range(1, 8 - len(sec) % 8 + 1)) if len(sec) % 8 else b""
    blob = b"openssh-key-v1\0" + s(b"none") + s(b"none") + s(b"") + struct.pack(">I", 1) + s(pubblob) + s(sec)
    text = b64(blob)
    return [text[i:i + 70] for i in range(0, len(text), 70)]


def rsa_public_der() -> str:
    prefix = bytes.fromhex("30820122300d06092a864886f70d01010105000382010f003082010a0282010100")
    return b64(prefix + bytes([0xC0 | RNG.randrange(64)]) + RNG.randbytes(255) + bytes.fromhex("0203010001"))


def ssh_ed25519_pub() -> str:
    return b64(struct.pack(">I", 11) + b"ssh-ed25519" + struct.pack(">I", 32) + RNG.randbytes(32))


def sri512() -> str:
    return "sha512-" + b64bytes(64)


def nix32(n: int) -> str:
    return run(n, NIX32)


def pyver() -> str:
    return f"{RNG.randrange(0, 5)}.{RNG.randrange(0, 30)}.{RNG.randrange(0, 12)}"


def ts() -> str:
    return f"2027-02-{RNG.randrange(1, 28):02d}T{RNG.randrange(24):02d}:{RNG.randrange(60):02d}:{RNG.randrange(60):02d}"


def sf_query_id() -> str:
    return f"01{hexrun(6)}-{hexrun(4)}-{hexrun(4)}-0000-{hexrun(12)}"


def dbx_cluster() -> str:
    return f"{RNG.randrange(1, 13):02d}{RNG.randrange(1, 28):02d}-{RNG.randrange(0, 24):02d}{RNG.randrange(60):02d}{RNG.randrange(60):02d}-{run(8, LOW)}"


def dbx_host() -> str:
    return f"adb-{digits(16)}.{RNG.randrange(1, 20)}.azuredatabricks.net"


def repo_id() -> str:
    return f"{RNG.choice(ORGS)}-ai/{RNG.choice(MODELS)}"


Item = tuple[str, list[str], list[str]]
Form = Callable[[], Item]


def pick(i: int, forms: list[Form]) -> Item:
    """The family's ``i``-th form, in turn, so that every form appears."""
    return forms[i % len(forms)]()


def pretty(obj: object) -> str:
    return json.dumps(obj, indent=2)


def compact(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"))


# -- databases ---------------------------------------------------------------------------------
def s_sql_ddl(i: int) -> Item:
    u, p, db = RNG.choice(DB_USERS), password(), RNG.choice(DBS)
    return pick(i, [
        lambda: (f"mysql> CREATE USER '{u}'@'%' IDENTIFIED BY '{p}';\nQuery OK, 0 rows affected (0.02 sec)\n\nmysql> GRANT SELECT, INSERT ON {db}.* TO '{u}'@'%';\nQuery OK, 0 rows affected (0.01 sec)", [p], [f"GRANT SELECT, INSERT ON {db}.*", "Query OK, 0 rows affected"]),
        lambda: (f"{db}=# CREATE ROLE {u} WITH LOGIN PASSWORD '{p}' VALID UNTIL '2028-01-01';\nCREATE ROLE\n{db}=# GRANT CONNECT ON DATABASE {db} TO {u};\nGRANT", [p], [f"CREATE ROLE {u} WITH LOGIN", f"GRANT CONNECT ON DATABASE {db} TO {u};"]),
        lambda: (f"-- migrations/0042_rotate_{u}.sql\nBEGIN;\nALTER USER {u} WITH ENCRYPTED PASSWORD '{p}';\nCOMMIT;", [p], [f"migrations/0042_rotate_{u}.sql", "BEGIN;"]),
        lambda: (f"MariaDB [(none)]> SET PASSWORD FOR '{u}'@'localhost' = PASSWORD('{p}');\nQuery OK, 0 rows affected (0.003 sec)", [p], [f"SET PASSWORD FOR '{u}'@'localhost'", "Query OK"]),
        lambda: (f"SQL> CREATE USER {u.upper()} IDENTIFIED BY \"{p}\" DEFAULT TABLESPACE users QUOTA 100M ON users;\n\nUser created.\n\nSQL> GRANT CREATE SESSION TO {u.upper()};\n\nGrant succeeded.", [p], ["DEFAULT TABLESPACE users", "Grant succeeded."]),
        lambda: (f"CREATE LOGIN [{u}] WITH PASSWORD = N'{p}', CHECK_POLICY = ON;\nGO\nUSE [{db}];\nCREATE USER [{u}] FOR LOGIN [{u}];\nALTER ROLE db_datareader ADD MEMBER [{u}];\nGO", [p], ["CHECK_POLICY = ON", f"USE [{db}];", "ALTER ROLE db_datareader"]),
        lambda: (f"CREATE USER {u.upper()} PASSWORD = '{p}' DEFAULT_ROLE = ANALYST DEFAULT_WAREHOUSE = COMPUTE_WH MUST_CHANGE_PASSWORD = FALSE;\n+----------------------------------------+\n| status                                 |\n|----------------------------------------|\n| User {u.upper()} successfully created. |", [p], ["DEFAULT_WAREHOUSE = COMPUTE_WH", "successfully created."]),
    ])


def s_mongo(i: int) -> Item:
    u, p, db = RNG.choice(DB_USERS), password(), RNG.choice(DBS)
    cluster, project = run(5, string.ascii_lowercase + string.digits), hexrun(24)
    return pick(i, [
        lambda: (f'test> use admin\nswitched to db admin\nadmin> db.createUser({{ user: "{u}", pwd: "{p}", roles: [ {{ role: "readWrite", db: "{db}" }} ] }})\n{{ ok: 1 }}', [p], ["switched to db admin", 'role: "readWrite"']),
        lambda: (f"// docker-entrypoint-initdb.d/init-mongo.js\ndb = db.getSiblingDB('{db}');\ndb.createUser({{\n  user: '{u}',\n  pwd: '{p}',\n  roles: [{{ role: 'dbOwner', db: '{db}' }}],\n}});", [p], [f"db.getSiblingDB('{db}')", "role: 'dbOwner'"]),
        lambda: (f'admin> db.changeUserPassword("{u}", "{p}")\n{{ ok: 1 }}', [p], ["db.changeUserPassword(", f'"{u}"']),
        lambda: (f'{db}> db.auth("{u}", "{p}")\n{{ ok: 1 }}\n{db}> db.orders.countDocuments()\n{RNG.randrange(1000, 99999)}', [p], ["db.orders.countDocuments()"]),
        lambda: (f'client = MongoClient(\n    "mongodb+srv://cluster0.{cluster}.mongodb.net",\n    username="{u}",\n    password="{p}",\n    authSource="admin",\n)', [p], ['authSource="admin"', f"cluster0.{cluster}.mongodb.net"]),
        lambda: (f"$ atlas dbusers create readWrite --username {u} --password '{p}' --projectId {project}\nDatabase user '{u}' successfully created.", [p], [f"--projectId {project}", "successfully created."]),
    ])


def s_redis(i: int) -> Item:
    u, p, pa = RNG.choice(DB_USERS), password(), apw()
    return pick(i, [
        lambda: (f"127.0.0.1:6379> AUTH {pa}\nOK\n127.0.0.1:6379> PING\nPONG", [pa], ["PONG", "127.0.0.1:6379>"]),
        lambda: (f"cache.internal:6380> AUTH {u} {pa}\nOK\ncache.internal:6380> ACL WHOAMI\n\"{u}\"", [pa], ["ACL WHOAMI", "cache.internal:6380>"]),
        lambda: (f"*2\\r\\n$4\\r\\nAUTH\\r\\n${len(pa)}\\r\\n{pa}\\r\\n+OK\\r\\n", [pa], ["$4\\r\\nAUTH", "+OK"]),
        lambda: (f'const redis = new Redis({{ host: "cache.internal", port: 6380, username: "{u}", password: "{p}", tls: {{}} }});', [p], ['host: "cache.internal"', "port: 6380"]),
        lambda: (f'CELERY_BROKER_URL = "rediss://:{pa}@cache.internal:6380/0?ssl_cert_reqs=required"', [pa], ["cache.internal:6380/0", "CELERY_BROKER_URL"]),
    ])


def s_elastic(i: int) -> Item:
    p = run(20, AN + "*_=+-")
    kid, ak = run(20, B64URL), run(22, B64URL)
    enc = b64(f"{kid}:{ak}".encode())
    fp = hexrun(64)
    enroll = b64(compact({"ver": "8.15.2", "adr": [f"172.18.0.{RNG.randrange(2, 9)}:9200"], "fgr": fp, "key": f"{run(20, B64URL)}:{run(22, B64URL)}"}).encode())
    org, kp, ek = RNG.choice(ORGS), password(), hexrun(32)
    return pick(i, [
        lambda: (f"$ bin/elasticsearch-reset-password -u elastic\nThis tool will reset the password of the [elastic] user to an autogenerated value.\nThe password will be printed in the console.\nPlease confirm that you would like to continue [y/N]y\n\n\nPassword for the [elastic] user successfully reset.\nNew value: {p}", [p], ["bin/elasticsearch-reset-password -u elastic", "successfully reset."]),
        lambda: (f"✅ Elasticsearch security features have been automatically configured!\n✅ Authentication is enabled and cluster connections are encrypted.\n\nℹ️  Password for the elastic user (reset with `bin/elasticsearch-reset-password -u elastic`):\n  {p}\n\nℹ️  HTTP CA certificate SHA-256 fingerprint:\n  {fp}\n\nℹ️  Configure Kibana to use this cluster:\n• Copy the following enrollment token and paste it into Kibana in your browser (valid for the next 30 minutes):\n  {enroll}", [p, enroll], [fp, "HTTP CA certificate SHA-256 fingerprint:"]),
        lambda: (f'$ curl -s -u elastic -X POST "https://localhost:9200/_security/api_key" -H "Content-Type: application/json" -d \'{{"name": "ingest-key", "expiration": "30d"}}\'\n{{"id":"{kid}","name":"ingest-key","expiration":1803456000000,"api_key":"{ak}","encoded":"{enc}"}}', [ak, enc], [kid, '"name":"ingest-key"']),
        lambda: (f'curl -s -H "Authorization: ApiKey {enc}" "https://es.{org}.internal:9200/_cat/indices?v"', [enc], ["/_cat/indices?v", f"es.{org}.internal:9200"]),
        lambda: (f'# kibana.yml\nelasticsearch.hosts: ["https://es01:9200"]\nelasticsearch.username: "kibana_system"\nelasticsearch.password: "{kp}"\nxpack.encryptedSavedObjects.encryptionKey: "{ek}"', [kp, ek], ['elasticsearch.username: "kibana_system"', 'elasticsearch.hosts: ["https://es01:9200"]']),
        lambda: (f'output {{\n  elasticsearch {{\n    hosts => ["https://es01:9200"]\n    index => "logs-%{{+YYYY.MM.dd}}"\n    api_key => "{kid}:{ak}"\n    ssl_enabled => true\n  }}\n}}', [ak], ['index => "logs-%{+YYYY.MM.dd}"', "ssl_enabled => true"]),
        lambda: (f"services:\n  opensearch:\n    image: opensearchproject/opensearch:2.17.1\n    environment:\n      - discovery.type=single-node\n      - OPENSEARCH_INITIAL_ADMIN_PASSWORD={kp}", [kp], ["discovery.type=single-node", "opensearchproject/opensearch:2.17.1"]),
    ])


def s_clickhouse(i: int) -> Item:
    u, p, h, sec = RNG.choice(DB_USERS), password(), RNG.choice(HOSTS), hexrun(32)
    return pick(i, [
        lambda: (f"<clickhouse>\n  <users>\n    <{u}>\n      <password>{p}</password>\n      <networks><ip>::/0</ip></networks>\n      <profile>default</profile>\n      <quota>default</quota>\n    </{u}>\n  </users>\n</clickhouse>", [p], ["<profile>default</profile>", "<ip>::/0</ip>"]),
        lambda: (f"# /etc/clickhouse-server/users.d/{u}.yaml\nusers:\n  {u}:\n    password: '{p}'\n    access_management: 1\n    profile: default", [p], [f"users.d/{u}.yaml", "access_management: 1"]),
        lambda: (f":) CREATE USER {u} IDENTIFIED WITH sha256_password BY '{p}' HOST IP '10.0.0.0/8' SETTINGS max_memory_usage = 10000000000;\n\nOk.\n\n0 rows in set. Elapsed: 0.004 sec.", [p], ["HOST IP '10.0.0.0/8'", "Elapsed: 0.004 sec."]),
        lambda: (f"<!-- ~/.clickhouse-client/config.xml -->\n<config>\n    <host>{h}</host>\n    <user>{u}</user>\n    <password>{p}</password>\n    <secure>true</secure>\n</config>", [p], [f"<host>{h}</host>", "<secure>true</secure>"]),
        lambda: (f"<remote_servers>\n    <analytics>\n        <secret>{sec}</secret>\n        <shard>\n            <replica><host>ch-0.clickhouse</host><port>9000</port></replica>\n        </shard>\n    </analytics>\n</remote_servers>", [sec], ["<host>ch-0.clickhouse</host>", "<port>9000</port>"]),
    ])


def s_cassandra(i: int) -> Item:
    u, p, h = RNG.choice(DB_USERS), password(), RNG.choice(HOSTS)
    return pick(i, [
        lambda: (f"; ~/.cassandra/cqlshrc\n[authentication]\nusername = {u}\npassword = {p}\n\n[connection]\nhostname = {h}\nport = 9042\nssl = true", [p], ["port = 9042", f"hostname = {h}"]),
        lambda: (f"cassandra@cqlsh> CREATE ROLE {u} WITH PASSWORD = '{p}' AND LOGIN = true AND SUPERUSER = false;\ncassandra@cqlsh> GRANT SELECT ON KEYSPACE events TO {u};", [p], ["AND LOGIN = true", "GRANT SELECT ON KEYSPACE events"]),
        lambda: (f"cqlsh> ALTER ROLE cassandra WITH PASSWORD = '{p}';\ncqlsh> LIST ROLES;", [p], ["ALTER ROLE cassandra", "LIST ROLES;"]),
        lambda: (f'auth_provider = PlainTextAuthProvider(username="{u}", password="{p}")\ncluster = Cluster(["{h}"], port=9042, auth_provider=auth_provider)\nsession = cluster.connect("events")', [p], ['cluster.connect("events")', "port=9042"]),
    ])


def s_snowflake(i: int) -> Item:
    u, p, pa, acct, db = RNG.choice(DB_USERS), password(), apw(), sf_account(), RNG.choice(DBS).upper()
    return pick(i, [
        lambda: (f'conn = snowflake.connector.connect(\n    user="{u.upper()}",\n    password="{p}",\n    account="{acct}",\n    warehouse="COMPUTE_WH",\n    database="{db}",\n    schema="PUBLIC",\n)', [p], [f'account="{acct}"', 'warehouse="COMPUTE_WH"']),
        lambda: (f"# ~/.snowsql/config\n[connections.prod]\naccountname = {acct}\nusername = {u}\npassword = {p}\nrolename = TRANSFORMER\nwarehousename = TRANSFORMING", [p], [f"accountname = {acct}", "rolename = TRANSFORMER"]),
        lambda: (f'# ~/.snowflake/connections.toml\n[default]\naccount = "{acct}"\nuser = "{u}"\npassword = "{p}"\nwarehouse = "COMPUTE_WH"\nrole = "ANALYST"', [p], [f'account = "{acct}"', 'role = "ANALYST"']),
        lambda: (f"jdbc:snowflake://{acct}.snowflakecomputing.com/?user={u}&password={pa}&warehouse=COMPUTE_WH&db={db}&schema=PUBLIC", [pa], [f"{acct}.snowflakecomputing.com", "warehouse=COMPUTE_WH"]),
        lambda: (f"$ export SNOWSQL_ACCOUNT={acct}\n$ export SNOWSQL_USER={u}\n$ export SNOWSQL_PWD='{p}'\n$ snowsql -q 'select current_version()'", [p], [f"SNOWSQL_ACCOUNT={acct}", "select current_version()"]),
    ])


def sa_key() -> tuple[dict[str, str], str]:
    """A Google service-account key file (its documented fields) and its PEM body as it appears
    JSON-escaped."""
    project = f"{RNG.choice(ORGS)}-{RNG.choice(['data', 'ml', 'analytics'])}-{digits(6)}"
    name = RNG.choice(["bq-loader", "dbt-runner", "vertex-train", "airflow-gcs"])
    email = f"{name}@{project}.iam.gserviceaccount.com"
    lines = pkcs8_body()
    key = {
        "type": "service_account", "project_id": project, "private_key_id": hexrun(40),
        "private_key": "-----BEGIN PRIVATE KEY-----\n" + "\n".join(lines) + "\n-----END PRIVATE KEY-----\n",
        "client_email": email, "client_id": digits(21),
        "auth_uri": "https://accounts.google.com/o/oauth2/auth", "token_uri": "https://oauth2.googleapis.com/token",
        "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
        "client_x509_cert_url": "https://www.googleapis.com/robot/v1/metadata/x509/" + urllib.parse.quote(email),
        "universe_domain": "googleapis.com",
    }
    return key, "\\n".join(lines)


def s_gcp_sa(i: int) -> Item:
    key, body = sa_key()
    email, project = key["client_email"], key["project_id"]
    whole = b64(pretty(key).encode())
    pyd = "{\n" + "".join(f'    "{k}": {json.dumps(v)},\n' for k, v in key.items()) + "}"
    yaml_key = "".join(f"        {k}: {json.dumps(v)}\n" for k, v in key.items())
    return pick(i, [
        lambda: (f"$ cat keys/{project}.json\n{pretty(key)}", [body], [f'"client_email": "{email}"', '"type": "service_account"']),
        lambda: (f"GOOGLE_CREDENTIALS='{compact(key)}'", [body], [f'"project_id":"{project}"', "GOOGLE_CREDENTIALS="]),
        lambda: (f"GCP_SA_KEY_B64={whole}\n# decoded in CI: echo \"$GCP_SA_KEY_B64\" | base64 -d > /tmp/sa.json", [whole], ["GCP_SA_KEY_B64=", "base64 -d > /tmp/sa.json"]),
        lambda: (f"credentials = service_account.Credentials.from_service_account_info({pyd})\nclient = bigquery.Client(credentials=credentials, project=\"{project}\")", [body], [f'project="{project}"', "bigquery.Client("]),
        lambda: (f"my_bigquery:\n  target: prod\n  outputs:\n    prod:\n      type: bigquery\n      method: service-account-json\n      project: {project}\n      dataset: marts\n      keyfile_json:\n{yaml_key}", [body], ["method: service-account-json", "dataset: marts"]),
    ])


def s_airflow(i: int) -> Item:
    u, p, pa, h, db = RNG.choice(DB_USERS), password(), apw(), RNG.choice(HOSTS), RNG.choice(DBS)
    cid = RNG.choice(["warehouse_db", "analytics_dw", "orders_src", "events_db"])
    acct, fk, sk, org = sf_account(), fernet(), hexrun(32), RNG.choice(ORGS)
    return pick(i, [
        lambda: (f"airflow connections add '{cid}' \\\n    --conn-type 'postgres' \\\n    --conn-host '{h}' \\\n    --conn-login '{u}' \\\n    --conn-password '{p}' \\\n    --conn-port '5432' \\\n    --conn-schema '{db}'\nSuccessfully added `conn_id`={cid} : postgres://{u}:******@{h}:5432/{db}", [p], [f"--conn-host '{h}'", "--conn-type 'postgres'"]),
        lambda: (f"export AIRFLOW_CONN_{cid.upper()}='postgresql://{u}:{pa}@{h}:5432/{db}'", [pa], [f"AIRFLOW_CONN_{cid.upper()}", f"@{h}:5432/{db}"]),
        lambda: (f"AIRFLOW_CONN_{cid.upper()}='{{\"conn_type\": \"snowflake\", \"login\": \"{u}\", \"password\": \"{p}\", \"extra\": {{\"account\": \"{acct}\", \"warehouse\": \"COMPUTE_WH\"}}}}'", [p], [f'"account": "{acct}"', '"conn_type": "snowflake"']),
        lambda: (f"[core]\nexecutor = CeleryExecutor\nfernet_key = {fk}\nload_examples = False\n\n[webserver]\nsecret_key = {sk}\nbase_url = http://localhost:8080", [fk, sk], ["executor = CeleryExecutor", "base_url = http://localhost:8080"]),
        lambda: (f"      AIRFLOW__CORE__FERNET_KEY: '{fk}'\n      AIRFLOW__DATABASE__SQL_ALCHEMY_CONN: postgresql+psycopg2://airflow:{pa}@postgres/airflow\n      AIRFLOW__CORE__LOAD_EXAMPLES: 'false'", [fk, pa], ["AIRFLOW__CORE__LOAD_EXAMPLES: 'false'", "@postgres/airflow"]),
        lambda: (f"airflow users create --username admin --firstname Ada --lastname Ops --role Admin --email admin@{org}.com --password '{p}'\n[2027-02-03T10:22:31.120+0000] {{manager.py:212}} INFO - Added user admin\nUser \"admin\" created with role \"Admin\"", [p], ["--role Admin", 'User "admin" created with role "Admin"']),
    ])


def s_dbt(i: int) -> Item:
    u, p, h, db, acct = RNG.choice(DB_USERS), password(), RNG.choice(HOSTS), RNG.choice(DBS), sf_account()
    tok, host, wh = dapi(), dbx_host(), hexrun(16)
    cluster = f"{RNG.choice(ORGS)}-dw.{run(12, LOW)}.us-east-1.redshift.amazonaws.com"
    return pick(i, [
        lambda: (f"jaffle_shop:\n  target: dev\n  outputs:\n    dev:\n      type: postgres\n      host: {h}\n      user: {u}\n      password: \"{p}\"\n      port: 5432\n      dbname: {db}\n      schema: dbt_{u}\n      threads: 4", [p], ["type: postgres", f"dbname: {db}"]),
        lambda: (f"analytics:\n  outputs:\n    prod:\n      type: snowflake\n      account: {acct}\n      user: {u}\n      password: '{p}'\n      role: TRANSFORMER\n      warehouse: TRANSFORMING\n      database: ANALYTICS\n      schema: MARTS", [p], [f"account: {acct}", "role: TRANSFORMER"]),
        lambda: (f"lakehouse:\n  outputs:\n    dev:\n      type: databricks\n      catalog: main\n      schema: dbt_dev\n      host: {host}\n      http_path: /sql/1.0/warehouses/{wh}\n      token: {tok}", [tok], [f"host: {host}", f"http_path: /sql/1.0/warehouses/{wh}"]),
        lambda: (f"    prod:\n      type: redshift\n      host: {cluster}\n      port: 5439\n      user: {u}\n      password: '{p}'\n      dbname: {db}\n      schema: marts", [p], [f"host: {cluster}", "port: 5439"]),
        lambda: (f"$ export DBT_ENV_SECRET_PG_PASSWORD='{p}'\n$ dbt run --select staging+ --target prod\n12:04:31  Running with dbt=1.9.2", [p], ["dbt run --select staging+ --target prod", "Running with dbt=1.9.2"]),
    ])


def s_spark(i: int) -> Item:
    ak, sec, acct, az = akia(), aws_secret(), f"{RNG.choice(ORGS)}lake{digits(2)}", azure_storage_key()
    h, p, job = RNG.choice(HOSTS), password(), RNG.choice(["ingest_orders", "build_features", "compact_events"])
    return pick(i, [
        lambda: (f"<property>\n  <name>fs.s3a.access.key</name>\n  <value>{ak}</value>\n</property>\n<property>\n  <name>fs.s3a.secret.key</name>\n  <value>{sec}</value>\n</property>\n<property>\n  <name>fs.s3a.endpoint</name>\n  <value>s3.eu-west-1.amazonaws.com</value>\n</property>", [sec], ["<name>fs.s3a.secret.key</name>", "<value>s3.eu-west-1.amazonaws.com</value>"]),
        lambda: (f"spark-submit \\\n  --master k8s://https://{h}:6443 \\\n  --conf spark.hadoop.fs.s3a.access.key={ak} \\\n  --conf spark.hadoop.fs.s3a.secret.key={sec} \\\n  --conf spark.hadoop.fs.s3a.endpoint=http://minio.data:9000 \\\n  jobs/{job}.py", [sec], [f"jobs/{job}.py", "spark.hadoop.fs.s3a.endpoint=http://minio.data:9000"]),
        lambda: (f"# conf/spark-defaults.conf\nspark.sql.shuffle.partitions  200\nspark.hadoop.fs.azure.account.key.{acct}.dfs.core.windows.net  {az}\nspark.eventLog.enabled  true", [az], ["spark.sql.shuffle.partitions  200", f"{acct}.dfs.core.windows.net"]),
        lambda: (f'spark = (\n    SparkSession.builder.appName("{job}")\n    .config("spark.hadoop.fs.s3a.access.key", "{ak}")\n    .config("spark.hadoop.fs.s3a.secret.key", "{sec}")\n    .getOrCreate()\n)', [sec], [f'appName("{job}")', ".getOrCreate()"]),
        lambda: (f"<property>\n  <name>javax.jdo.option.ConnectionURL</name>\n  <value>jdbc:postgresql://{h}:5432/metastore</value>\n</property>\n<property>\n  <name>javax.jdo.option.ConnectionPassword</name>\n  <value>{p}</value>\n</property>", [p], ["javax.jdo.option.ConnectionPassword", f"jdbc:postgresql://{h}:5432/metastore"]),
    ])


def s_kafka(i: int) -> Item:
    ckey, csec = run(16, string.ascii_uppercase + string.digits), run(64, B64)
    u, p, p2, p3 = RNG.choice(DB_USERS), password(), password(), password()
    cl, srkey, srsec = run(5, LOW), run(16, string.ascii_uppercase + string.digits), run(64, B64)
    return pick(i, [
        lambda: (f"# client.properties\nbootstrap.servers=pkc-{cl}.us-east-1.aws.confluent.cloud:9092\nsecurity.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username='{ckey}' password='{csec}';", [csec], ["security.protocol=SASL_SSL", f"pkc-{cl}.us-east-1.aws.confluent.cloud:9092"]),
        lambda: (f'conf = {{\n    "bootstrap.servers": "pkc-{cl}.europe-west1.gcp.confluent.cloud:9092",\n    "security.protocol": "SASL_SSL",\n    "sasl.mechanisms": "PLAIN",\n    "sasl.username": "{ckey}",\n    "sasl.password": "{csec}",\n    "group.id": "feature-builder",\n}}\nconsumer = Consumer(conf)', [csec], ['"group.id": "feature-builder"', "consumer = Consumer(conf)"]),
        lambda: (f'sasl.mechanism=SCRAM-SHA-512\nsecurity.protocol=SASL_SSL\nsasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n    username="{u}" \\\n    password="{p}";', [p], ["sasl.mechanism=SCRAM-SHA-512", f'username="{u}"']),
        lambda: (f"security.protocol=SSL\nssl.keystore.location=/etc/kafka/secrets/client.keystore.jks\nssl.keystore.password={p}\nssl.key.password={p2}\nssl.truststore.location=/etc/kafka/secrets/client.truststore.jks\nssl.truststore.password={p3}", [p, p2, p3], ["ssl.keystore.location=/etc/kafka/secrets/client.keystore.jks", "security.protocol=SSL"]),
        lambda: (f"schema.registry.url=https://psrc-{cl}.us-east-2.aws.confluent.cloud\nbasic.auth.credentials.source=USER_INFO\nbasic.auth.user.info={srkey}:{srsec}", [srsec], ["basic.auth.credentials.source=USER_INFO", f"psrc-{cl}.us-east-2.aws.confluent.cloud"]),
    ])


def s_kafka_connect(i: int) -> Item:
    u, p, h, db = RNG.choice(DB_USERS), password(), RNG.choice(HOSTS), RNG.choice(DBS)
    ak, sec, bucket = akia(), aws_secret(), f"{RNG.choice(ORGS)}-cdc-archive"
    sfbody = "".join(pkcs8_body())
    debezium = {"name": f"{db}-connector", "config": {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector", "database.hostname": h,
        "database.port": "5432", "database.user": u, "database.password": p, "database.dbname": db,
        "topic.prefix": "dbserver1", "plugin.name": "pgoutput"}}
    mysql = {"name": "orders-mysql", "config": {"connector.class": "io.debezium.connector.mysql.MySqlConnector", "database.hostname": h, "database.port": "3306", "database.user": u, "database.password": p, "database.server.id": digits(6), "topic.prefix": "orders", "schema.history.internal.kafka.topic": "schema-changes.orders"}}
    jdbc = {"connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector", "connection.url": f"jdbc:postgresql://{h}:5432/{db}", "connection.user": u, "connection.password": p, "topics": "orders", "insert.mode": "upsert", "pk.mode": "record_key"}
    s3 = {"connector.class": "io.confluent.connect.s3.S3SinkConnector", "s3.bucket.name": bucket, "s3.region": "eu-west-1", "aws.access.key.id": ak, "aws.secret.access.key": sec, "format.class": "io.confluent.connect.s3.format.parquet.ParquetFormat", "flush.size": "10000"}
    snow = {"connector.class": "com.snowflake.kafka.connector.SnowflakeSinkConnector", "snowflake.url.name": f"{sf_account()}.snowflakecomputing.com:443", "snowflake.user.name": "KAFKA_CONNECTOR", "snowflake.private.key": sfbody, "snowflake.private.key.passphrase": p, "snowflake.database.name": "RAW", "topics": "events"}
    return pick(i, [
        lambda: (pretty(debezium), [p], ['"topic.prefix": "dbserver1"', f'"database.hostname": "{h}"']),
        lambda: (f"curl -i -X POST -H \"Accept:application/json\" -H \"Content-Type:application/json\" localhost:8083/connectors/ -d '{compact(mysql)}'", [p], ["localhost:8083/connectors/", '"topic.prefix":"orders"']),
        lambda: (f"curl -s -X PUT -H 'Content-Type: application/json' localhost:8083/connectors/orders-sink/config -d '{json.dumps(jdbc)}'", [p], ['"insert.mode": "upsert"', f'"connection.url": "jdbc:postgresql://{h}:5432/{db}"']),
        lambda: (f"$ curl -s localhost:8083/connectors/s3-archive/config | jq .\n{pretty(s3)}", [sec], [f'"s3.bucket.name": "{bucket}"', '"flush.size": "10000"']),
        lambda: (pretty({"name": "snowflake-sink", "config": snow}), [sfbody, p], ['"snowflake.user.name": "KAFKA_CONNECTOR"', '"snowflake.database.name": "RAW"']),
    ])


def s_bi(i: int) -> Item:
    p, pa, h, k, k2 = password(), apw(), RNG.choice(HOSTS), b64bytes(32), hexrun(40)
    sess, org = uid(), RNG.choice(ORGS)
    return pick(i, [
        lambda: (f"MB_DB_TYPE=postgres\nMB_DB_DBNAME=metabaseappdb\nMB_DB_PORT=5432\nMB_DB_USER=metabase\nMB_DB_PASS={p}\nMB_DB_HOST={h}\nMB_ENCRYPTION_SECRET_KEY={k}", [p, k], ["MB_DB_DBNAME=metabaseappdb", f"MB_DB_HOST={h}"]),
        lambda: (f"# superset_config.py\nSECRET_KEY = '{k}'\nSQLALCHEMY_DATABASE_URI = 'postgresql://superset:{pa}@{h}:5432/superset'\nFEATURE_FLAGS = {{\"ALERT_REPORTS\": True}}", [k, pa], ['FEATURE_FLAGS = {"ALERT_REPORTS": True}', f"@{h}:5432/superset"]),
        lambda: (f"REDASH_COOKIE_SECRET={k2}\nREDASH_SECRET_KEY={hexrun(40)}\nREDASH_DATABASE_URL=postgresql://postgres@postgres/postgres\nREDASH_REDIS_URL=redis://redis:6379/0", [k2], ["REDASH_DATABASE_URL=postgresql://postgres@postgres/postgres", "REDASH_REDIS_URL=redis://redis:6379/0"]),
        lambda: (f"$ superset fab create-admin --username admin --firstname Superset --lastname Admin --email admin@{org}.com --password '{p}'\nRecognized Database Authentications.\nAdmin User admin created.", [p], ["Admin User admin created.", "--username admin"]),
        lambda: (f"$ curl -s -X POST -H 'Content-Type: application/json' -d '{{\"username\": \"analyst@{org}.com\", \"password\": \"{p}\"}}' http://localhost:3000/api/session\n{{\"id\":\"{sess}\"}}", [p, sess], ["http://localhost:3000/api/session", f"analyst@{org}.com"]),
    ])


def s_trino(i: int) -> Item:
    u, p, pa, h, db, org = RNG.choice(DB_USERS), password(), apw(), RNG.choice(HOSTS), RNG.choice(DBS), RNG.choice(ORGS)
    k, k2 = run(40, B64URL), b64bytes(48)
    return pick(i, [
        lambda: (f"# etc/catalog/postgresql.properties\nconnector.name=postgresql\nconnection-url=jdbc:postgresql://{h}:5432/{db}\nconnection-user={u}\nconnection-password={p}", [p], ["connector.name=postgresql", f"connection-url=jdbc:postgresql://{h}:5432/{db}"]),
        lambda: (f"jdbc:trino://trino.{org}.com:443/hive/default?SSL=true&user={u}&password={pa}", [pa], [f"trino.{org}.com:443/hive/default", "SSL=true"]),
        lambda: (f'conn = trino.dbapi.connect(\n    host="trino.{org}.com", port=443, user="{u}",\n    auth=trino.auth.BasicAuthentication("{u}", "{p}"),\n    http_scheme="https", catalog="hive", schema="default",\n)', [p], ['catalog="hive"', f'host="trino.{org}.com"']),
        lambda: (f"http-server.authentication.type=OAUTH2\nhttp-server.authentication.oauth2.issuer=https://auth.{org}.com\nhttp-server.authentication.oauth2.client-id=trino\nhttp-server.authentication.oauth2.client-secret={k}\ninternal-communication.shared-secret={k2}", [k, k2], ["http-server.authentication.oauth2.client-id=trino", "http-server.authentication.type=OAUTH2"]),
        lambda: (f"$ TRINO_PASSWORD='{p}' trino --server https://trino.{org}.com:443 --user {u} --password --catalog hive\ntrino> SHOW SCHEMAS;", [p], ["--catalog hive", "SHOW SCHEMAS;"]),
    ])


# -- ML and AI tooling -------------------------------------------------------------------------
def s_huggingface(i: int) -> Item:
    t, user, repo = hf_token(), RNG.choice(USERS), repo_id()
    name = RNG.choice(["ci-read", "laptop-write", "spaces-deploy", "train-cluster"])
    return pick(i, [
        lambda: (f"$ huggingface-cli login --token {t} --add-to-git-credential\nToken is valid (permission: write).\nYour token has been saved in your configured git credential helpers (store).\nYour token has been saved to /home/{user}/.cache/huggingface/token\nLogin successful", [t], ["Token is valid (permission: write).", f"/home/{user}/.cache/huggingface/token"]),
        lambda: (f"$ cat ~/.cache/huggingface/token\n{t}", [t], ["cat ~/.cache/huggingface/token"]),
        lambda: (f"export HF_TOKEN={t}\npython train.py --model_name_or_path {repo} --output_dir outputs/{repo.split('/')[1]}", [t], [f"--model_name_or_path {repo}", "python train.py"]),
        lambda: (f'from huggingface_hub import login\nlogin(token="{t}")\nmodel = AutoModelForCausalLM.from_pretrained("{repo}")', [t], [f'from_pretrained("{repo}")', "from huggingface_hub import login"]),
        lambda: (f"$ git clone https://{user}:{t}@huggingface.co/{repo}\nCloning into '{repo.split('/')[1]}'...", [t], [f"huggingface.co/{repo}", f"Cloning into '{repo.split('/')[1]}'..."]),
        lambda: (f"curl https://router.huggingface.co/v1/chat/completions \\\n  -H \"Authorization: Bearer {t}\" \\\n  -H 'Content-Type: application/json' \\\n  -d '{{\"model\": \"{repo}\", \"messages\": [{{\"role\": \"user\", \"content\": \"ping\"}}]}}'", [t], ["https://router.huggingface.co/v1/chat/completions", f'"model": "{repo}"']),
        lambda: (f"$ hf auth login --token {t}\nThe token `{name}` has been saved to /home/{user}/.cache/huggingface/stored_tokens\nLogin successful.\nThe current active token is: `{name}`", [t], [f"The current active token is: `{name}`", "stored_tokens"]),
    ])


def s_wandb(i: int) -> Item:
    k, user, proj, team, org = wandb_key(), RNG.choice(USERS), RNG.choice(PROJECTS), RNG.choice(TEAMS), RNG.choice(ORGS)
    return pick(i, [
        lambda: (f"$ wandb login {k}\nwandb: Appending key for api.wandb.ai to your netrc file: /home/{user}/.netrc", [k], ["Appending key for api.wandb.ai to your netrc file", f"/home/{user}/.netrc"]),
        lambda: (f"$ cat ~/.netrc\nmachine api.wandb.ai\n  login user\n  password {k}", [k], ["machine api.wandb.ai", "cat ~/.netrc"]),
        lambda: (f"WANDB_API_KEY={k}\nWANDB_PROJECT={proj}\nWANDB_ENTITY={team}\nWANDB_LOG_MODEL=checkpoint", [k], [f"WANDB_PROJECT={proj}", f"WANDB_ENTITY={team}"]),
        lambda: (f'import wandb\nwandb.login(key="{k}")\nrun = wandb.init(project="{proj}", entity="{team}", config={{"lr": 3e-4, "epochs": 10}})', [k], [f'project="{proj}"', '"lr": 3e-4']),
        lambda: (f"docker run --gpus all --rm -e WANDB_API_KEY={k} -e WANDB_PROJECT={proj} -v $PWD:/workspace ghcr.io/{org}/trainer:2.3 python train.py", [k], [f"ghcr.io/{org}/trainer:2.3", f"WANDB_PROJECT={proj}"]),
    ])


def s_kaggle(i: int) -> Item:
    k, user, comp = hexrun(32), f"{RNG.choice(USERS).replace('-', '')}{digits(2)}", RNG.choice(["titanic", "house-prices-advanced-regression-techniques", "store-sales-time-series-forecasting", "digit-recognizer"])
    return pick(i, [
        lambda: (f'$ cat ~/.kaggle/kaggle.json\n{{"username":"{user}","key":"{k}"}}', [k], [f'"username":"{user}"', "~/.kaggle/kaggle.json"]),
        lambda: (f'mkdir -p ~/.kaggle\ncat > ~/.kaggle/kaggle.json <<EOF\n{{"username": "{user}", "key": "{k}"}}\nEOF\nchmod 600 ~/.kaggle/kaggle.json', [k], ["chmod 600 ~/.kaggle/kaggle.json", f'"username": "{user}"']),
        lambda: (f"export KAGGLE_USERNAME={user}\nexport KAGGLE_KEY={k}\nkaggle competitions download -c {comp}", [k], [f"KAGGLE_USERNAME={user}", f"kaggle competitions download -c {comp}"]),
        lambda: (f"import os\nos.environ['KAGGLE_USERNAME'] = '{user}'\nos.environ['KAGGLE_KEY'] = '{k}'\nfrom kaggle.api.kaggle_api_extended import KaggleApi", [k], [f"os.environ['KAGGLE_USERNAME'] = '{user}'", "KaggleApi"]),
    ])


def s_mlflow(i: int) -> Item:
    u, p, pa, org, h = RNG.choice(USERS), password(), apw(), RNG.choice(ORGS), RNG.choice(HOSTS)
    tok, host, bucket, n = dapi(), dbx_host(), f"{RNG.choice(ORGS)}-ml-artifacts", RNG.randrange(1, 40)
    return pick(i, [
        lambda: (f"export MLFLOW_TRACKING_URI=https://{u}:{pa}@mlflow.{org}.internal\nmlflow runs list --experiment-id {n}", [pa], [f"mlflow.{org}.internal", f"mlflow runs list --experiment-id {n}"]),
        lambda: (f"MLFLOW_TRACKING_URI=https://mlflow.{org}.internal\nMLFLOW_TRACKING_USERNAME={u}\nMLFLOW_TRACKING_PASSWORD={p}", [p], [f"MLFLOW_TRACKING_USERNAME={u}", f"MLFLOW_TRACKING_URI=https://mlflow.{org}.internal"]),
        lambda: (f"mlflow server \\\n  --backend-store-uri postgresql://mlflow:{pa}@{h}:5432/mlflow \\\n  --artifacts-destination s3://{bucket}/mlflow \\\n  --host 0.0.0.0 --port 5000", [pa], [f"--artifacts-destination s3://{bucket}/mlflow", "--host 0.0.0.0 --port 5000"]),
        lambda: (f'os.environ["DATABRICKS_HOST"] = "https://{host}"\nos.environ["DATABRICKS_TOKEN"] = "{tok}"\nmlflow.set_tracking_uri("databricks")', [tok], [f'"https://{host}"', 'mlflow.set_tracking_uri("databricks")']),
    ])


def s_ml_tracking_keys(i: int) -> Item:
    comet, team, proj = run(25), RNG.choice(TEAMS), RNG.choice(PROJECTS)
    neptune = b64(compact({"api_address": "https://app.neptune.ai", "api_url": "https://app.neptune.ai", "api_key": uid()}).encode())
    r8, owner, model, version = "r8_" + run(37), RNG.choice(ORGS), RNG.choice(MODELS), hexrun(64)
    cak, csk = run(30, string.ascii_uppercase + string.digits), run(50)
    return pick(i, [
        lambda: (f'import comet_ml\ncomet_ml.login(api_key="{comet}")\nexperiment = comet_ml.start(project_name="{proj}", workspace="{team}")', [comet], [f'project_name="{proj}"', f'workspace="{team}"']),
        lambda: (f"# ~/.comet.config\n[comet]\napi_key = {comet}\nworkspace = {team}\nproject_name = {proj}", [comet], [f"workspace = {team}", f"project_name = {proj}"]),
        lambda: (f'export NEPTUNE_API_TOKEN="{neptune}"\nexport NEPTUNE_PROJECT="{team}/{proj}"', [neptune], [f'NEPTUNE_PROJECT="{team}/{proj}"']),
        lambda: (f'export REPLICATE_API_TOKEN={r8}\npython -c \'import replicate; print(replicate.run("{owner}/{model}:{version}", input={{"prompt": "hi"}}))\'', [r8], [f"{owner}/{model}:{version}"]),
        lambda: (f'api {{\n    web_server: https://app.clear.ml\n    api_server: https://api.clear.ml\n    files_server: https://files.clear.ml\n    credentials {{\n        "access_key" = "{cak}"\n        "secret_key" = "{csk}"\n    }}\n}}', [csk], ["api_server: https://api.clear.ml", "web_server: https://app.clear.ml"]),
    ])


def s_llm_keys(i: int) -> Item:
    gsk, mis, tog, coh = "gsk_" + run(52), run(32), hexrun(64), run(40)
    orr, ppl = "sk-or-v1-" + hexrun(64), "pplx-" + run(48)
    return pick(i, [
        lambda: (f'from groq import Groq\nclient = Groq(api_key="{gsk}")\nchat = client.chat.completions.create(model="llama-3.3-70b-versatile", messages=msgs)', [gsk], ['model="llama-3.3-70b-versatile"', "from groq import Groq"]),
        lambda: (f"MISTRAL_API_KEY={mis}\nMISTRAL_MODEL=mistral-large-latest\nMAX_TOKENS=1024", [mis], ["MISTRAL_MODEL=mistral-large-latest", "MAX_TOKENS=1024"]),
        lambda: (f'curl -X POST https://api.together.xyz/v1/chat/completions \\\n  -H "Authorization: Bearer {tog}" \\\n  -H "Content-Type: application/json"', [tog], ["https://api.together.xyz/v1/chat/completions"]),
        lambda: (f'import cohere\nco = cohere.ClientV2(api_key="{coh}")\nresp = co.embed(model="embed-v4.0", texts=docs, input_type="search_document")', [coh], ['model="embed-v4.0"', 'input_type="search_document"']),
        lambda: (f'const client = new OpenAI({{\n  baseURL: "https://openrouter.ai/api/v1",\n  apiKey: "{orr}",\n}});', [orr], ['baseURL: "https://openrouter.ai/api/v1"']),
        lambda: (f"$ export PERPLEXITY_API_KEY={ppl}\n$ python research_agent.py --query 'delta lake vacuum retention'", [ppl], ["python research_agent.py"]),
    ])


def s_langsmith(i: int) -> Item:
    pt, sk, proj = f"lsv2_pt_{hexrun(32)}_{hexrun(10)}", f"lsv2_sk_{hexrun(32)}_{hexrun(10)}", RNG.choice(PROJECTS)
    lfs, lfp = "sk-lf-" + uid(), "pk-lf-" + uid()
    return pick(i, [
        lambda: (f"LANGSMITH_TRACING=true\nLANGSMITH_ENDPOINT=https://api.smith.langchain.com\nLANGSMITH_API_KEY={pt}\nLANGSMITH_PROJECT={proj}", [pt], ["LANGSMITH_ENDPOINT=https://api.smith.langchain.com", f"LANGSMITH_PROJECT={proj}"]),
        lambda: (f'os.environ["LANGCHAIN_TRACING_V2"] = "true"\nos.environ["LANGCHAIN_API_KEY"] = "{sk}"\nos.environ["LANGCHAIN_PROJECT"] = "{proj}"', [sk], ['os.environ["LANGCHAIN_TRACING_V2"] = "true"', f'"{proj}"']),
        lambda: (f'from langsmith import Client\nclient = Client(api_key="{pt}")\ndataset = client.create_dataset("{proj}-eval")', [pt], [f'client.create_dataset("{proj}-eval")']),
        lambda: (f"LANGFUSE_SECRET_KEY={lfs}\nLANGFUSE_PUBLIC_KEY={lfp}\nLANGFUSE_HOST=https://cloud.langfuse.com", [lfs], [f"LANGFUSE_PUBLIC_KEY={lfp}", "LANGFUSE_HOST=https://cloud.langfuse.com"]),
    ])


def s_vector_db(i: int) -> Item:
    pcsk, legacy, idx = f"pcsk_{run(5)}_{run(63)}", uid(), RNG.choice(["docs-index", "products", "support-kb"])
    host = f"https://{idx}-{hexrun(7)}.svc.aped-{digits(4)}-{hexrun(4)}.pinecone.io"
    qk, cluster, wk, ok = api_key(), uid(), run(40), openai_key()
    u, p, h = RNG.choice(DB_USERS), password(), RNG.choice(HOSTS)
    wc = run(14, LOW)
    return pick(i, [
        lambda: (f'from pinecone import Pinecone\npc = Pinecone(api_key="{pcsk}")\nindex = pc.Index(host="{host}")', [pcsk], [f'host="{host}"']),
        lambda: (f'curl -s "https://api.pinecone.io/indexes" \\\n  -H "Api-Key: {legacy}" \\\n  -H "X-Pinecone-API-Version: 2025-04"', [legacy], ['"X-Pinecone-API-Version: 2025-04"', "https://api.pinecone.io/indexes"]),
        lambda: (f"curl -X GET 'https://{cluster}.us-east4-0.gcp.cloud.qdrant.io:6333/collections' \\\n  --header 'api-key: {qk}'", [qk], [f"https://{cluster}.us-east4-0.gcp.cloud.qdrant.io:6333/collections"]),
        lambda: (f'client = QdrantClient(\n    url="https://{cluster}.eu-central-1-0.aws.cloud.qdrant.io:6333",\n    api_key="{qk}",\n)\nclient.get_collections()', [qk], [f"https://{cluster}.eu-central-1-0.aws.cloud.qdrant.io:6333", "client.get_collections()"]),
        lambda: (f'client = weaviate.connect_to_weaviate_cloud(\n    cluster_url="https://{wc}.c0.europe-west3.gcp.weaviate.cloud",\n    auth_credentials=Auth.api_key("{wk}"),\n    headers={{"X-OpenAI-Api-Key": "{ok}"}},\n)', [wk, ok], [f"https://{wc}.c0.europe-west3.gcp.weaviate.cloud"]),
        lambda: (f'client = MilvusClient(uri="http://{h}:19530", token="{u}:{p}")\nclient.list_collections()', [p], [f"http://{h}:19530", "client.list_collections()"]),
    ])


def nb_json(source: list[str]) -> str:
    cell = {"cell_type": "code", "execution_count": RNG.randrange(1, 30), "id": hexrun(8), "metadata": {}, "outputs": [], "source": source}
    return json.dumps(cell, indent=1)


def s_notebook_env(i: int) -> Item:
    ok, hf, wk, gsk, ant, proj = openai_key(), hf_token(), wandb_key(), "gsk_" + run(52), anthropic_key(), RNG.choice(PROJECTS)
    return pick(i, [
        lambda: (f'# In[3]:\n\n\nimport os\nos.environ["OPENAI_API_KEY"] = "{ok}"\nos.environ["HF_TOKEN"] = "{hf}"', [ok, hf], ["# In[3]:", "import os"]),
        lambda: (nb_json(["import os\n", f'os.environ["GROQ_API_KEY"] = "{gsk}"\n', "from langchain_groq import ChatGroq"]), [gsk], ['"cell_type": "code"', "from langchain_groq import ChatGroq"]),
        lambda: (f"%env WANDB_API_KEY={wk}\n%env WANDB_PROJECT={proj}", [wk], [f"%env WANDB_PROJECT={proj}"]),
        lambda: (f"%env ANTHROPIC_API_KEY {ant}\nenv: ANTHROPIC_API_KEY={ant}", [ant], ["%env ANTHROPIC_API_KEY", "env: ANTHROPIC_API_KEY="]),
        lambda: (f"!pip install -q transformers peft\n!huggingface-cli login --token {hf}", [hf], ["!pip install -q transformers peft"]),
    ])


# -- agent and editor tooling ------------------------------------------------------------------
def s_mcp_json(i: int) -> Item:
    gh, brave, lin, hf = ghp(), "BSA" + run(28), "lin_api_" + run(40), hf_token()
    u, pa, h, db = RNG.choice(DB_USERS), apw(), RNG.choice(HOSTS), RNG.choice(DBS)
    xoxb, team = slack_bot(), "T0" + run(8, string.ascii_uppercase + string.digits)
    github = {"mcpServers": {"github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"], "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": gh}}}}
    brave_cfg = {"mcpServers": {"brave-search": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-brave-search"], "env": {"BRAVE_API_KEY": brave}}}}
    cursor = {"mcpServers": {"linear": {"url": "https://mcp.linear.app/sse", "headers": {"Authorization": f"Bearer {lin}"}}}}
    vscode = {"servers": {"huggingface": {"type": "http", "url": "https://huggingface.co/mcp", "headers": {"Authorization": f"Bearer {hf}"}}}}
    pg = {"mcpServers": {"postgres": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-postgres", f"postgresql://{u}:{pa}@{h}:5432/{db}"]}}}
    slack = {"mcpServers": {"slack": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-slack"], "env": {"SLACK_BOT_TOKEN": xoxb, "SLACK_TEAM_ID": team}}}}
    return pick(i, [
        lambda: (f"$ cat .mcp.json\n{pretty(github)}", [gh], ['"@modelcontextprotocol/server-github"', '"command": "npx"']),
        lambda: (f"// ~/Library/Application Support/Claude/claude_desktop_config.json\n{pretty(brave_cfg)}", [brave], ['"@modelcontextprotocol/server-brave-search"', "claude_desktop_config.json"]),
        lambda: (f"// .cursor/mcp.json\n{pretty(cursor)}", [lin], ['"url": "https://mcp.linear.app/sse"', ".cursor/mcp.json"]),
        lambda: (f"// .vscode/mcp.json\n{pretty(vscode)}", [hf], ['"url": "https://huggingface.co/mcp"', '"type": "http"']),
        lambda: (pretty(pg), [pa], ['"@modelcontextprotocol/server-postgres"', f"@{h}:5432/{db}"]),
        lambda: (pretty(slack), [xoxb], [f'"SLACK_TEAM_ID": "{team}"', '"@modelcontextprotocol/server-slack"']),
    ])


def s_mcp_cli(i: int) -> Item:
    gh, ntn, ctx, fc = ghp(), f"ntn_{digits(12)}{run(34)}", "ctx7sk-" + uid(), "fc-" + hexrun(32)
    vsc = {"name": "firecrawl", "command": "npx", "args": ["-y", "firecrawl-mcp"], "env": {"FIRECRAWL_API_KEY": fc}}
    return pick(i, [
        lambda: (f"$ claude mcp add github --env GITHUB_PERSONAL_ACCESS_TOKEN={gh} -- npx -y @modelcontextprotocol/server-github\nAdded stdio MCP server github with command: npx -y @modelcontextprotocol/server-github to local config", [gh], ["Added stdio MCP server github", "-- npx -y @modelcontextprotocol/server-github"]),
        lambda: (f'$ claude mcp add --transport http notion https://mcp.notion.com/mcp --header "Authorization: Bearer {ntn}"', [ntn], ["--transport http notion https://mcp.notion.com/mcp"]),
        lambda: (f"$ codex mcp add context7 --env CONTEXT7_API_KEY={ctx} -- npx -y @upstash/context7-mcp", [ctx], ["-- npx -y @upstash/context7-mcp", "codex mcp add context7"]),
        lambda: (f"code --add-mcp '{compact(vsc)}'", [fc], ['"args":["-y","firecrawl-mcp"]', "code --add-mcp"]),
    ])


def s_codex_config(i: int) -> Item:
    az, sk, gpat, figd = hexrun(32), "sk-" + run(48, B64URL), github_pat(), "figd_" + run(40, B64URL)
    org = RNG.choice(ORGS)
    return pick(i, [
        lambda: (f'# ~/.codex/config.toml\n[model_providers.azure]\nname = "Azure"\nbase_url = "https://{org}-openai.openai.azure.com/openai"\nwire_api = "responses"\nquery_params = {{ api-version = "2025-04-01-preview" }}\nhttp_headers = {{ "api-key" = "{az}" }}', [az], [f'base_url = "https://{org}-openai.openai.azure.com/openai"', 'wire_api = "responses"']),
        lambda: (f'[model_providers.proxy]\nname = "LLM proxy"\nbase_url = "https://llm.{org}.internal/v1"\nexperimental_bearer_token = "{sk}"\n\n[profiles.work]\nmodel_provider = "proxy"', [sk], [f'base_url = "https://llm.{org}.internal/v1"', 'model_provider = "proxy"']),
        lambda: (f'[mcp_servers.github]\ncommand = "npx"\nargs = ["-y", "@modelcontextprotocol/server-github"]\nenv = {{ "GITHUB_PERSONAL_ACCESS_TOKEN" = "{gpat}" }}', [gpat], ["[mcp_servers.github]", 'args = ["-y", "@modelcontextprotocol/server-github"]']),
        lambda: (f'[mcp_servers.figma]\nurl = "https://mcp.figma.com/mcp"\nhttp_headers = {{ "X-Figma-Token" = "{figd}" }}', [figd], ['url = "https://mcp.figma.com/mcp"', "[mcp_servers.figma]"]),
    ])


def s_aider_continue(i: int) -> Item:
    ant, gem, orr, ds, mis = anthropic_key(), gemini_key(), "sk-or-v1-" + hexrun(64), "sk-" + hexrun(32), run(32)
    cont = {"models": [{"title": "Codestral", "provider": "mistral", "model": "codestral-latest", "apiKey": mis}], "tabAutocompleteModel": {"title": "Codestral", "provider": "mistral", "model": "codestral-latest"}}
    return pick(i, [
        lambda: (f"# .aider.conf.yml\nmodel: sonnet\nanthropic-api-key: {ant}\nauto-commits: false\ndark-mode: true", [ant], ["auto-commits: false", "model: sonnet"]),
        lambda: (f"# ~/.aider.conf.yml\napi-key:\n  - gemini={gem}\n  - openrouter={orr}\nmodel: openrouter/anthropic/claude-sonnet-4", [gem, orr], ["model: openrouter/anthropic/claude-sonnet-4", "  - gemini="]),
        lambda: (f"$ aider --model deepseek/deepseek-chat --api-key deepseek={ds} src/etl/load.py", [ds], ["--model deepseek/deepseek-chat", "src/etl/load.py"]),
        lambda: (f"# ~/.continue/config.yaml\nname: Local Assistant\nversion: 1.0.0\nschema: v1\nmodels:\n  - name: Claude Sonnet\n    provider: anthropic\n    model: claude-sonnet-4-20250514\n    apiKey: {ant}\n    roles:\n      - chat\n      - edit", [ant], ["provider: anthropic", "model: claude-sonnet-4-20250514"]),
        lambda: (pretty(cont), [mis], ['"model": "codestral-latest"', '"provider": "mistral"']),
    ])


def s_openai_compat(i: int) -> Item:
    k, ok, ant, az, master, repo = api_key(), openai_key(), anthropic_key(), hexrun(32), "sk-" + run(22), repo_id()
    orgid, projid, org = "org-" + run(24), "proj_" + run(24), RNG.choice(ORGS)
    return pick(i, [
        lambda: (f'client = OpenAI(base_url="http://localhost:8000/v1", api_key="{k}")\nresp = client.chat.completions.create(model="{repo}", messages=msgs)', [k], ['base_url="http://localhost:8000/v1"', f'model="{repo}"']),
        lambda: (f"$ vllm serve {repo} --api-key {k} --port 8000 --max-model-len 8192", [k], [f"vllm serve {repo}", "--max-model-len 8192"]),
        lambda: (f'const openai = new OpenAI({{\n  apiKey: "{ok}",\n  organization: "{orgid}",\n  project: "{projid}",\n}});', [ok], [f'organization: "{orgid}"', f'project: "{projid}"']),
        lambda: (f"# litellm config.yaml\ngeneral_settings:\n  master_key: {master}\nmodel_list:\n  - model_name: gpt-4o\n    litellm_params:\n      model: azure/gpt-4o\n      api_base: https://{org}-openai.openai.azure.com/\n      api_key: {az}", [master, az], ["model: azure/gpt-4o", f"api_base: https://{org}-openai.openai.azure.com/"]),
        lambda: (f'import anthropic\nclient = anthropic.Anthropic(api_key="{ant}")\nmsg = client.messages.create(model="claude-sonnet-4-20250514", max_tokens=1024, messages=msgs)', [ant], ['model="claude-sonnet-4-20250514"', "max_tokens=1024"]),
    ])


def s_agent_dotenv(i: int) -> Item:
    tav, serper, e2b, fc, exa = "tvly-" + run(32), hexrun(40), "e2b_" + hexrun(40), "fc-" + hexrun(32), uid()
    bb, bbp = "bb_live_" + run(27, B64URL), uid()
    return pick(i, [
        lambda: (f"# .env.local\nTAVILY_API_KEY={tav}\nNEXT_PUBLIC_APP_URL=http://localhost:3000", [tav], ["NEXT_PUBLIC_APP_URL=http://localhost:3000", ".env.local"]),
        lambda: (f"SERPER_API_KEY={serper}\nOPENAI_MODEL_NAME=gpt-4o-mini\nCREWAI_TELEMETRY_OPT_OUT=true", [serper], ["OPENAI_MODEL_NAME=gpt-4o-mini", "CREWAI_TELEMETRY_OPT_OUT=true"]),
        lambda: (f"E2B_API_KEY={e2b}\nE2B_TEMPLATE_ID=code-interpreter-v1", [e2b], ["E2B_TEMPLATE_ID=code-interpreter-v1"]),
        lambda: (f"FIRECRAWL_API_KEY={fc}\nEXA_API_KEY={exa}\nSEARCH_PROVIDER=exa", [fc, exa], ["SEARCH_PROVIDER=exa"]),
        lambda: (f"BROWSERBASE_API_KEY={bb}\nBROWSERBASE_PROJECT_ID={bbp}\nHEADLESS=true", [bb], [f"BROWSERBASE_PROJECT_ID={bbp}", "HEADLESS=true"]),
    ])


# -- package registries ------------------------------------------------------------------------
def s_python_index(i: int) -> Item:
    u, p, pa, org, repo = RNG.choice(USERS), password(), apw(), RNG.choice(ORGS), RNG.choice(["internal", "private", "mlwheels"])
    pkg, gl, pypi = RNG.choice(PYPKGS), glpat(), pypi_token()
    return pick(i, [
        lambda: (f"$ poetry config http-basic.{repo} {u} '{p}'", [p], [f"http-basic.{repo}", "poetry config"]),
        lambda: (f"$ poetry config pypi-token.pypi {pypi}\n$ poetry publish --build", [pypi], ["poetry config pypi-token.pypi", "poetry publish --build"]),
        lambda: (f"export POETRY_HTTP_BASIC_{repo.upper()}_USERNAME={u}\nexport POETRY_HTTP_BASIC_{repo.upper()}_PASSWORD='{p}'\npoetry install --no-root", [p], [f"POETRY_HTTP_BASIC_{repo.upper()}_USERNAME={u}", "poetry install --no-root"]),
        lambda: (f"$ uv pip install --index-url https://{u}:{pa}@pypi.{org}.internal/simple/ {pkg}", [pa], [f"pypi.{org}.internal/simple/", "uv pip install --index-url"]),
        lambda: (f"UV_INDEX_{repo.upper()}_USERNAME=__token__\nUV_INDEX_{repo.upper()}_PASSWORD={gl}\nuv sync --locked", [gl], [f"UV_INDEX_{repo.upper()}_USERNAME=__token__", "uv sync --locked"]),
        lambda: (f'[[tool.uv.index]]\nname = "{repo}"\nurl = "https://{u}:{pa}@nexus.{org}.internal/repository/pypi/simple"\nexplicit = true', [pa], [f'name = "{repo}"', "explicit = true"]),
    ])


def s_conda(i: int) -> Item:
    tok, org, pfx = conda_token(), RNG.choice(ORGS), "pfx_" + run(40)
    return pick(i, [
        lambda: (f"# ~/.condarc\nchannels:\n  - https://conda.anaconda.org/t/{tok}/{org}\n  - conda-forge\nchannel_priority: strict", [tok], ["channel_priority: strict", f"/{org}"]),
        lambda: (f"$ conda config --add channels https://conda.anaconda.org/t/{tok}/{org}-private", [tok], ["conda config --add channels", f"/{org}-private"]),
        lambda: (f"$ conda token set {tok}\nSuccess! Your token was validated and Conda has been configured.", [tok], ["Success! Your token was validated"]),
        lambda: (f"$ anaconda auth --create --name ci-download --scopes 'conda:download'\n{tok}", [tok], ["--name ci-download", "--scopes 'conda:download'"]),
        lambda: (f"$ pixi auth login repo.prefix.dev --token {pfx}\nAuthenticating with repo.prefix.dev", [pfx], ["Authenticating with repo.prefix.dev"]),
    ])


def s_nuget(i: int) -> Item:
    u, p, org, key, gtok = RNG.choice(USERS), password(), RNG.choice(ORGS), "oy2" + run(43, LOW), ghp()
    feed = RNG.choice(["internal", "github", "azure-artifacts"])
    pkg = f"{org.capitalize()}.Data.Client"
    return pick(i, [
        lambda: (f'<?xml version="1.0" encoding="utf-8"?>\n<configuration>\n  <packageSources>\n    <add key="{feed}" value="https://nuget.{org}.internal/v3/index.json" />\n  </packageSources>\n  <packageSourceCredentials>\n    <{feed}>\n      <add key="Username" value="{u}" />\n      <add key="ClearTextPassword" value="{p}" />\n    </{feed}>\n  </packageSourceCredentials>\n</configuration>', [p], [f'<add key="Username" value="{u}" />', f"https://nuget.{org}.internal/v3/index.json"]),
        lambda: (f'$ dotnet nuget add source "https://nuget.pkg.github.com/{org}/index.json" --name github --username {u} --password {gtok} --store-password-in-clear-text\nPackage source with Name: github added successfully.', [gtok], ["--store-password-in-clear-text", f"nuget.pkg.github.com/{org}/index.json"]),
        lambda: (f"$ dotnet nuget push bin/Release/{pkg}.1.4.2.nupkg --api-key {key} --source https://api.nuget.org/v3/index.json", [key], [f"bin/Release/{pkg}.1.4.2.nupkg", "--source https://api.nuget.org/v3/index.json"]),
        lambda: (f"> nuget setapikey {key} -source https://api.nuget.org/v3/index.json\nThe API Key was saved for 'https://api.nuget.org/v3/index.json'.", [key], ["-source https://api.nuget.org/v3/index.json"]),
    ])


def s_bundler(i: int) -> Item:
    su, sp, user, gtok, org = hexrun(8), hexrun(8), RNG.choice(USERS), ghp(), RNG.choice(ORGS)
    u, pa, gem = RNG.choice(USERS), apw(), f"{org}-etl"
    return pick(i, [
        lambda: (f"$ bundle config set --global gems.contribsys.com {su}:{sp}", [sp], ["bundle config set --global gems.contribsys.com"]),
        lambda: (f"BUNDLE_GEMS__CONTRIBSYS__COM={su}:{sp}\nBUNDLE_WITHOUT=development:test", [sp], ["BUNDLE_WITHOUT=development:test", "BUNDLE_GEMS__CONTRIBSYS__COM="]),
        lambda: (f'$ cat .bundle/config\n---\nBUNDLE_PATH: "vendor/bundle"\nBUNDLE_RUBYGEMS__PKG__GITHUB__COM: "{user}:{gtok}"', [gtok], ['BUNDLE_PATH: "vendor/bundle"', "BUNDLE_RUBYGEMS__PKG__GITHUB__COM"]),
        lambda: (f'# Gemfile\nsource "https://rubygems.org"\nsource "https://{u}:{pa}@gems.{org}.internal/" do\n  gem "{gem}", "~> 2.1"\nend', [pa], [f'gem "{gem}", "~> 2.1"', f"@gems.{org}.internal/"]),
    ])


def s_go_private(i: int) -> Item:
    org, user, gtok, gl, u, pa = RNG.choice(ORGS), RNG.choice(USERS), ghp(), glpat(), RNG.choice(USERS), apw()
    ghs = ghp("ghs_")
    return pick(i, [
        lambda: (f"go env -w GOPRIVATE=github.com/{org}/*\ncat >> ~/.netrc <<EOF\nmachine github.com login {user} password {gtok}\nEOF", [gtok], [f"GOPRIVATE=github.com/{org}/*", "machine github.com"]),
        lambda: (f'git config --global url."https://{user}:{gl}@gitlab.{org}.com/".insteadOf "https://gitlab.{org}.com/"\nexport GOPRIVATE=gitlab.{org}.com', [gl], [f"GOPRIVATE=gitlab.{org}.com", f'.insteadOf "https://gitlab.{org}.com/"']),
        lambda: (f"GOPROXY=https://{u}:{pa}@athens.{org}.internal,direct\nGONOSUMDB=github.com/{org}\nGOFLAGS=-mod=mod", [pa], [f"GONOSUMDB=github.com/{org}", f"@athens.{org}.internal,direct"]),
        lambda: (f'FROM golang:1.24 AS build\nRUN git config --global url."https://x-access-token:{ghs}@github.com/".insteadOf "https://github.com/"\nENV GOPRIVATE=github.com/{org}/*\nRUN go mod download', [ghs], ["RUN go mod download", "x-access-token:"]),
    ])


def s_artifactory(i: int) -> Item:
    org, akcp, ref, u, p, pkg = RNG.choice(ORGS), "AKCp" + run(69), jfrog_reftoken(), RNG.choice(USERS), password(), RNG.choice(NPMPKGS)
    at, nx, npmauth = jwt_like(), uid(), b64(f"{RNG.choice(USERS)}:{apw()}".encode())
    conf = {"servers": [{"url": f"https://{org}.jfrog.io/", "artifactoryUrl": f"https://{org}.jfrog.io/artifactory/", "user": u, "password": p, "accessToken": at, "serverId": f"{org}-prod", "isDefault": True}], "version": "6"}
    return pick(i, [
        lambda: (f'curl -H "X-JFrog-Art-Api: {akcp}" -T {pkg}-1.0.0.tgz "https://{org}.jfrog.io/artifactory/npm-local/{pkg}/-/{pkg}-1.0.0.tgz"', [akcp], [f"https://{org}.jfrog.io/artifactory/npm-local/"]),
        lambda: (f"$ jf config add {org}-prod --url=https://{org}.jfrog.io --access-token={ref} --interactive=false", [ref], [f"--url=https://{org}.jfrog.io", "--interactive=false"]),
        lambda: (f"$ cat ~/.jfrog/jfrog-cli.conf.v6\n{pretty(conf)}", [p, at], [f'"serverId": "{org}-prod"', f'"user": "{u}"']),
        lambda: (f"$ docker exec nexus cat /nexus-data/admin.password\n{nx}", [nx], ["/nexus-data/admin.password"]),
        lambda: (f"# .npmrc\nregistry=https://nexus.{org}.internal/repository/npm-group/\n_auth={npmauth}\nalways-auth=true", [npmauth], [f"registry=https://nexus.{org}.internal/repository/npm-group/", "always-auth=true"]),
    ])


# -- messaging, payments and SaaS --------------------------------------------------------------
def s_telegram(i: int) -> Item:
    tg, chat, name = tg_token(), "-100" + digits(10), RNG.choice(["deploy_notify", "etl_alerts", "ml_watch", "oncall_ping"])
    return pick(i, [
        lambda: (f'curl -s "https://api.telegram.org/bot{tg}/sendMessage?chat_id={chat}&text=Deploy%20finished"', [tg], [f"chat_id={chat}", "/sendMessage?"]),
        lambda: (f"Done! Congratulations on your new bot. You will find it at t.me/{name}_bot. You can now add a description, about section and profile picture for your bot, see /help for a list of commands.\n\nUse this token to access the HTTP API:\n{tg}\nKeep your token secure and store it safely, it can be used by anyone to control your bot.", [tg], [f"t.me/{name}_bot", "Use this token to access the HTTP API:"]),
        lambda: (f'app = ApplicationBuilder().token("{tg}").build()\napp.add_handler(CommandHandler("status", status))', [tg], ['CommandHandler("status", status)']),
        lambda: (f"TELEGRAM_BOT_TOKEN={tg}\nTELEGRAM_CHAT_ID={chat}", [tg], [f"TELEGRAM_CHAT_ID={chat}"]),
    ])


def s_discord(i: int) -> Item:
    sf, wtok, bot, guild = snowflake_id(), run(68, B64URL), discord_bot_token(), snowflake_id()
    return pick(i, [
        lambda: (f"curl -H \"Content-Type: application/json\" -d '{{\"content\": \"build passed\"}}' https://discord.com/api/webhooks/{sf}/{wtok}", [wtok], [f"https://discord.com/api/webhooks/{sf}/", '"content": "build passed"']),
        lambda: (f"DISCORD_TOKEN={bot}\nDISCORD_GUILD_ID={guild}", [bot], [f"DISCORD_GUILD_ID={guild}"]),
        lambda: (f'bot = commands.Bot(command_prefix="!", intents=intents)\nbot.run("{bot}")', [bot], ['command_prefix="!"']),
        lambda: (f"client.once(Events.ClientReady, c => console.log(`Ready! Logged in as ${{c.user.tag}}`));\nclient.login('{bot}');", [bot], ["Events.ClientReady"]),
    ])


def s_twilio(i: int) -> Item:
    sid, tok, sk, sks = "AC" + hexrun(32), hexrun(32), "SK" + hexrun(32), run(32)
    return pick(i, [
        lambda: (f'account_sid = "{sid}"\nauth_token = "{tok}"\nclient = Client(account_sid, auth_token)\nmessage = client.messages.create(body="Your code is 4821", from_="+15005550006", to=to)', [tok], [f'account_sid = "{sid}"', 'from_="+15005550006"']),
        lambda: (f'curl -X POST "https://api.twilio.com/2010-04-01/Accounts/{sid}/Messages.json" \\\n  --data-urlencode "To=+15005550006" \\\n  --data-urlencode "Body=ping" \\\n  -u {sid}:{tok}', [tok], [f"/Accounts/{sid}/Messages.json", '"To=+15005550006"']),
        lambda: (f"TWILIO_ACCOUNT_SID={sid}\nTWILIO_AUTH_TOKEN={tok}\nTWILIO_FROM_NUMBER=+15005550006", [tok], [f"TWILIO_ACCOUNT_SID={sid}", "TWILIO_FROM_NUMBER=+15005550006"]),
        lambda: (f"TWILIO_ACCOUNT_SID={sid}\nTWILIO_API_KEY={sk}\nTWILIO_API_SECRET={sks}", [sks], [f"TWILIO_API_KEY={sk}", f"TWILIO_ACCOUNT_SID={sid}"]),
    ])


def s_email_vendors(i: int) -> Item:
    org = RNG.choice(ORGS)
    mg, pm, dc = f"{hexrun(32)}-{hexrun(8)}-{hexrun(8)}", uid(), RNG.randrange(1, 22)
    mc, brevo, resend = f"{hexrun(32)}-us{dc}", f"xkeysib-{hexrun(64)}-{run(16)}", f"re_{run(8)}_{run(24)}"
    return pick(i, [
        lambda: (f"curl -s --user 'api:{mg}' https://api.mailgun.net/v3/mg.{org}.com/messages \\\n  -F from='Reports <reports@mg.{org}.com>' -F to=team@{org}.com -F subject='Nightly ETL'", [mg], [f"https://api.mailgun.net/v3/mg.{org}.com/messages", "--user 'api:"]),
        lambda: (f'curl "https://api.postmarkapp.com/email" -X POST -H "Accept: application/json" -H "Content-Type: application/json" -H "X-Postmark-Server-Token: {pm}" -d @message.json', [pm], ["https://api.postmarkapp.com/email", "-d @message.json"]),
        lambda: (f"MAILCHIMP_API_KEY={mc}\nMAILCHIMP_SERVER_PREFIX=us{dc}\nMAILCHIMP_LIST_ID={hexrun(10)}", [mc], [f"MAILCHIMP_SERVER_PREFIX=us{dc}"]),
        lambda: (f"curl --request POST --url https://api.brevo.com/v3/smtp/email --header 'accept: application/json' --header 'api-key: {brevo}' --header 'content-type: application/json' --data @mail.json", [brevo], ["https://api.brevo.com/v3/smtp/email", "--data @mail.json"]),
        lambda: (f"import {{ Resend }} from 'resend';\nconst resend = new Resend('{resend}');\nawait resend.emails.send({{ from: 'noreply@{org}.com', to, subject, html }});", [resend], [f"from: 'noreply@{org}.com'", "import { Resend } from 'resend';"]),
    ])


def s_payments(i: int) -> Item:
    pid, psec = "A" + run(79, B64URL), "E" + run(79, B64URL)
    merchant, bpub, bpriv = run(16, LOW), run(16, LOW), hexrun(32)
    adyen = "AQE" + run(77, B64) + "==-" + b64bytes(32) + "-" + run(16, AN + "+=~^!")
    akey, hmac, org = "live_" + run(32, UP), hexrun(64).upper(), RNG.choice(ORGS)
    sq, sqid = "EAAA" + run(60, B64URL), "sq0idp-" + run(22, B64URL)
    bt = f"access_token$production${merchant}${hexrun(32)}"
    return pick(i, [
        lambda: (f"PAYPAL_CLIENT_ID={pid}\nPAYPAL_CLIENT_SECRET={psec}\nPAYPAL_MODE=live", [psec], [f"PAYPAL_CLIENT_ID={pid}", "PAYPAL_MODE=live"]),
        lambda: (f'curl -v https://api-m.sandbox.paypal.com/v1/oauth2/token \\\n  -u "{pid}:{psec}" \\\n  -d "grant_type=client_credentials"', [psec], [pid, '-d "grant_type=client_credentials"']),
        lambda: (f'gateway = braintree.BraintreeGateway(\n    braintree.Configuration(\n        braintree.Environment.Production,\n        merchant_id="{merchant}",\n        public_key="{bpub}",\n        private_key="{bpriv}",\n    )\n)', [bpriv], [f'merchant_id="{merchant}"', f'public_key="{bpub}"']),
        lambda: (f"BT_ACCESS_TOKEN={bt}\nBT_ENVIRONMENT=production", [bt], ["BT_ENVIRONMENT=production"]),
        lambda: (f"ADYEN_API_KEY={adyen}\nADYEN_MERCHANT_ACCOUNT={org.capitalize()}ECOM\nADYEN_CLIENT_KEY={akey}\nADYEN_HMAC_KEY={hmac}", [adyen, hmac], [f"ADYEN_CLIENT_KEY={akey}", f"ADYEN_MERCHANT_ACCOUNT={org.capitalize()}ECOM"]),
        lambda: (f"SQUARE_ACCESS_TOKEN={sq}\nSQUARE_APPLICATION_ID={sqid}\nSQUARE_ENVIRONMENT=production", [sq], [f"SQUARE_APPLICATION_ID={sqid}", "SQUARE_ENVIRONMENT=production"]),
    ])


def s_algolia(i: int) -> Item:
    app, admin, search = run(10, string.ascii_uppercase + string.digits), hexrun(32), hexrun(32)
    idx = RNG.choice(["products", "docs", "jobs_prod"])
    return pick(i, [
        lambda: (f'from algoliasearch.search.client import SearchClientSync\nclient = SearchClientSync("{app}", "{admin}")\nclient.save_objects(index_name="{idx}", objects=records)', [admin], [f'"{app}"', f'index_name="{idx}"']),
        lambda: (f"ALGOLIA_APP_ID={app}\nALGOLIA_ADMIN_API_KEY={admin}\nNEXT_PUBLIC_ALGOLIA_SEARCH_KEY={search}\nALGOLIA_INDEX={idx}", [admin], [f"ALGOLIA_APP_ID={app}", f"NEXT_PUBLIC_ALGOLIA_SEARCH_KEY={search}"]),
        lambda: (f'curl -X POST \\\n  -H "X-Algolia-API-Key: {admin}" \\\n  -H "X-Algolia-Application-Id: {app}" \\\n  --data-binary @records.json \\\n  "https://{app}-dsn.algolia.net/1/indexes/{idx}/batch"', [admin], [f"X-Algolia-Application-Id: {app}", f"https://{app}-dsn.algolia.net/1/indexes/{idx}/batch"]),
        lambda: (f'$ algolia profile add --name prod --app-id "{app}" --api-key "{admin}" --default', [admin], [f'--app-id "{app}"', "--name prod"]),
    ])


def s_auth0_okta(i: int) -> Item:
    org = RNG.choice(ORGS)
    cid, csec, ses = run(32), run(64, B64URL), hexrun(64)
    ssws, ocid, osec = "00" + run(40, B64URL), "0oa" + run(17), run(64, B64URL)
    body = compact({"client_id": cid, "client_secret": csec, "audience": f"https://{org}.us.auth0.com/api/v2/", "grant_type": "client_credentials"})
    return pick(i, [
        lambda: (f"AUTH0_SECRET={ses}\nAUTH0_DOMAIN={org}.us.auth0.com\nAUTH0_CLIENT_ID={cid}\nAUTH0_CLIENT_SECRET={csec}\nAPP_BASE_URL=http://localhost:3000", [ses, csec], [f"AUTH0_CLIENT_ID={cid}", f"AUTH0_DOMAIN={org}.us.auth0.com"]),
        lambda: (f"curl --request POST --url https://{org}.us.auth0.com/oauth/token --header 'content-type: application/json' --data '{body}'", [csec], [f'"client_id":"{cid}"', f"https://{org}.us.auth0.com/oauth/token"]),
        lambda: (f'curl -s -H "Accept: application/json" -H "Authorization: SSWS {ssws}" "https://{org}.okta.com/api/v1/users?limit=25"', [ssws], [f"https://{org}.okta.com/api/v1/users?limit=25"]),
        lambda: (f'# ~/.okta/okta.yaml\nokta:\n  client:\n    orgUrl: "https://{org}.okta.com"\n    token: "{ssws}"', [ssws], [f'orgUrl: "https://{org}.okta.com"']),
        lambda: (f"OKTA_OAUTH2_ISSUER=https://{org}.okta.com/oauth2/default\nOKTA_OAUTH2_CLIENT_ID={ocid}\nOKTA_OAUTH2_CLIENT_SECRET={osec}", [osec], [f"OKTA_OAUTH2_CLIENT_ID={ocid}", f"OKTA_OAUTH2_ISSUER=https://{org}.okta.com/oauth2/default"]),
    ])


def s_shopify(i: int) -> Item:
    store = f"{RNG.choice(ORGS)}-{RNG.choice(['store', 'shop', 'outlet'])}"
    shpat, shpss, shpca, apikey = "shpat_" + hexrun(32), "shpss_" + hexrun(32), "shpca_" + hexrun(32), hexrun(32)
    return pick(i, [
        lambda: (f"SHOPIFY_ACCESS_TOKEN={shpat}\nSHOPIFY_SHOP={store}.myshopify.com\nSHOPIFY_API_VERSION=2025-01", [shpat], [f"SHOPIFY_SHOP={store}.myshopify.com", "SHOPIFY_API_VERSION=2025-01"]),
        lambda: (f'curl -X GET "https://{store}.myshopify.com/admin/api/2025-01/products.json?limit=50" \\\n  -H "X-Shopify-Access-Token: {shpat}"', [shpat], [f"https://{store}.myshopify.com/admin/api/2025-01/products.json?limit=50"]),
        lambda: (f"SHOPIFY_API_KEY={apikey}\nSHOPIFY_API_SECRET={shpss}\nSCOPES=read_products,write_orders", [shpss], [f"SHOPIFY_API_KEY={apikey}", "SCOPES=read_products,write_orders"]),
        lambda: (f'session = shopify.Session("{store}.myshopify.com", "2025-01", "{shpca}")\nshopify.ShopifyResource.activate_session(session)', [shpca], [f'"{store}.myshopify.com"', "activate_session(session)"]),
    ])


def s_workspace_tokens(i: int) -> Item:
    org = RNG.choice(ORGS)
    atl, email = f"ATATT3xFfGF0{run(171, B64URL)}={hexrun(8).upper()}", f"ci@{org}.com"
    notion, ntn, dbid = "secret_" + run(43), f"ntn_{digits(12)}{run(34)}", hexrun(32)
    lin, pat, base = "lin_api_" + run(40), f"pat{run(14)}.{hexrun(64)}", "app" + run(14)
    return pick(i, [
        lambda: (f'curl -u {email}:{atl} -H "Accept: application/json" https://{org}.atlassian.net/rest/api/3/myself', [atl], [f"https://{org}.atlassian.net/rest/api/3/myself", email]),
        lambda: (f"JIRA_URL=https://{org}.atlassian.net\nJIRA_USERNAME={email}\nJIRA_API_TOKEN={atl}", [atl], [f"JIRA_URL=https://{org}.atlassian.net", f"JIRA_USERNAME={email}"]),
        lambda: (f'notion = Client(auth="{notion}")\nresults = notion.databases.query(database_id="{dbid}")', [notion], [f'database_id="{dbid}"']),
        lambda: (f'curl https://api.notion.com/v1/users \\\n  -H "Authorization: Bearer {ntn}" \\\n  -H "Notion-Version: 2022-06-28"', [ntn], ['"Notion-Version: 2022-06-28"', "https://api.notion.com/v1/users"]),
        lambda: (f"curl -X POST https://api.linear.app/graphql \\\n  -H \"Content-Type: application/json\" \\\n  -H \"Authorization: {lin}\" \\\n  --data '{{ \"query\": \"{{ issues {{ nodes {{ id title }} }} }}\" }}'", [lin], ["https://api.linear.app/graphql", "issues { nodes { id title } }"]),
        lambda: (f"AIRTABLE_API_KEY={pat}\nAIRTABLE_BASE_ID={base}\nAIRTABLE_TABLE=Tasks", [pat], [f"AIRTABLE_BASE_ID={base}", "AIRTABLE_TABLE=Tasks"]),
    ])


# -- encodings and wrappers --------------------------------------------------------------------
def s_json_escaped(i: int) -> Item:
    u, p, pa, h, db, hf = RNG.choice(DB_USERS), password(), apw(), RNG.choice(HOSTS), RNG.choice(DBS), hf_token()
    toolu, ok = "toolu_01" + run(22), openai_key()
    raw = run(7) + '"' + run(6) + "\\" + run(7)
    raw_esc = json.dumps(raw)[1:-1]
    lines = openssh_body()
    key_esc = "\\n".join(lines)
    inner = json.dumps({"username": u, "password": p, "host": h})
    ssh_file = "-----BEGIN OPENSSH PRIVATE KEY-----\n" + "\n".join(lines) + "\n-----END OPENSSH PRIVATE KEY-----\n"
    return pick(i, [
        lambda: (json.dumps({"type": "tool_result", "tool_use_id": toolu, "content": f"DATABASE_URL=postgres://app:{pa}@{h}:5432/{db}\nHF_TOKEN={hf}\nDEBUG=false\n"}), [pa, hf], [toolu, "DEBUG=false"]),
        lambda: (json.dumps({"role": "tool", "name": "read_file", "content": inner}), [p], ['"name": "read_file"', f'\\"host\\": \\"{h}\\"']),
        lambda: (json.dumps({"type": "tool_result", "tool_use_id": toolu, "content": f"[client]\nuser = {u}\npassword = {raw}\nhost = {h}\n"}), [raw_esc], [f"user = {u}", toolu]),
        lambda: (json.dumps({"type": "tool_result", "tool_use_id": toolu, "content": f"$ cat ~/.ssh/deploy_ed25519\n{ssh_file}"}), [key_esc], ["-----BEGIN OPENSSH PRIVATE KEY-----", "cat ~/.ssh/deploy_ed25519"]),
        lambda: (compact({"type": "item.completed", "item": {"id": "item_3", "type": "command_execution", "command": "bash -lc 'cat .env'", "aggregated_output": f"OPENAI_API_KEY={ok}\nPORT=3000\n", "exit_code": 0, "status": "completed"}}), [ok], ['"exit_code":0', "PORT=3000"]),
        lambda: (json.dumps({"level": "debug", "msg": "request", "body": json.dumps({"api_key": ok, "model": "gpt-4o-mini"})}), [ok], ['\\"model\\": \\"gpt-4o-mini\\"', '"msg": "request"']),
    ])


def s_yaml_block(i: int) -> Item:
    p, ckey, csec, hf, tok = password(), run(16, string.ascii_uppercase + string.digits), run(64, B64), hf_token(), api_key()
    h, db, repo = RNG.choice(HOSTS), RNG.choice(DBS), repo_id()
    return pick(i, [
        lambda: (f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: orders-api-config\ntype: Opaque\nstringData:\n  application.properties: |\n    spring.datasource.url=jdbc:postgresql://{h}:5432/{db}\n    spring.datasource.username=app\n    spring.datasource.password={p}", [p], ["name: orders-api-config", f"spring.datasource.url=jdbc:postgresql://{h}:5432/{db}"]),
        lambda: (f'kafka:\n  saslJaasConfig: |-\n    org.apache.kafka.common.security.plain.PlainLoginModule required\n    username="{ckey}"\n    password="{csec}";', [csec], ["saslJaasConfig: |-", "PlainLoginModule required"]),
        lambda: (f"      - name: Upload model\n        run: |\n          pip install -U huggingface_hub\n          huggingface-cli login --token {hf}\n          huggingface-cli upload {repo} outputs/final", [hf], ["- name: Upload model", f"huggingface-cli upload {repo} outputs/final"]),
        lambda: (f"scrape_configs:\n  - job_name: vllm\n    authorization:\n      credentials: >-\n        {tok}\n    static_configs:\n      - targets: ['vllm:8000']", [tok], ["job_name: vllm", "targets: ['vllm:8000']"]),
        lambda: (f"  redis:\n    image: redis:7.4\n    command: >\n      redis-server --appendonly yes\n      --requirepass {p}", [p], ["image: redis:7.4", "redis-server --appendonly yes"]),
    ])


def special_password() -> str:
    """A password with characters a URL must percent-encode."""
    return RNG.choice(["Tide", "ember", "Quill", "saffron", "Nimbus"]) + RNG.choice("@:/#?&") + digits(3) + RNG.choice("!$+,;=") + run(6) + RNG.choice("@%#")


def quoted(s: str) -> str:
    return urllib.parse.quote(s, safe="")


def s_url_encoded(i: int) -> Item:
    u, org, h, db = RNG.choice(USERS), RNG.choice(ORGS), RNG.choice(HOSTS), RNG.choice(DBS)
    sp = special_password()
    enc = quoted(sp)
    cid, key = run(24), b64bytes(32)
    kenc, csec = quoted(key), quoted(run(10) + "/" + run(12) + "+" + run(10) + "=")
    cl = run(5, LOW)
    return pick(i, [
        lambda: (f"POST /oauth/token HTTP/1.1\nHost: auth.{org}.com\nContent-Type: application/x-www-form-urlencoded\n\ngrant_type=password&username={u}%40{org}.com&password={enc}&client_id={cid}", [enc], ["grant_type=password", f"client_id={cid}"]),
        lambda: (f'engine = create_engine("postgresql+psycopg://{u}:{enc}@{h}:5432/{db}")', [enc], [f"@{h}:5432/{db}", "postgresql+psycopg://"]),
        lambda: (f'10.0.4.21 - - [03/Feb/2027:10:22:31 +0000] "GET /api/v1/export?format=csv&api_key={kenc}&since=2027-02-01 HTTP/1.1" 200 48211', [kenc], ["format=csv", "since=2027-02-01"]),
        lambda: (f"curl -s -d 'client_id={cid}&client_secret={csec}&grant_type=client_credentials' https://auth.{org}.com/oauth2/token", [csec], [f"client_id={cid}", f"https://auth.{org}.com/oauth2/token"]),
        lambda: (f"MONGODB_URI=mongodb+srv://{u}:{enc}@cluster0.{cl}.mongodb.net/?retryWrites=true&w=majority", [enc], [f"cluster0.{cl}.mongodb.net", "retryWrites=true&w=majority"]),
    ])


def halves(s: str) -> tuple[str, str]:
    cut = len(s) // 2 + RNG.randrange(-3, 4)
    return s[:cut], s[cut:]


def s_line_continuation(i: int) -> Item:
    ok, hf, wk, p, u, org = openai_key(), hf_token(), wandb_key(), password(), RNG.choice(DB_USERS), RNG.choice(ORGS)
    a, b = halves(ok)
    c, d = halves(api_key() + api_key())
    e, f = halves(hf)
    k = api_key()
    return pick(i, [
        lambda: (f'export OPENAI_API_KEY="{a}\\\n{b}"', [a, b], ["export OPENAI_API_KEY="]),
        lambda: (f'curl -s https://api.{org}.com/v2/datasets \\\n  -H "Authorization: Bearer {c}\\\n{d}"', [c, d], [f"https://api.{org}.com/v2/datasets"]),
        lambda: (f"airflow connections add 'snowflake_prod' \\\n  --conn-type snowflake \\\n  --conn-login {u} \\\n  --conn-password '{p}' \\\n  --conn-extra '{{\"account\": \"{sf_account()}\"}}'", [p], ["--conn-type snowflake", f"--conn-login {u}"]),
        lambda: (f"docker run --rm --gpus all \\\n  -e HF_TOKEN={hf} \\\n  -e WANDB_API_KEY={wk} \\\n  ghcr.io/{org}/trainer:1.4 \\\n  python train.py --config configs/lora.yaml", [hf, wk], [f"ghcr.io/{org}/trainer:1.4", "--config configs/lora.yaml"]),
        lambda: (f'HF_TOKEN = (\n    "{e}"\n    "{f}"\n)\nlogin(token=HF_TOKEN)', [e, f], ["login(token=HF_TOKEN)"]),
        lambda: (f'Invoke-RestMethod -Uri "https://api.{org}.com/v1/jobs" `\n  -Headers @{{ Authorization = "Bearer {k}" }} `\n  -Method Get', [k], [f"https://api.{org}.com/v1/jobs", "-Method Get"]),
    ])


def s_chat_markdown(i: int) -> Item:
    u, p, h, db, k, proj = RNG.choice(DB_USERS), password(), RNG.choice(HOSTS), RNG.choice(DBS), wandb_key(), RNG.choice(PROJECTS)
    gsk, pc, co = "gsk_" + run(52), f"pcsk_{run(5)}_{run(63)}", run(40)
    return pick(i, [
        lambda: (f"Here are the connection settings I found in `docker-compose.yml`:\n\n| Setting | Value |\n|---|---|\n| Host | `{h}` |\n| Database | `{db}` |\n| User | `{u}` |\n| Password | `{p}` |\n\nYou can connect with `psql` using these.", [p], [f"| Host | `{h}` |", f"| Database | `{db}` |"]),
        lambda: (f"I've created `.env` with your W&B settings:\n\n```env\nWANDB_API_KEY={k}\nWANDB_PROJECT={proj}\n```\n\nRun `python train.py` again and the run should sync.", [k], [f"WANDB_PROJECT={proj}", "Run `python train.py` again"]),
        lambda: (f"The Airflow admin account was created:\n\n- **Username:** `admin`\n- **Password:** `{p}`\n- **URL:** http://localhost:8080\n\nChange the password after your first login.", [p], ["- **URL:** http://localhost:8080", "- **Username:** `admin`"]),
        lambda: (f"Replace the client setup in `agent.py` with:\n\n```python\nfrom groq import Groq\n\nclient = Groq(api_key=\"{gsk}\")\n```\n\nThis hard-codes the key; move it to an environment variable before committing.", [gsk], ["from groq import Groq", "`agent.py`"]),
        lambda: (f"| Service | Key | Docs |\n|---|---|---|\n| Pinecone | `{pc}` | https://docs.pinecone.io |\n| Cohere | `{co}` | https://docs.cohere.com |", [pc, co], ["https://docs.pinecone.io", "https://docs.cohere.com"]),
    ])


def s_heredoc(i: int) -> Item:
    u, p, h, db, acct, hf = RNG.choice(DB_USERS), password(), RNG.choice(HOSTS), RNG.choice(DBS), sf_account(), hf_token()
    host, tok = dbx_host(), dapi()
    return pick(i, [
        lambda: (f"cat > ~/.databrickscfg <<EOF\n[DEFAULT]\nhost = https://{host}\ntoken = {tok}\nEOF", [tok], [f"host = https://{host}", "cat > ~/.databrickscfg <<EOF"]),
        lambda: (f"cat <<EOF > .env\nPOSTGRES_USER={u}\nPOSTGRES_PASSWORD={p}\nPOSTGRES_DB={db}\nEOF\ndocker compose up -d db", [p], [f"POSTGRES_DB={db}", "docker compose up -d db"]),
        lambda: (f"kubectl apply -f - <<EOF\napiVersion: v1\nkind: Secret\nmetadata:\n  name: hf-token\n  namespace: inference\ntype: Opaque\nstringData:\n  token: {hf}\nEOF\nsecret/hf-token created", [hf], ["name: hf-token", "secret/hf-token created"]),
        lambda: (f"sudo tee /etc/clickhouse-server/users.d/{u}.xml > /dev/null <<'XML'\n<clickhouse><users><{u}><password>{p}</password><profile>default</profile></{u}></users></clickhouse>\nXML", [p], [f"/etc/clickhouse-server/users.d/{u}.xml", "<profile>default</profile>"]),
        lambda: (f"python - <<'PY'\nimport snowflake.connector\nconn = snowflake.connector.connect(user=\"{u}\", password=\"{p}\", account=\"{acct}\")\nprint(conn.cursor().execute(\"select current_role()\").fetchone())\nPY", [p], [f'account="{acct}"', 'execute("select current_role()")']),
        lambda: (f'mongosh "mongodb://{h}:27017/admin" <<\'JS\'\ndb.createUser({{ user: "{u}", pwd: "{p}", roles: ["readWriteAnyDatabase"] }})\nJS', [p], ['roles: ["readWriteAnyDatabase"]', f"mongodb://{h}:27017/admin"]),
    ])


SECRET_FAMILIES: list[tuple[str, str, Callable[[int], Item], int]] = [
    ("database", "sql-ddl", s_sql_ddl, 7), ("database", "mongodb-user", s_mongo, 6), ("database", "redis-auth", s_redis, 5),
    ("database", "elasticsearch", s_elastic, 7), ("database", "clickhouse", s_clickhouse, 5), ("database", "cassandra", s_cassandra, 4),
    ("database", "snowflake", s_snowflake, 5), ("data-pipeline", "gcp-service-account", s_gcp_sa, 5), ("data-pipeline", "airflow", s_airflow, 6),
    ("data-pipeline", "dbt-profiles", s_dbt, 5), ("data-pipeline", "spark-hadoop", s_spark, 5), ("data-pipeline", "kafka-client", s_kafka, 5),
    ("data-pipeline", "kafka-connect", s_kafka_connect, 5), ("data-pipeline", "bi-config", s_bi, 5), ("data-pipeline", "trino", s_trino, 5),
    ("ml-ai", "huggingface", s_huggingface, 7), ("ml-ai", "wandb", s_wandb, 5), ("ml-ai", "kaggle", s_kaggle, 4),
    ("ml-ai", "mlflow-databricks", s_mlflow, 4), ("ml-ai", "ml-tracking-keys", s_ml_tracking_keys, 5), ("ml-ai", "llm-provider-keys", s_llm_keys, 6),
    ("ml-ai", "llm-observability", s_langsmith, 4), ("ml-ai", "vector-db", s_vector_db, 6), ("ml-ai", "notebook-env", s_notebook_env, 5),
    ("agent-tooling", "mcp-config", s_mcp_json, 6), ("agent-tooling", "mcp-cli", s_mcp_cli, 4), ("agent-tooling", "codex-config", s_codex_config, 4),
    ("agent-tooling", "aider-continue", s_aider_continue, 5), ("agent-tooling", "openai-compatible", s_openai_compat, 5), ("agent-tooling", "agent-dotenv", s_agent_dotenv, 5),
    ("package-registry", "python-index", s_python_index, 6), ("package-registry", "conda", s_conda, 5), ("package-registry", "nuget", s_nuget, 4),
    ("package-registry", "bundler-gems", s_bundler, 4), ("package-registry", "go-private", s_go_private, 4), ("package-registry", "artifactory-nexus", s_artifactory, 5),
    ("saas", "telegram-bot", s_telegram, 4), ("saas", "discord", s_discord, 4), ("saas", "twilio", s_twilio, 4),
    ("saas", "email-vendors", s_email_vendors, 5), ("saas", "payments", s_payments, 6), ("saas", "algolia", s_algolia, 4),
    ("saas", "auth0-okta", s_auth0_okta, 5), ("saas", "shopify", s_shopify, 4), ("saas", "workspace-tokens", s_workspace_tokens, 6),
    ("encoding", "json-escaped", s_json_escaped, 6), ("encoding", "yaml-block", s_yaml_block, 5), ("encoding", "url-encoded", s_url_encoded, 5),
    ("encoding", "line-continuation", s_line_continuation, 6), ("encoding", "chat-markdown", s_chat_markdown, 5), ("encoding", "heredoc", s_heredoc, 6),
]


def spans(text: str, part: str) -> list[tuple[int, int]]:
    out, at = [], text.find(part)
    while at >= 0:
        out.append((at, at + len(part)))
        at = text.find(part, at + 1)
    return out


def overlaps(text: str, a: str, b: str) -> bool:
    return any(x0 < y1 and y0 < x1 for x0, x1 in spans(text, a) for y0, y1 in spans(text, b))


def secret_rows() -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    seen: set[str] = set()
    for where, family, make, count in SECRET_FAMILIES:
        made = 0
        while made < count:
            text, secrets, keep = make(made)
            if text in seen:
                continue
            seen.add(text)
            assert secrets and all(s and s == s.strip() and s in text for s in secrets), (family, secrets, text)
            assert keep and all(k and k in text for k in keep), (family, keep, text)
            assert not any(overlaps(text, k, s) for k in keep for s in secrets), (family, keep, secrets)
            out.append({"id": f"ds{len(out):03d}", "where": where, "family": family, "text": text, "secrets": secrets, "keep": keep})
            made += 1
    family_split(out, "data-secrets")
    return out


# -- identities ----------------------------------------------------------------------------------
Forms = list[Callable[[], str]]


def i_npm_lock() -> Forms:
    pkg, ver, scope = RNG.choice(NPMPKGS), pyver(), RNG.choice(ORGS)
    sri, sha1, org = sri512(), hexrun(40), RNG.choice(ORGS)
    return [
        lambda: f'    "node_modules/{pkg}": {{\n      "version": "{ver}",\n      "resolved": "https://registry.npmjs.org/{pkg}/-/{pkg}-{ver}.tgz",\n      "integrity": "{sri}",\n      "license": "MIT"\n    }},',
        lambda: f'{pkg}@^{ver.split(".")[0]}.0.0:\n  version "{ver}"\n  resolved "https://registry.yarnpkg.com/{pkg}/-/{pkg}-{ver}.tgz#{sha1}"\n  integrity {sri}',
        lambda: f'"{pkg}@npm:^{ver}":\n  version: {ver}\n  resolution: "{pkg}@npm:{ver}"\n  checksum: 10c0/{hexrun(128)}\n  languageName: node\n  linkType: hard',
        lambda: f"  {pkg}@{ver}:\n    resolution: {{integrity: {sri}}}\n    engines: {{node: '>=18'}}",
        lambda: f"$ npm view {pkg}@{ver} dist.integrity dist.shasum\ndist.integrity = '{sri}'\ndist.shasum = '{sha1}'",
        lambda: f'    "{pkg}": ["{pkg}@{ver}", "", {{}}, "{sri}"],',
        lambda: f'    "node_modules/@{scope}/{pkg}-utils": {{\n      "version": "{ver}",\n      "resolved": "https://npm.pkg.github.com/download/@{scope}/{pkg}-utils/{ver}/{sha1}",\n      "integrity": "{sri}"\n    }},',
        lambda: f"npm notice === Tarball Details ===\nnpm notice name:          {pkg}\nnpm notice version:       {ver}\nnpm notice shasum:        {sha1}\nnpm notice integrity:     {sri[:20]}[...]{sri[-20:]}\nnpm notice total files:   {RNG.randrange(5, 90)}",
        lambda: f'  "packageManager": "pnpm@9.15.4+sha512.{hexrun(128)}"',
        lambda: f'    "node_modules/{pkg}": {{\n      "version": "{ver}",\n      "resolved": "git+ssh://git@github.com/{org}/{pkg}.git#{sha1}",\n      "license": "MIT"\n    }},',
        lambda: f'      "integrity": "sha1-{b64bytes(20)}",',
        lambda: f'  "npm": {{\n    "{pkg}@{ver}": {{\n      "integrity": "{sri}",\n      "dependencies": []\n    }}\n  }}',
        lambda: f"npm notice Publishing to https://registry.npmjs.org/ with tag latest and public access\nnpm notice publish Signed provenance statement with source and build information from GitHub Actions\nnpm notice publish Provenance statement published to transparency log: https://search.sigstore.dev/?logIndex={digits(9)}",
    ]


def i_python_lock() -> Forms:
    pkg, ver, other = RNG.choice(PYPKGS), pyver(), RNG.choice(PYPKGS)
    h, h2, n = hexrun(64), hexrun(64), RNG.randrange(10_000, 9_000_000)
    path = f"{hexrun(2)}/{hexrun(2)}/{hexrun(60)}"
    wheel = f"{pkg.replace('-', '_')}-{ver}"
    return [
        lambda: f'[[package]]\nname = "{pkg}"\nversion = "{ver}"\ndescription = ""\noptional = false\npython-versions = ">=3.9"\nfiles = [\n    {{file = "{wheel}-py3-none-any.whl", hash = "sha256:{h}"}},\n    {{file = "{pkg}-{ver}.tar.gz", hash = "sha256:{h2}"}},\n]',
        lambda: f'[metadata]\nlock-version = "2.1"\npython-versions = ">=3.11,<3.13"\ncontent-hash = "{h}"',
        lambda: f'[[package]]\nname = "{pkg}"\nversion = "{ver}"\nsource = {{ registry = "https://pypi.org/simple" }}\nsdist = {{ url = "https://files.pythonhosted.org/packages/{path}/{pkg}-{ver}.tar.gz", hash = "sha256:{h}", size = {n} }}\nwheels = [\n    {{ url = "https://files.pythonhosted.org/packages/{path}/{wheel}-py3-none-any.whl", hash = "sha256:{h2}", size = {n // 3} }},\n]',
        lambda: f"{pkg}=={ver} \\\n    --hash=sha256:{h} \\\n    --hash=sha256:{h2}\n    # via {other}",
        lambda: f'        "{pkg}": {{\n            "hashes": [\n                "sha256:{h}",\n                "sha256:{h2}"\n            ],\n            "index": "pypi",\n            "version": "=={ver}"\n        }},',
        lambda: f'    "_meta": {{\n        "hash": {{\n            "sha256": "{h}"\n        }},\n        "pipfile-spec": 6,\n        "requires": {{\n            "python_version": "3.11"\n        }},',
        lambda: f'[metadata]\ngroups = ["default", "dev"]\nstrategy = ["inherit_metadata"]\nlock_version = "4.5.0"\ncontent_hash = "sha256:{h}"',
        lambda: f"$ pip hash dist/{pkg}-{ver}.tar.gz\ndist/{pkg}-{ver}.tar.gz:\n--hash=sha256:{h}",
        lambda: f"{pkg}/__init__.py,sha256={base64.urlsafe_b64encode(RNG.randbytes(32)).decode().rstrip('=')},{RNG.randrange(100, 9000)}\n{pkg}/core.py,sha256={base64.urlsafe_b64encode(RNG.randbytes(32)).decode().rstrip('=')},{RNG.randrange(100, 90000)}\n{wheel}.dist-info/RECORD,,",
        lambda: f'"digests": {{"blake2b_256": "{hexrun(64)}", "md5": "{hexrun(32)}", "sha256": "{h}"}}',
        lambda: f"# This file was autogenerated by uv via the following command:\n#    uv pip compile requirements.in --generate-hashes -o requirements.txt\n{pkg}=={ver} \\\n    --hash=sha256:{h}",
        lambda: f'[[packages]]\nname = "{pkg}"\nversion = "{ver}"\n[[packages.wheels]]\nurl = "https://files.pythonhosted.org/packages/{path}/{wheel}-py3-none-any.whl"\nhashes = {{sha256 = "{h}"}}',
        lambda: f"  Building wheel for {pkg} (pyproject.toml) ... done\n  Created wheel for {pkg}: filename={wheel}-cp311-cp311-linux_x86_64.whl size={n} sha256={h}\n  Stored in directory: /root/.cache/pip/wheels/{hexrun(2)}/{hexrun(2)}/{hexrun(60)}",
    ]


def conda_build() -> str:
    return f"py311h{hexrun(7)}_{RNG.randrange(0, 3)}"


def i_conda_lock() -> Forms:
    pkg, ver, build = RNG.choice(["numpy", "libarrow", "openssl", "pytorch", "cuda-nvcc", "scipy", "gdal"]), pyver(), conda_build()
    md5, sha, n = hexrun(32), hexrun(64), RNG.randrange(100_000, 90_000_000)
    url = f"https://conda.anaconda.org/conda-forge/linux-64/{pkg}-{ver}-{build}.conda"
    return [
        lambda: f"@EXPLICIT\n{url}#{md5}",
        lambda: f"# This file may be used to create an environment using:\n# $ conda create --name <env> --file <this file>\n# platform: linux-64\n@EXPLICIT\n{url}#{md5}\nhttps://conda.anaconda.org/conda-forge/noarch/tzdata-2025a-h78e105d_0.conda#{hexrun(32)}",
        lambda: f"- name: {pkg}\n  version: {ver}\n  manager: conda\n  platform: linux-64\n  url: {url}\n  hash:\n    md5: {md5}\n    sha256: {sha}\n  category: main\n  optional: false",
        lambda: f"- conda: {url}\n  sha256: {sha}\n  md5: {md5}\n  depends:\n  - libgcc >=13\n  license: BSD-3-Clause\n  size: {n}\n  timestamp: {RNG.randrange(1_800_000_000_000, 1_810_000_000_000)}",
        lambda: f"name: {RNG.choice(PROJECTS)}\nchannels:\n  - conda-forge\ndependencies:\n  - {pkg}={ver}={build}\n  - python=3.11.11=h9e4cc4f_1_cpython",
        lambda: f'"{pkg}-{ver}-{build}.conda": {{"build": "{build}", "build_number": 0, "depends": ["libgcc >=13"], "md5": "{md5}", "name": "{pkg}", "sha256": "{sha}", "size": {n}, "subdir": "linux-64", "version": "{ver}"}}',
        lambda: f"- pypi: https://files.pythonhosted.org/packages/{hexrun(2)}/{hexrun(2)}/{hexrun(60)}/{pkg}-{ver}-py3-none-any.whl\n  name: {pkg}\n  version: {ver}\n  sha256: {sha}\n  requires_python: '>=3.9'",
        lambda: f'{{"_path": "lib/python3.11/site-packages/{pkg}/__init__.py", "path_type": "hardlink", "sha256": "{sha}", "size_in_bytes": {RNG.randrange(100, 90000)}}}',
        lambda: f"/opt/conda/pkgs/{pkg}-{ver}-{build}/info/repodata_record.json",
        lambda: f"https://conda.anaconda.org/conda-forge/noarch/{pkg}-{ver}-pyhd8ed1ab_0.conda#{md5}",
        lambda: f"$ conda search {pkg}=={ver} --info\n{pkg} {ver} {build}\n--------------------------\nfile name   : {pkg}-{ver}-{build}.conda\nname        : {pkg}\nversion     : {ver}\nbuild       : {build}\nsize        : {n // 1_000_000} MB\nlicense     : BSD-3-Clause\nmd5         : {md5}\nsha256      : {sha}\nurl         : {url}",
        lambda: f"Downloading and Extracting Packages:\n{pkg}-{ver}          | {RNG.randrange(1, 90)}.{RNG.randrange(1, 9)} MB  | ########## | 100%\nPreparing transaction: done\nVerifying transaction: done\nExecuting transaction: done",
        lambda: f"https://conda.anaconda.org/pytorch/linux-64/pytorch-2.5.1-py3.11_cuda12.4_cudnn9.1.0_0.tar.bz2#{md5}",
    ]


def go_h1() -> str:
    return "h1:" + b64bytes(32)


def i_cargo_go() -> Forms:
    crate, ver, dep, org = RNG.choice(CRATES), pyver(), RNG.choice(CRATES), RNG.choice(ORGS)
    h, sha1, mod = hexrun(64), hexrun(40), RNG.choice(GOMODS)
    h1, h1b = go_h1(), go_h1()
    return [
        lambda: f'[[package]]\nname = "{crate}"\nversion = "{ver}"\nsource = "registry+https://github.com/rust-lang/crates.io-index"\nchecksum = "{h}"\ndependencies = [\n "{dep}",\n]',
        lambda: f'[[package]]\nname = "{crate}-ext"\nversion = "{ver}"\nsource = "git+https://github.com/{org}/{crate}-ext?branch=main#{sha1}"',
        lambda: f"{mod} v{ver} {h1}\n{mod} v{ver}/go.mod {h1b}",
        lambda: f"require (\n\tgithub.com/{org}/pipeline-sdk v0.0.0-2027{RNG.randrange(1, 13):02d}{RNG.randrange(1, 28):02d}{RNG.randrange(0, 24):02d}{RNG.randrange(60):02d}{RNG.randrange(60):02d}-{hexrun(12)}\n\t{mod} v{ver}\n)",
        lambda: f'{{\n\t"Path": "{mod}",\n\t"Version": "v{ver}",\n\t"Info": "/root/go/pkg/mod/cache/download/{mod}/@v/v{ver}.info",\n\t"Sum": "{h1}",\n\t"GoModSum": "{h1b}"\n}}',
        lambda: f"{RNG.randrange(10**7, 10**8)}\n{mod} v{ver} {h1}\n{mod} v{ver}/go.mod {h1b}\n\ngo.sum database tree\n{RNG.randrange(10**8, 10**9)}\n{b64bytes(32)}\n\n— sum.golang.org Az3gr{b64bytes(64)}",
        lambda: f'{{"files":{{"Cargo.toml":"{hexrun(64)}","src/lib.rs":"{hexrun(64)}"}},"package":"{h}"}}',
        lambda: f"   Compiling {crate} v{ver}\n   Compiling {dep} v{pyver()}\n    Finished `release` profile [optimized] target(s) in 42.17s\n$ ls target/release/deps | head -2\nlib{crate}-{hexrun(16)}.rlib\nlib{dep}-{hexrun(16)}.rmeta",
        lambda: f"$ go tool buildid bin/ingest\n{run(20, B64URL)}/{run(20, B64URL)}/{run(20, B64URL)}/{run(20, B64URL)}",
        lambda: f"$ go version -m bin/ingest\nbin/ingest: go1.24.1\n\tpath\tgithub.com/{org}/ingest/cmd/ingest\n\tmod\tgithub.com/{org}/ingest\t(devel)\t\n\tdep\t{mod}\tv{ver}\t{h1}\n\tbuild\tvcs=git\n\tbuild\tvcs.revision={sha1}\n\tbuild\tvcs.modified=false",
        lambda: f"/home/build/.cargo/registry/src/index.crates.io-{hexrun(16)}/{crate}-{ver}/src/lib.rs",
        lambda: f'{crate}-ext = {{ git = "https://github.com/{org}/{crate}-ext", rev = "{sha1[:12]}" }}',
        lambda: f"go: downloading {mod} v{ver}\ngo: added {mod} v{ver}",
    ]


def i_app_lockfiles() -> Forms:
    gem, ver, org, repo = RNG.choice(["rails", "sidekiq", "pg", "nokogiri", "puma", "rake"]), pyver(), RNG.choice(ORGS), RNG.choice(PROJECTS)
    h, sha1, pkg = hexrun(64), hexrun(40), RNG.choice(["guzzlehttp/guzzle", "symfony/console", "laravel/framework", "monolog/monolog"])
    return [
        lambda: f"GEM\n  remote: https://rubygems.org/\n  specs:\n    {gem} ({ver})\n      racc (~> 1.4)\n\nPLATFORMS\n  x86_64-linux\n\nBUNDLED WITH\n   2.6.2",
        lambda: f"CHECKSUMS\n  {gem} ({ver}) sha256={h}\n  racc (1.8.1) sha256={hexrun(64)}",
        lambda: f"GIT\n  remote: https://github.com/{org}/{repo}.git\n  revision: {sha1}\n  branch: main\n  specs:\n    {repo} (0.3.1)",
        lambda: f'            "dist": {{\n                "type": "zip",\n                "url": "https://api.github.com/repos/{pkg}/zipball/{sha1}",\n                "reference": "{sha1}",\n                "shasum": ""\n            }},',
        lambda: f'    "content-hash": "{hexrun(32)}",\n    "packages": [',
        lambda: f'            "source": {{\n                "type": "git",\n                "url": "https://github.com/{pkg}.git",\n                "reference": "{sha1}"\n            }},',
        lambda: f"$ gem fetch {gem} -v {ver} && sha256sum {gem}-{ver}.gem\nFetched {gem}-{ver}\n{h}  {gem}-{ver}.gem",
        lambda: f'  "{gem}": {{:hex, :{gem}, "{ver}", "{h}", [:mix], [], "hexpm", "{hexrun(64)}"}},',
        lambda: f'    {{\n      "identity" : "{repo}",\n      "kind" : "remoteSourceControl",\n      "location" : "https://github.com/{org}/{repo}",\n      "state" : {{\n        "revision" : "{sha1}",\n        "version" : "{ver}"\n      }}\n    }}',
        lambda: f"SPEC CHECKSUMS:\n  Alamofire: {hexrun(40)}\n  {repo.title().replace('-', '')}: {sha1}\n\nPODFILE CHECKSUM: {hexrun(40)}\n\nCOCOAPODS: 1.16.2",
        lambda: f'  {gem}_client:\n    dependency: "direct main"\n    description:\n      name: {gem}_client\n      sha256: "{h}"\n      url: "https://pub.dev"\n    source: hosted\n    version: "{ver}"',
        lambda: f'<component group="org.apache.parquet" name="parquet-hadoop" version="{ver}">\n   <artifact name="parquet-hadoop-{ver}.jar">\n      <sha256 value="{h}" origin="Generated by Gradle"/>\n   </artifact>\n</component>',
        lambda: f'      "Npgsql": {{\n        "type": "Direct",\n        "requested": "[{ver}, )",\n        "resolved": "{ver}",\n        "contentHash": "{b64bytes(64)}"\n      }},',
    ]


def i_nix() -> Forms:
    h, pkg, ver = nix32(32), RNG.choice(["python3", "postgresql", "duckdb", "arrow-cpp", "cudatoolkit", "spark"]), pyver()
    sri, sha1, org = "sha256-" + b64bytes(32), hexrun(40), RNG.choice(ORGS)
    return [
        lambda: f"/nix/store/{h}-{pkg}-{ver}",
        lambda: f"$ nix-store -q --references $(which python3)\n/nix/store/{nix32(32)}-glibc-2.40-36\n/nix/store/{nix32(32)}-bash-5.2p37\n/nix/store/{h}-{pkg}-{ver}",
        lambda: f'    "nixpkgs": {{\n      "locked": {{\n        "lastModified": {RNG.randrange(1_800_000_000, 1_810_000_000)},\n        "narHash": "{sri}",\n        "owner": "NixOS",\n        "repo": "nixpkgs",\n        "rev": "{sha1}",\n        "type": "github"\n      }},',
        lambda: f'  src = fetchurl {{\n    url = "https://files.pythonhosted.org/packages/source/{pkg[0]}/{pkg}/{pkg}-{ver}.tar.gz";\n    hash = "{sri}";\n  }};',
        lambda: f"$ nix-prefetch-url https://github.com/{org}/{pkg}/archive/v{ver}.tar.gz\npath is '/nix/store/{h}-v{ver}.tar.gz'\n{nix32(52)}",
        lambda: f"$ nix hash convert --hash-algo sha256 --to sri {nix32(52)}\n{sri}",
        lambda: f"error: hash mismatch in fixed-output derivation '/nix/store/{h}-source.drv':\n         specified: sha256-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n            got:    {sri}",
        lambda: f"$ nix path-info -S nixpkgs#{pkg}\n/nix/store/{h}-{pkg}-{ver}\t{RNG.randrange(10**6, 10**9)}",
        lambda: f"StorePath: /nix/store/{h}-{pkg}-{ver}\nURL: nar/{nix32(52)}.nar.xz\nCompression: xz\nFileHash: sha256:{nix32(52)}\nFileSize: {RNG.randrange(10**5, 10**8)}\nNarHash: sha256:{nix32(52)}\nNarSize: {RNG.randrange(10**5, 10**9)}\nReferences: {nix32(32)}-glibc-2.40-36\nSig: cache.nixos.org-1:{b64bytes(64)}",
        lambda: f"substituters = https://cache.nixos.org https://{org}.cachix.org\ntrusted-public-keys = cache.nixos.org-1:6NCHdD59X431o0gWypbMrAURkbJ16ZPMQFGspcDShjY= {org}.cachix.org-1:{b64bytes(32)}",
        lambda: f'  npmDepsHash = "{sri}";',
        lambda: f'  vendorHash = "{sri}";',
        lambda: f"Resolved URL:  github:NixOS/nixpkgs/{sha1}\nLocked URL:    github:NixOS/nixpkgs/{sha1}?narHash={urllib.parse.quote(sri, safe='')}\nPath:          /nix/store/{h}-source",
    ]


def i_hf_artifacts() -> Forms:
    repo, sha1, h, h2, n = repo_id(), hexrun(40), hexrun(64), hexrun(64), RNG.randrange(10**6, 10**10)
    org, model = repo.split("/")
    return [
        lambda: f'model = AutoModelForCausalLM.from_pretrained("{repo}", revision="{sha1}", torch_dtype="auto")',
        lambda: f"version https://git-lfs.github.com/spec/v1\noid sha256:{h}\nsize {n}",
        lambda: f"/root/.cache/huggingface/hub/models--{org}--{model}/snapshots/{sha1}/config.json",
        lambda: f"/root/.cache/huggingface/hub/models--{org}--{model}/blobs/{h}",
        lambda: f"$ huggingface-cli download {repo} --revision {sha1} --include '*.safetensors'\nFetching 2 files: 100%|██████████| 2/2 [00:41<00:00, 20.55s/it]\n/root/.cache/huggingface/hub/models--{org}--{model}/snapshots/{sha1}",
        lambda: f"$ sha256sum model-00001-of-00002.safetensors model-00002-of-00002.safetensors\n{h}  model-00001-of-00002.safetensors\n{h2}  model-00002-of-00002.safetensors",
        lambda: f"pulling manifest\npulling {h[:12]}... 100% ▕████████████████▏ 4.7 GB\npulling {h2[:12]}... 100% ▕████████████████▏  12 KB\nverifying sha256 digest\nwriting manifest\nsuccess",
        lambda: compact({"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json", "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "digest": f"sha256:{h}", "size": 485}, "layers": [{"mediaType": "application/vnd.ollama.image.model", "digest": f"sha256:{h2}", "size": n}]}),
        lambda: f"ModelInfo(id='{repo}', author='{org}', sha='{sha1}', created_at=datetime.datetime(2027, 1, 14, 9, 2, 11, tzinfo=datetime.timezone.utc), private=False, gated=False, downloads={RNG.randrange(10, 99999)}, library_name='transformers')",
        lambda: f"commit {sha1}\nAuthor: {org}-bot <bot@{org}.example>\nDate:   Tue Feb 2 10:22:31 2027 +0000\n\n    Upload model-00001-of-00002.safetensors with huggingface_hub",
        lambda: f"$ ollama run hf.co/{repo}-GGUF:Q4_K_M\n{model}-Q4_K_M.gguf  sha256:{h}",
        lambda: f"https://huggingface.co/{repo}/resolve/{sha1}/tokenizer.json",
        lambda: f"< HTTP/2 302\n< x-repo-commit: {sha1}\n< x-linked-etag: \"{h}\"\n< x-linked-size: {n}\n< location: https://cdn-lfs.hf.co/repos/{hexrun(2)}/{hexrun(2)}/{hexrun(64)}/{h}",
    ]


def i_tracking_runs() -> Forms:
    rid, team, proj, exp = run(8, string.ascii_lowercase + string.digits), RNG.choice(TEAMS), RNG.choice(PROJECTS), RNG.randrange(1, 900)
    mrun, org, name = hexrun(32), RNG.choice(ORGS), f"{RNG.choice(ADJ)}-{RNG.choice(NOUN)}-{RNG.randrange(1, 99)}"
    node = RNG.randrange(1, 9)
    return [
        lambda: f"wandb: Tracking run with wandb version 0.19.8\nwandb: Run data is saved locally in /workspace/wandb/run-202702{RNG.randrange(1, 28):02d}_{RNG.randrange(0, 24):02d}{RNG.randrange(60):02d}{RNG.randrange(60):02d}-{rid}\nwandb: Syncing run {name}\nwandb: ⭐️ View project at https://wandb.ai/{team}/{proj}\nwandb: 🚀 View run at https://wandb.ai/{team}/{proj}/runs/{rid}",
        lambda: f'artifact = run.use_artifact("{team}/{proj}/model-{rid}:v{RNG.randrange(0, 30)}", type="model")',
        lambda: f"wandb: Created sweep with ID: {rid}\nwandb: View sweep at: https://wandb.ai/{team}/{proj}/sweeps/{rid}\nwandb: Run sweep agent with: wandb agent {team}/{proj}/{rid}",
        lambda: f"2027/02/03 10:22:31 INFO mlflow.tracking._tracking_service.client: 🏃 View run {name} at: http://mlflow.{org}.internal/#/experiments/{exp}/runs/{mrun}.",
        lambda: f'model_uri = "runs:/{mrun}/model"\nmlflow.register_model(model_uri, "{proj}-classifier")',
        lambda: f"mlruns/{exp}/{mrun}/artifacts/model/MLmodel",
        lambda: f"artifact_path: model\nflavors:\n  python_function:\n    loader_module: mlflow.sklearn\nmodel_uuid: {hexrun(32)}\nrun_id: {mrun}\nutc_time_created: '2027-02-03 10:22:31.123456'",
        lambda: f"COMET INFO: Experiment is live on comet.com https://www.comet.com/{team}/{proj}/{hexrun(32)}",
        lambda: f"[neptune] [info   ] Neptune initialized. Open in the app: https://app.neptune.ai/{team}/{proj}/e/{proj.split('-')[0][:4].upper()}-{RNG.randrange(1, 999)}",
        lambda: f"runs/Feb03_10-22-31_gpu-node-{node}/events.out.tfevents.{RNG.randrange(1_800_000_000, 1_810_000_000)}.gpu-node-{node}.{RNG.randrange(1000, 99999)}.0",
        lambda: f'run = wandb.Api().run("{team}/{proj}/{rid}")\nprint(run.summary["val/loss"])',
        lambda: f"ClearML Task: created new task id={hexrun(32)}\nClearML results page: https://app.clear.ml/projects/{hexrun(32)}/experiments/{hexrun(32)}/output/log",
        lambda: f"Trial train_fn_{hexrun(5)}_{RNG.randrange(0, 20):05d} completed. Last result: loss=0.{RNG.randrange(1000, 9999)}, accuracy=0.{RNG.randrange(8000, 9999)}",
    ]


def i_dataset_versions() -> Forms:
    md5, n, f, org, ds = hexrun(32), RNG.randrange(10**4, 10**9), RNG.choice(["data/raw/orders.parquet", "data/train.csv", "data/images.zip"]), RNG.choice(ORGS), RNG.choice(["reviews", "clickstream", "support-tickets", "receipts"])
    return [
        lambda: f"outs:\n- md5: {md5}\n  size: {n}\n  hash: md5\n  path: {f.split('/')[-1]}",
        lambda: f"outs:\n- md5: {md5}.dir\n  size: {n}\n  nfiles: {RNG.randrange(2, 9000)}\n  hash: md5\n  path: raw",
        lambda: f"schema: '2.0'\nstages:\n  featurize:\n    cmd: python src/featurize.py data/prepared data/features\n    deps:\n    - path: data/prepared\n      hash: md5\n      md5: {md5}.dir\n      size: {n}\n      nfiles: 2\n    outs:\n    - path: data/features\n      hash: md5\n      md5: {hexrun(32)}.dir\n      size: {RNG.randrange(10**4, 10**9)}\n      nfiles: 2",
        lambda: f".dvc/cache/files/md5/{md5[:2]}/{md5[2:]}",
        lambda: f"$ dvc diff --show-hash\nModified:\n    {hexrun(8)}..{hexrun(8)}  data/features/\n\nfiles summary: 0 added, 0 deleted, 1 modified",
        lambda: f'$ lakectl commit lakefs://{ds}/main -m "ingest 2027-02-03"\nBranch: lakefs://{ds}/main\nCommit for branch "main" completed.\n\nID: {hexrun(64)}\nMessage: ingest 2027-02-03\nTimestamp: 2027-02-03 10:22:31 +0000 UTC',
        lambda: f"/root/.cache/huggingface/datasets/{org}___{ds}/default/0.0.0/{hexrun(40)}/{ds}-train-00000-of-00003.arrow",
        lambda: f"Map (num_proc=8): 100%|██████████| {n % 200000}/{n % 200000} [00:14<00:00, 8123.45 examples/s]\nLoading cached processed dataset at /root/.cache/huggingface/datasets/{org}___{ds}/default/0.0.0/{hexrun(40)}/cache-{hexrun(16)}.arrow",
        lambda: f"$ kaggle datasets version -p ./data -m \"add feb\"\nStarting upload for file train.csv\n100%|██████████| {n // 10**6 % 900 + 1}M/{n // 10**6 % 900 + 1}M\nDataset version is being created. Please check progress at https://www.kaggle.com/datasets/{org}-data/{ds}",
        lambda: f"DESCRIBE HISTORY {ds.replace('-', '_')};\nversion  timestamp            operation  operationParameters\n{RNG.randrange(2, 400)}       2027-02-03 10:22:31  MERGE      {{predicate -> [\"(id = id)\"]}}",
        lambda: f"$ git lfs ls-files\n{hexrun(10)} * {f}\n{hexrun(10)} - data/raw/labels.json",
        lambda: f'{{"version": 1, "storagePolicy": "wandb-storage-policy-v1", "contents": {{"{f.split("/")[-1]}": {{"digest": "{b64bytes(16)}", "size": {n}}}}}}}',
        lambda: f"run_id: {{'run_name': '202702{RNG.randrange(1, 28):02d}-102231-validate-{ds}', 'run_time': '{ts()}.{RNG.randrange(10**5, 10**6)}+00:00'}}",
    ]


def i_lake_files() -> Forms:
    u, bucket, tbl = uid(), f"{RNG.choice(ORGS)}-lake", RNG.choice(["orders", "events", "sessions", "features_daily"])
    dd, ms = RNG.randrange(1, 28), RNG.randrange(1_800_000_000_000, 1_810_000_000_000)
    return [
        lambda: f"s3://{bucket}/warehouse/{tbl}/dt=2027-02-{dd:02d}/part-00000-{u}-c000.snappy.parquet",
        lambda: f"$ aws s3 ls s3://{bucket}/warehouse/{tbl}/dt=2027-02-{dd:02d}/\n2027-02-{dd:02d} 02:14:07          0 _SUCCESS\n2027-02-{dd:02d} 02:14:05   {RNG.randrange(10**6, 10**8)} part-00000-{u}-c000.snappy.parquet\n2027-02-{dd:02d} 02:14:05   {RNG.randrange(10**6, 10**8)} part-00001-{u}-c000.snappy.parquet",
        lambda: f"{tbl}/_delta_log/00000000000000000000.json\n{tbl}/_delta_log/00000000000000000001.json\n{tbl}/_delta_log/00000000000000000010.checkpoint.parquet\n{tbl}/_delta_log/_last_checkpoint",
        lambda: '{"add":{"path":"part-00000-' + u + '-c000.snappy.parquet","partitionValues":{},"size":' + str(RNG.randrange(10**5, 10**8)) + ',"modificationTime":' + str(ms) + ',"dataChange":true,"stats":"{\\"numRecords\\":' + str(RNG.randrange(10, 10**6)) + '}"}}',
        lambda: compact({"commitInfo": {"timestamp": ms, "operation": "WRITE", "operationParameters": {"mode": "Append", "partitionBy": "[]"}, "isolationLevel": "Serializable", "isBlindAppend": True, "engineInfo": "Apache-Spark/3.5.3 Delta-Lake/3.3.0", "txnId": u}}),
        lambda: f"s3://{bucket}/warehouse/db/{tbl}/metadata/{RNG.randrange(1, 99):05d}-{u}.metadata.json\ns3://{bucket}/warehouse/db/{tbl}/metadata/snap-{digits(19)}-1-{uid()}.avro\ns3://{bucket}/warehouse/db/{tbl}/metadata/{uid()}-m0.avro",
        lambda: f"SELECT snapshot_id, committed_at, operation FROM db.{tbl}.snapshots;\n{digits(19)}  2027-02-{dd:02d} 02:14:07.123  append\n{digits(19)}  2027-02-{dd:02d} 03:14:07.456  overwrite",
        lambda: f"27/02/{dd:02d} 02:10:31 INFO SparkContext: Submitted application: build_{tbl}\n27/02/{dd:02d} 02:10:32 INFO StandaloneSchedulerBackend: Connected to Spark cluster with app ID app-2027020{dd % 10}021032-{RNG.randrange(0, 9999):04d}",
        lambda: f"27/02/{dd:02d} 02:10:33 INFO Client: Submitting application application_{ms}_{RNG.randrange(1, 9999):04d} to ResourceManager",
        lambda: f"SHOW PARTITIONS {tbl};\ndt=2027-02-{dd:02d}/region=eu\ndt=2027-02-{dd:02d}/region=us",
        lambda: f"{tbl}/.hoodie/2027020{dd % 10}021407{RNG.randrange(100, 999)}.commit\n{tbl}/2027/02/{dd:02d}/{u}-0_0-27-35_2027020{dd % 10}021407{RNG.randrange(100, 999)}.parquet",
        lambda: f"$ parquet-tools meta part-00000-{u}-c000.snappy.parquet\ncreator:     parquet-mr version 1.13.1 (build {hexrun(40)})\nextra:       org.apache.spark.version = 3.5.3",
        lambda: f"s3://{bucket}/warehouse/{tbl}/_temporary/0/_temporary/attempt_2027020{dd % 10}021032{RNG.randrange(1000, 9999)}_0003_m_{RNG.randrange(0, 200):06d}_{RNG.randrange(0, 99)}/part-00012-{u}-c000.snappy.parquet",
    ]


def i_orchestration_ids() -> Forms:
    dag, task, proj, dd = RNG.choice(DAGS), RNG.choice(["extract", "load", "transform", "notify"]), RNG.choice(["jaffle_shop", "analytics", "finance_marts"]), RNG.randrange(1, 28)
    u = uid()
    return [
        lambda: f"logs/dag_id={dag}/run_id=scheduled__2027-02-{dd:02d}T00:00:00+00:00/task_id={task}/attempt=1.log",
        lambda: f"$ airflow dags trigger {dag}\ndag_id           | dag_run_id                                     | state  \n=================+================================================+========\n{dag} | manual__2027-02-{dd:02d}T10:22:31.{RNG.randrange(10**5, 10**6)}+00:00 | queued",
        lambda: compact({"dag_id": dag, "dag_run_id": f"scheduled__2027-02-{dd:02d}T00:00:00+00:00", "logical_date": f"2027-02-{dd:02d}T00:00:00+00:00", "state": "success"}),
        lambda: f"model.{proj}.stg_orders\ntest.{proj}.not_null_stg_orders_order_id.{hexrun(10)}\nsource.{proj}.raw.orders",
        lambda: f'    "model.{proj}.fct_orders": {{\n      "resource_type": "model",\n      "checksum": {{"name": "sha256", "checksum": "{hexrun(64)}"}},\n      "unique_id": "model.{proj}.fct_orders",',
        lambda: f'  "metadata": {{\n    "dbt_schema_version": "https://schemas.getdbt.com/dbt/run-results/v6.json",\n    "dbt_version": "1.9.2",\n    "generated_at": "{ts()}.{RNG.randrange(10**5, 10**6)}Z",\n    "invocation_id": "{u}"\n  }},',
        lambda: "10:22:31  Running with dbt=1.9.2\n10:22:32  Found 42 models, 118 data tests, 9 sources, 612 macros\n10:22:40  1 of 42 OK created sql view model dbt_dev.stg_orders ......... [CREATE VIEW in 0.41s]",
        lambda: f"$ dagster job launch -j {dag} -w workspace.yaml\nLaunched run {u}",
        lambda: f"10:22:31.123 | INFO    | prefect.engine - Created flow run '{RNG.choice(ADJ)}-{RNG.choice(NOUN)}' for flow '{dag}'\n10:22:31.456 | INFO    | Flow run '{RNG.choice(ADJ)}-{RNG.choice(NOUN)}' - View at https://app.prefect.cloud/account/{uid()}/workspace/{uid()}/runs/flow-run/{u}",
        lambda: f"$ argo submit etl.yaml -n workflows\nName:                {dag.replace('_', '-')}-{run(5, LOW)}\nNamespace:           workflows\nServiceAccount:      argo-workflow\nStatus:              Pending",
        lambda: f'{{"conf": {{}}, "dag_run_id": "dataset_triggered__2027-02-{dd:02d}T03:14:07.{RNG.randrange(10**5, 10**6)}+00:00", "run_type": "dataset_triggered"}}',
        lambda: f'  "metadata": {{\n    "project_name": "{proj}",\n    "project_id": "{hexrun(32)}",\n    "user_id": "{uid()}",\n    "adapter_type": "snowflake"\n  }}',
        lambda: f"https://kubeflow.{RNG.choice(ORGS)}.internal/#/runs/details/{u}",
    ]


def i_warehouse_ids() -> Forms:
    qid, proj = sf_query_id(), f"{RNG.choice(ORGS)}-analytics-{digits(6)}"
    job = f"bquxjob_{hexrun(8)}_{hexrun(11)}"
    return [
        lambda: f"> SELECT LAST_QUERY_ID();\n+--------------------------------------+\n| LAST_QUERY_ID()                      |\n|--------------------------------------|\n| {qid} |\n+--------------------------------------+",
        lambda: f"snowflake.connector.errors.ProgrammingError: 002003 (42S02): {qid}: SQL compilation error:\nObject 'ANALYTICS.PUBLIC.ORDERS' does not exist or not authorized.",
        lambda: f"Waiting on bqjob_r{hexrun(16)}_{hexrun(16)}_1 ... (3s) Current status: DONE",
        lambda: f"https://console.cloud.google.com/bigquery?project={proj}&j=bq:US:{job}&page=queryresults",
        lambda: pretty({"cluster_id": dbx_cluster(), "cluster_name": "etl-shared", "spark_version": "15.4.x-scala2.12", "node_type_id": "Standard_D8ds_v5", "state": "RUNNING"}),
        lambda: f"DATABRICKS_HOST=https://{dbx_host()}\nDATABRICKS_HTTP_PATH=/sql/1.0/warehouses/{hexrun(16)}",
        lambda: pretty({"QueryExecutionId": uid()}),
        lambda: f"Query id: {uid()}\n\n┌─count()─┐\n│  {RNG.randrange(1000, 999999)} │\n└─────────┘\n\n1 row in set. Elapsed: 0.004 sec.",
        lambda: f"analytics=# SELECT pg_last_query_id();\n pg_last_query_id\n------------------\n          {RNG.randrange(10**5, 10**8)}",
        lambda: f"Query 202702{RNG.randrange(1, 28):02d}_{RNG.randrange(0, 24):02d}{RNG.randrange(60):02d}{RNG.randrange(60):02d}_{RNG.randrange(0, 99999):05d}_{run(5, string.ascii_lowercase)}, FINISHED, 3 nodes\nSplits: 34 total, 34 done (100.00%)\n0.82 [1.2M rows, 18.4MB] [1.46M rows/s, 22.4MB/s]",
        lambda: f"queryid: -{digits(19)}\ncalls: {RNG.randrange(10, 99999)}\nmean_exec_time: {RNG.randrange(1, 900)}.{RNG.randrange(100, 999)}",
        lambda: f"https://{run(7, string.ascii_lowercase + string.digits)}.eu-central-1.snowflakecomputing.com\nAccount locator: {run(2, string.ascii_uppercase)}{digits(5)}",
        lambda: f"Job {proj}:US.{job} (DONE)\n  Bytes processed: {RNG.randrange(1, 900)} MB",
    ]


def i_sql_literals() -> Forms:
    u, h64, bucket = uid(), hexrun(64), f"{RNG.choice(ORGS)}-ml"
    return [
        lambda: f"SELECT * FROM orders WHERE order_id = '{u}';",
        lambda: f"SELECT md5('{RNG.choice(DBS)}') AS k;\n                k\n----------------------------------\n {hexrun(32)}",
        lambda: f"INSERT INTO files (id, path, sha256) VALUES ('{u}', 's3://{bucket}/raw/{hexrun(8)}.json', '{h64}');",
        lambda: f"SELECT * FROM spans WHERE trace_id = '{hexrun(32)}' AND span_id = '{hexrun(16)}';",
        lambda: "CREATE TABLE documents (\n  id UUID PRIMARY KEY DEFAULT gen_random_uuid(),\n  content_sha256 CHAR(64) NOT NULL,\n  embedding vector(1536)\n);",
        lambda: f"SELECT author, committed_at FROM commits WHERE sha = '{hexrun(40)}';",
        lambda: f"SELECT * FROM TABLE(RESULT_SCAN('{sf_query_id()}'));",
        lambda: f"SELECT TO_HEX(SHA256(CAST(customer_id AS STRING))) AS customer_key FROM `{RNG.choice(ORGS)}-analytics.raw.customers`",
        lambda: f"INSERT INTO model_registry (run_id, model_name, version, artifact_uri) VALUES ('{hexrun(32)}', 'churn-xgb', {RNG.randrange(1, 40)}, 's3://{bucket}/mlflow/{RNG.randrange(1, 90)}/{hexrun(32)}/artifacts/model');",
        lambda: f"SELECT decode('{hexrun(40)}', 'hex') AS raw_digest;",
        lambda: f"SELECT cityHash64('{u}') AS bucket_key, {RNG.randrange(1, 64)} AS shard",
        lambda: f"MERGE INTO dim_products t USING stg_products s ON t.product_id = s.product_id\nWHEN MATCHED AND t.row_hash <> s.row_hash THEN UPDATE SET row_hash = s.row_hash  -- e.g. '{hexrun(32)}'",
        lambda: f"UPDATE jobs SET status = 'done', finished_at = now() WHERE id = '{u}' RETURNING id;\n                  id\n--------------------------------------\n {u}",
    ]


def i_sql_no_credential() -> Forms:
    u, db, h, acct, org = RNG.choice(DB_USERS), RNG.choice(DBS), RNG.choice(HOSTS), sf_account(), RNG.choice(ORGS)
    return [
        lambda: "CREATE ROLE analyst NOLOGIN;\nGRANT USAGE ON SCHEMA marts TO analyst;\nGRANT SELECT ON ALL TABLES IN SCHEMA marts TO analyst;",
        lambda: f"CREATE USER '{u}'@'localhost' IDENTIFIED WITH auth_socket;\nALTER USER 'reporting'@'10.0.%' REQUIRE SSL PASSWORD EXPIRE INTERVAL 90 DAY;",
        lambda: f"CREATE USER {u.upper()} IDENTIFIED EXTERNALLY;\nCREATE USER APP_GLOBAL IDENTIFIED GLOBALLY AS 'CN=app,OU=svc,DC={org},DC=com';",
        lambda: f"ALTER USER {u.upper()} SET RSA_PUBLIC_KEY='{rsa_public_der()}';",
        lambda: f"DESC USER {u.upper()};\nproperty               | value\nRSA_PUBLIC_KEY_FP      | SHA256:{b64bytes(32)}\nDEFAULT_ROLE           | TRANSFORMER",
        lambda: f'db.createUser({{\n  user: "reporting",\n  pwd: passwordPrompt(),\n  roles: [ {{ role: "read", db: "{db}" }} ]\n}})',
        lambda: f"ALTER ROLE {u} SET search_path = analytics, public;\nALTER ROLE {u} CONNECTION LIMIT 20;",
        lambda: f"$ psql -h {h} -U {u} -d {db} -c '\\dt'\nPassword for user {u}: ",
        lambda: f"$ snowsql -a {acct} -u {u} --authenticator externalbrowser\nInitiating login request with your identity provider. A browser window should have opened for you to complete the login.",
        lambda: f"$ redis-cli -h cache.internal -p 6379 --tls INFO keyspace\n# Keyspace\ndb0:keys={RNG.randrange(100, 99999)},expires=12,avg_ttl=0",
        lambda: f"$ clickhouse-client --host {h} --secure --query \"SELECT version()\"\n24.8.{RNG.randrange(1, 14)}.{RNG.randrange(1, 99)}",
        lambda: "CREATE LOGIN [CORP\\svc_etl] FROM WINDOWS;\nCREATE USER [svc_etl] FOR LOGIN [CORP\\svc_etl];\nALTER ROLE db_datareader ADD MEMBER [svc_etl];",
        lambda: f"{db}=# \\du\n                             List of roles\n Role name |                         Attributes\n-----------+------------------------------------------------------------\n {u:<9} | \n postgres  | Superuser, Create role, Create DB, Replication, Bypass RLS",
    ]


def i_db_config_reference() -> Forms:
    u, db, h = RNG.choice(DB_USERS), RNG.choice(DBS), RNG.choice(HOSTS)
    return [
        lambda: f"CREATE USER '{u}'@'%' IDENTIFIED BY '${{DB_PASS}}';\nGRANT SELECT ON {db}.* TO '{u}'@'%';",
        lambda: f"{db}:\n  target: prod\n  outputs:\n    prod:\n      type: postgres\n      host: {h}\n      user: {u}\n      password: \"{{{{ env_var('DBT_PASSWORD') }}}}\"\n      dbname: {db}\n      schema: marts",
        lambda: "[database]\nsql_alchemy_conn_cmd = cat /run/secrets/airflow_db_uri\n\n[core]\nfernet_key_cmd = cat /run/secrets/fernet_key\n\n[webserver]\nsecret_key_cmd = cat /run/secrets/webserver_secret",
        lambda: '[secrets]\nbackend = airflow.providers.hashicorp.secrets.vault.VaultBackend\nbackend_kwargs = {"connections_path": "connections", "mount_point": "airflow", "url": "http://vault:8200"}',
        lambda: "config.providers=file\nconfig.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider\ndatabase.password=${file:/opt/kafka/secrets/db.properties:password}",
        lambda: "    environment:\n      POSTGRES_USER: airflow\n      POSTGRES_PASSWORD_FILE: /run/secrets/postgres_password\n      MYSQL_ROOT_PASSWORD_FILE: /run/secrets/mysql_root",
        lambda: "spark.hadoop.fs.s3a.aws.credentials.provider=software.amazon.awssdk.auth.credentials.WebIdentityTokenFileCredentialsProvider\nspark.hadoop.fs.s3a.endpoint.region=eu-west-1",
        lambda: f"connector.name=postgresql\nconnection-url=jdbc:postgresql://{h}:5432/{db}\nconnection-user={u}\nconnection-password=${{ENV:PG_PASSWORD}}",
        lambda: "<property>\n  <name>hadoop.security.credential.provider.path</name>\n  <value>jceks://hdfs/user/etl/s3.jceks</value>\n</property>",
        lambda: f'<clickhouse>\n  <users>\n    <{u}>\n      <password from_env="CLICKHOUSE_{u.upper()}_PASSWORD"/>\n    </{u}>\n  </users>\n</clickhouse>',
        lambda: 'SECRET_KEY = os.environ["SUPERSET_SECRET_KEY"]\nSQLALCHEMY_DATABASE_URI = os.environ["SUPERSET_DB_URI"]',
        lambda: f'[default]\naccount = "{sf_account()}"\nuser = "{u}"\nauthenticator = "SNOWFLAKE_JWT"\nprivate_key_file = "~/.snowflake/rsa_key.p8"',
        lambda: '    "database.password": "${secrets:debezium/pg-credentials:password}",\n    "config.providers": "secrets",\n    "config.providers.secrets.class": "io.strimzi.kafka.KubernetesSecretConfigProvider"',
        lambda: f"export PGPASSFILE=$HOME/.pgpass\npsql -h {h} -U {u} -d {db} -w",
    ]


def i_ml_code_reference() -> Forms:
    proj, org = RNG.choice(PROJECTS), RNG.choice(ORGS)
    return [
        lambda: 'token = os.environ["HF_TOKEN"]\nlogin(token=token)',
        lambda: 'from google.colab import userdata\nos.environ["HF_TOKEN"] = userdata.get("HF_TOKEN")',
        lambda: "$ huggingface-cli login\n\n    To log in, `huggingface_hub` requires a token generated from https://huggingface.co/settings/tokens .\nEnter your token (input will not be visible): \nAdd token as git credential? (Y/n) n",
        lambda: "wandb.login()  # reads WANDB_API_KEY from the environment or ~/.netrc",
        lambda: "$ wandb login\nwandb: Logging into wandb.ai. (Learn how to deploy a W&B server locally: https://wandb.me/wandb-server)\nwandb: You can find your API key in your browser here: https://wandb.ai/authorize\nwandb: Paste an API key from your profile and hit enter:",
        lambda: "client = OpenAI()  # uses OPENAI_API_KEY\nresp = client.responses.create(model=\"gpt-4o-mini\", input=prompt)",
        lambda: 'llm = ChatGroq(model="llama-3.3-70b-versatile", api_key=os.getenv("GROQ_API_KEY"))',
        lambda: "export HF_TOKEN=$(cat ~/.cache/huggingface/token)",
        lambda: 'kaggle_json = Path.home() / ".kaggle" / "kaggle.json"\nkaggle_json.chmod(0o600)',
        lambda: 'pc = Pinecone(api_key=os.environ.get("PINECONE_API_KEY"))',
        lambda: 'api_key <- Sys.getenv("OPENAI_API_KEY")\nstopifnot(nzchar(api_key))',
        lambda: f"%env WANDB_PROJECT={proj}\n%env WANDB_LOG_MODEL=checkpoint",
        lambda: f'mlflow.set_tracking_uri("http://mlflow.{org}.internal:5000")\nmlflow.set_experiment("{proj}")',
        lambda: "model = AutoModel.from_pretrained(repo_id, token=True)",
    ]


def i_agent_config_reference() -> Forms:
    org = RNG.choice(ORGS)
    vscode = {"inputs": [{"type": "promptString", "id": "hf-token", "description": "Hugging Face token", "password": True}], "servers": {"huggingface": {"type": "http", "url": "https://huggingface.co/mcp", "headers": {"Authorization": "Bearer ${input:hf-token}"}}}}
    mcp = {"mcpServers": {"github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"], "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}"}}}}
    cursor = {"mcpServers": {"search": {"command": "uvx", "args": ["search-mcp"], "env": {"API_KEY": "${env:SEARCH_API_KEY}"}}}}
    settings = {"apiKeyHelper": "~/bin/get-llm-key.sh", "env": {"DISABLE_TELEMETRY": "1"}, "permissions": {"deny": ["Read(./.env)", "Read(./secrets/**)"]}}
    desktop = {"mcpServers": {"filesystem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/dev/projects"]}}}
    return [
        lambda: pretty(vscode),
        lambda: pretty(mcp),
        lambda: pretty(cursor),
        lambda: '[model_providers.openrouter]\nname = "OpenRouter"\nbase_url = "https://openrouter.ai/api/v1"\nenv_key = "OPENROUTER_API_KEY"',
        lambda: f'[model_providers.proxy]\nbase_url = "https://llm.{org}.internal/v1"\nenv_http_headers = {{ "X-Api-Key" = "PROXY_API_KEY" }}\n\n[mcp_servers.figma]\nurl = "https://mcp.figma.com/mcp"\nbearer_token_env_var = "FIGMA_TOKEN"',
        lambda: "models:\n  - name: Claude\n    provider: anthropic\n    model: claude-sonnet-4-20250514\n    apiKey: ${{ secrets.ANTHROPIC_API_KEY }}",
        lambda: "model_list:\n  - model_name: gpt-4o\n    litellm_params:\n      model: azure/gpt-4o\n      api_key: os.environ/AZURE_API_KEY\ngeneral_settings:\n  master_key: os.environ/LITELLM_MASTER_KEY",
        lambda: "## Specify the OpenAI API key\n#openai-api-key: xxx\n\n## Specify the Anthropic API key\n#anthropic-api-key: xxx",
        lambda: "$ claude mcp list\nChecking MCP server health...\n\ngithub: npx -y @modelcontextprotocol/server-github - ✓ Connected\nlinear: https://mcp.linear.app/sse (SSE) - ✓ Connected",
        lambda: pretty(settings),
        lambda: pretty(desktop),
        lambda: "# .env.example\nOPENAI_API_KEY=\nTAVILY_API_KEY=\nLANGSMITH_API_KEY=\nLANGSMITH_PROJECT=default",
        lambda: pretty({"servers": {"github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/"}}}),
    ]


def i_masked() -> Forms:
    user, org, h, u, db = RNG.choice(USERS), RNG.choice(ORGS), RNG.choice(HOSTS), RNG.choice(DB_USERS), RNG.choice(DBS)
    dbh = dbx_host()
    return [
        lambda: f"$ huggingface-cli env\n- huggingface_hub version: 0.27.1\n- Token path ?: /home/{user}/.cache/huggingface/token\n- Has saved token ?: True\n- Who am I ?: {user}\n- Configured git credential helpers: store",
        lambda: f"openai.AuthenticationError: Error code: 401 - {{'error': {{'message': 'Incorrect API key provided: sk-proj-********************************************{run(4)}. You can find your API key at https://platform.openai.com/account/api-keys.', 'type': 'invalid_request_error', 'param': None, 'code': 'invalid_api_key'}}}}",
        lambda: "ChatOpenAI(model_name='gpt-4o-mini', temperature=0.0, openai_api_key=SecretStr('**********'), openai_proxy='')",
        lambda: f"[2027-02-03, 10:22:31 UTC] {{subprocess.py:93}} INFO - + curl -s -H 'Authorization: Bearer ***' https://api.{org}.com/v1/export",
        lambda: "HF_TOKEN=hf_****\nWANDB_API_KEY=****",
        lambda: f"  host: {h}\n  port: 5432\n  user: {u}\n  database: {db}\n  schema: dbt_{u}\n  Connection test: [OK connection ok]",
        lambda: f"Host: https://{dbh}\nUser: {user}@{org}.com\nAuthenticated with: pat\n-----\nCurrent configuration:\n  ✓ host: https://{dbh} (from ~/.databrickscfg config file)\n  ✓ token: ******** (from ~/.databrickscfg config file)\n  ✓ profile: default",
        lambda: f"Server ID:\t\t\t{org}-prod\nJFrog Platform URL:\t\thttps://{org}.jfrog.io/\nUser:\t\t\t\tci\nAccess token:\t\t\t***\nDefault:\t\t\ttrue",
        lambda: f"wandb: Currently logged in as: {user} ({RNG.choice(TEAMS)}). Use `wandb login --relogin` to force relogin",
        lambda: f'    "database.hostname": "{h}",\n    "database.user": "{u}",\n    "database.password": "[hidden]",',
        lambda: "spark.hadoop.fs.s3a.secret.key\t*********(redacted)\nspark.hadoop.fs.s3a.access.key\t*********(redacted)",
        lambda: f"Using API key sk-proj-...{run(4)} (truncated) for project {RNG.choice(PROJECTS)}",
        lambda: f"Successfully added `conn_id`=pg_{db} : postgres://{u}:******@{h}:5432/{db}",
    ]


def i_placeholder() -> Forms:
    return [
        lambda: "huggingface-cli login --token <YOUR_HF_TOKEN>",
        lambda: "export WANDB_API_KEY=your-api-key",
        lambda: '{"username":"<your-kaggle-username>","key":"<your-kaggle-key>"}',
        lambda: 'client = OpenAI(api_key="sk-...")',
        lambda: "TELEGRAM_BOT_TOKEN=<bot-token-from-BotFather>",
        lambda: "CREATE USER app IDENTIFIED BY '<password>';",
        lambda: '"env": { "BRAVE_API_KEY": "YOUR_API_KEY_HERE" }',
        lambda: 'PINECONE_API_KEY="YOUR_API_KEY"',
        lambda: "poetry config http-basic.internal <username> <password>",
        lambda: 'curl -H "X-Shopify-Access-Token: {access_token}" https://{shop}.myshopify.com/admin/api/2025-01/shop.json',
        lambda: "# Replace hf_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx with a token from https://huggingface.co/settings/tokens",
        lambda: "AIRFLOW__CORE__FERNET_KEY=<output of: python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'>",
        lambda: "TWILIO_ACCOUNT_SID=ACXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX\nTWILIO_AUTH_TOKEN=your_auth_token",
        lambda: '    apiKey: "<INSERT_YOUR_MISTRAL_KEY>"',
    ]


def i_public_vendor_ids() -> Forms:
    sid, org = "AC" + hexrun(32), RNG.choice(ORGS)
    return [
        lambda: f"TWILIO_ACCOUNT_SID={sid}\nTWILIO_MESSAGING_SERVICE_SID=MG{hexrun(32)}",
        lambda: compact({"sid": "SM" + hexrun(32), "account_sid": sid, "status": "queued", "to": "+15005550006", "from": "+15005550006"}),
        lambda: f"const searchClient = algoliasearch('{run(10, UP)}', '{hexrun(32)}');",
        lambda: f"<Auth0Provider\n  domain=\"{org}.us.auth0.com\"\n  clientId=\"{run(32)}\"\n  authorizationParams={{{{ redirect_uri: window.location.origin }}}}\n>",
        lambda: f"OKTA_ISSUER=https://{org}.okta.com/oauth2/default\nOKTA_CLIENT_ID=0oa{run(17)}",
        lambda: f"const stripe = Stripe('pk_live_51{run(97)}');",
        lambda: f'<script src="https://www.paypal.com/sdk/js?client-id=A{run(79, B64URL)}&currency=EUR"></script>',
        lambda: f'const checkout = await AdyenCheckout({{ environment: "live", clientKey: "live_{run(32, UP)}" }});',
        lambda: f"const payments = Square.payments('sq0idp-{run(22, B64URL)}', 'L{run(12, UP)}');",
        lambda: f"braintree.client.create({{ authorization: 'production_{run(8, LOW)}_{run(16, LOW)}' }});",
        lambda: f"LANGFUSE_PUBLIC_KEY=pk-lf-{uid()}\nLANGFUSE_HOST=https://cloud.langfuse.com",
        lambda: f'# shopify.app.toml\nclient_id = "{hexrun(32)}"\nname = "{org}-sync"\napplication_url = "https://sync.{org}.com"\nembedded = true',
        lambda: f'const options = {{ key: "rzp_live_{run(14)}", amount: 50000, currency: "INR", name: "{org.title()}" }};',
    ]


def i_chat_platform_ids() -> Forms:
    sf, org, chat = snowflake_id(), RNG.choice(ORGS), "-100" + digits(10)
    return [
        lambda: f"chat.postMessage channel=C{run(10, UP)} thread_ts={RNG.randrange(1_800_000_000, 1_810_000_000)}.{digits(6)}",
        lambda: compact({"type": "message", "channel": "C0" + run(8, UP), "user": "U0" + run(8, UP), "team": "T0" + run(8, UP), "ts": f"{RNG.randrange(1_800_000_000, 1_810_000_000)}.{digits(6)}", "text": "deploy finished"}),
        lambda: f"DISCORD_GUILD_ID={sf}\nDISCORD_CHANNEL_ID={snowflake_id()}",
        lambda: f"https://discord.com/channels/{sf}/{snowflake_id()}/{snowflake_id()}",
        lambda: f"TELEGRAM_CHAT_ID={chat}",
        lambda: compact({"ok": True, "result": [{"update_id": int(digits(9)), "message": {"message_id": 42, "from": {"id": int(digits(10)), "is_bot": False, "first_name": "Dev"}, "chat": {"id": int(chat), "title": "alerts", "type": "supergroup"}, "date": RNG.randrange(1_800_000_000, 1_810_000_000), "text": "/status"}}]}),
        lambda: f"display_information:\n  name: deploy-bot\nsettings:\n  socket_mode_enabled: true\n# app id: A0{run(9, UP)}",
        lambda: f"https://{org}.slack.com/archives/C0{run(8, UP)}/p{RNG.randrange(1_800_000_000, 1_810_000_000)}{digits(6)}",
        lambda: f"19:{hexrun(32)}@thread.tacv2",
        lambda: f"<@{sf}> deployed to <#{snowflake_id()}> (ping <@&{snowflake_id()}>)",
        lambda: f"usergroup: S0{run(8, UP)}  workflow: Wf0{run(8, UP)}",
        lambda: compact({"ok": True, "result": {"id": int(digits(10)), "is_bot": True, "first_name": "Deploy", "username": f"{org}_deploy_bot"}}),
        lambda: f"DISCORD_APPLICATION_ID={sf}\nDISCORD_PUBLIC_KEY={hexrun(64)}",
    ]


def i_ai_api_ids() -> Forms:
    org = RNG.choice(ORGS)
    return [
        lambda: compact({"id": "chatcmpl-" + run(29), "object": "chat.completion", "created": RNG.randrange(1_800_000_000, 1_810_000_000), "model": "gpt-4o-mini-2024-07-18", "system_fingerprint": "fp_" + hexrun(10)}),
        lambda: compact({"id": "msg_01" + run(22), "type": "message", "role": "assistant", "model": "claude-sonnet-4-20250514", "stop_reason": "tool_use", "content": [{"type": "tool_use", "id": "toolu_01" + run(22), "name": "bash", "input": {"command": "ls"}}]}),
        lambda: f"request-id: req_011C{run(20)}\nx-request-id: req_{hexrun(32)}",
        lambda: f"file-{run(22)}  batch_{hexrun(32)}  vs_{run(24)}",
        lambda: f"asst_{run(24)} thread_{run(24)} run_{run(24)}",
        lambda: compact({"id": "resp_" + hexrun(48), "output": [{"type": "function_call", "call_id": "call_" + run(24), "name": "get_weather"}]}),
        lambda: f"https://{RNG.choice(['docs-index', 'products', 'support-kb'])}-{hexrun(7)}.svc.aped-{digits(4)}-{hexrun(4)}.pinecone.io",
        lambda: compact({"id": uid(), "version": 3, "score": round(RNG.random(), 4), "payload": {"source": f"docs/{RNG.choice(PROJECTS)}.md"}}),
        lambda: compact({"class": "Document", "id": uid(), "creationTimeUnix": RNG.randrange(1_800_000_000_000, 1_810_000_000_000)}),
        lambda: f"ftjob-{run(24)} succeeded: ft:gpt-4o-mini-2024-07-18:{org}::{run(8)}",
        lambda: f"projects/{digits(12)}/locations/us-central1/endpoints/{digits(19)}",
        lambda: f"https://cloud.langfuse.com/project/c{run(24, LOW)}/traces/{hexrun(32)}",
        lambda: f"https://smith.langchain.com/o/{uid()}/projects/p/{uid()}/r/{uid()}",
    ]


def png_b64(n: int) -> str:
    header = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + struct.pack(">II", RNG.randrange(16, 512), RNG.randrange(16, 512)) + b"\x08\x06\x00\x00\x00"
    return b64(header + RNG.randbytes(n))


def i_base64_public() -> Forms:
    org = RNG.choice(ORGS)
    cert = "-----BEGIN CERTIFICATE-----\n" + b64bytes(45) + "\n"
    return [
        lambda: f'<img src="data:image/png;base64,{png_b64(60)}" />',
        lambda: compact({"data": {"image/png": png_b64(90), "text/plain": ["<Figure size 640x480 with 1 Axes>"]}, "metadata": {}, "output_type": "display_data"}),
        lambda: "$ echo -n 'eu-west-1' | base64\nZXUtd2VzdC0x",
        lambda: f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dashboard-assets\nbinaryData:\n  logo.png: {png_b64(48)}",
        lambda: f"{RNG.randrange(0, 9)}\t{b64(compact({'order_id': RNG.randrange(1, 99999), 'status': 'shipped'}).encode())}",
        lambda: f"    caBundle: {b64(cert.encode())}",
        lambda: f"Content-MD5: {b64bytes(16)}",
        lambda: f"    Hash (crc32c):          {b64bytes(4)}\n    Hash (md5):             {b64bytes(16)}\n    ETag:                   C{run(10, UP)}EAE=",
        lambda: f'  "next_cursor": "{b64(compact({"offset": RNG.randrange(100, 9000)}).encode())}"',
        lambda: f'ETag: W/"{b64bytes(20)}"',
        lambda: f"$ base64 -w0 README.md\n{b64(f'---{chr(10)}license: apache-2.0{chr(10)}---{chr(10)}# {RNG.choice(MODELS)}{chr(10)}'.encode())}",
        lambda: f"ssh-ed25519 {ssh_ed25519_pub()} ci@{org}",
        lambda: f'"avro.schema": "{b64(compact({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}).encode())}"',
    ]


def i_project_paths() -> Forms:
    pkg, proj, model = RNG.choice(["churnkit", "featurekit", "ranker", "ingestlib"]), RNG.choice(["jaffle_shop", "analytics"]), RNG.choice(MODELS)
    n = RNG.randrange(100, 9999)
    return [
        lambda: f"src/{pkg}/pipelines/ingest/load_orders.py\nsrc/{pkg}/features/build_features.py\nnotebooks/03-feature-engineering.ipynb",
        lambda: f"models/staging/stripe/stg_stripe__payments.sql\nmodels/marts/finance/fct_orders.yml\n{proj}/macros/generate_schema_name.sql",
        lambda: f"dags/{RNG.choice(DAGS)}.py\nplugins/operators/snowflake_merge_operator.py\ninclude/sql/merge_orders.sql",
        lambda: f"feature/DATA-{n}-add-embedding-cache",
        lambda: f"exp/lora-r{RNG.choice([8, 16, 32])}-lr{RNG.choice(['1e-4', '2e-4', '3e-5'])}-bs{RNG.choice([16, 32, 64])}",
        lambda: "tests/unit/test_featurize.py::TestScaler::test_fit_transform[float32-cuda]\ntests/test_tokenizer.py::test_roundtrip[bpe-32k]",
        lambda: "not_null_stg_orders_order_id\nunique_stg_orders_order_id\naccepted_values_stg_orders_status__placed__shipped__completed__return_pending__returned",
        lambda: "gx/checkpoints/orders_checkpoint.yml\ngx/expectations/orders_suite.json\ngx/uncommitted/data_docs/local_site/index.html",
        lambda: f"outputs/{model}/checkpoint-{n}/adapter_model.safetensors",
        lambda: f"outputs/2027-02-{RNG.randrange(1, 28):02d}/{RNG.randrange(0, 24):02d}-{RNG.randrange(60):02d}-{RNG.randrange(60):02d}/.hydra/config.yaml",
        lambda: f"lightning_logs/version_{RNG.randrange(0, 40)}/checkpoints/epoch={RNG.randrange(1, 30)}-step={n}.ckpt",
        lambda: f"src/test/scala/com/{RNG.choice(ORGS)}/etl/OrdersJobSpec.scala\n- should dedupe orders by order_id *** FAILED ***",
        lambda: f"{hexrun(7)} (HEAD -> exp/{model}) Tune warmup to 500 steps\n{hexrun(7)} Add LoRA config for {model}",
    ]


def i_ml_runtime_ids() -> Forms:
    job, org = RNG.choice(["pytorch-training", "huggingface-pytorch-training", "xgboost"]), RNG.choice(ORGS)
    stamp, wh, slurm, proj = f"2027-02-{RNG.randrange(1, 28):02d}-{RNG.randrange(24):02d}-{RNG.randrange(60):02d}-{RNG.randrange(60):02d}-{RNG.randrange(100, 999)}", hexrun(8), digits(7), RNG.choice(PROJECTS)
    return [
        lambda: f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-{uid()})\nGPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-{uid()})",
        lambda: f"  MIG 3g.40gb     Device  0: (UUID: MIG-{uid()})",
        lambda: f"Job 'raysubmit_{run(16)}' submitted successfully",
        lambda: f"2027-02-03 10:22:31,123\tINFO worker.py:1821 -- Connected to Ray cluster. View the dashboard at 127.0.0.1:8265\nnode_id={hexrun(56)}",
        lambda: f"TrainingJobName: {job}-{stamp}\nTrainingJobArn: arn:aws:sagemaker:us-east-1:{digits(12)}:training-job/{job}-{stamp}",
        lambda: f"projects/{digits(12)}/locations/us-central1/customJobs/{digits(19)}",
        lambda: f'Downloading: "https://download.pytorch.org/models/resnet50-{wh}.pth" to /root/.cache/torch/hub/checkpoints/resnet50-{wh}.pth',
        lambda: f"MASTER_ADDR=10.0.1.{RNG.randrange(2, 250)}\nMASTER_PORT=29500\nWORLD_SIZE=16\nRANK=3\nTORCHELASTIC_RUN_ID={uid()}",
        lambda: f"NAME{' ' * (len(proj) + 8)}READY   STATUS    RESTARTS   AGE\n{proj}-master-0   1/1     Running   0          3h12m\n{proj}-worker-0   1/1     Running   0          3h12m",
        lambda: f"gpu-node-3:12345:12345 [3] NCCL INFO comm 0x{hexrun(12)} rank 3 nranks 16 cudaDev 3 nvmlDev 3 busId {hexrun(2)}000 commId 0x{hexrun(16)} - Init COMPLETE",
        lambda: f"Submitted batch job {slurm}\n$ squeue -u $USER\n  JOBID PARTITION     NAME     USER ST       TIME  NODES\n{slurm}       gpu train-ll   {RNG.choice(USERS)[:8]}  R       1:02      2",
        lambda: f"✓ Created objects.\n✓ App deployed! 🎉\nView Deployment: https://modal.com/apps/{org}/main/deployed/{RNG.choice(PROJECTS)}\napp id: ap-{run(22)}",
        lambda: f"INFO 02-03 10:22:31 [logger.py:39] Received request cmpl-{hexrun(32)}-0: prompt: 'Summarize', params: SamplingParams(n=1, temperature=0.7, max_tokens=256)",
    ]


def i_registry_safe() -> Forms:
    org, u = RNG.choice(ORGS), RNG.choice(USERS)
    return [
        lambda: f"[global]\nindex-url = https://pypi.{org}.internal/simple\ntrusted-host = pypi.{org}.internal",
        lambda: f"$ poetry source add --priority=supplemental internal https://pypi.{org}.internal/simple/\n$ poetry config http-basic.internal {u}\nPassword:",
        lambda: f"UV_INDEX_URL=https://pypi.{org}.internal/simple\nUV_INDEX_INTERNAL_USERNAME=__token__",
        lambda: f"channels:\n  - conda-forge\n  - nodefaults\nchannel_alias: https://conda.{org}.internal\nssl_verify: /etc/ssl/certs/ca-bundle.crt",
        lambda: f'<packageSources>\n  <clear />\n  <add key="nuget.org" value="https://api.nuget.org/v3/index.json" protocolVersion="3" />\n  <add key="internal" value="https://pkgs.dev.azure.com/{org}/_packaging/feed/nuget/v3/index.json" />\n</packageSources>',
        lambda: f"$ bundle config get gems.contribsys.com\nSettings for `gems.contribsys.com` in order of priority. The top value will be used\nSet for the current user (/home/{u}/.bundle/config): \"{hexrun(8)}:[REDACTED]\"",
        lambda: f"go env -w GOPRIVATE=github.com/{org}/*\ngo env -w GONOSUMDB=github.com/{org}/*\ngo env -w GOPROXY=https://proxy.golang.org,direct",
        lambda: f"@{org}:registry=https://npm.pkg.github.com\nengine-strict=true",
        lambda: f"$ jf c add {org}-prod --url=https://{org}.jfrog.io --interactive=true\nJFrog access token (Leave blank for username and password/API key): ",
        lambda: '[registry]\nglobal-credential-providers = ["cargo:token", "cargo:libsecret"]',
        lambda: f"Looking in indexes: https://pypi.org/simple, https://pypi.{org}.internal/simple\nCollecting {RNG.choice(PYPKGS)}=={pyver()}",
        lambda: f'[[index]]\nname = "internal"\nurl = "https://pypi.{org}.internal/simple"\nauthenticate = "always"',
        lambda: f"$ twine upload --repository internal dist/*\nUploading distributions to https://pypi.{org}.internal/\nEnter your API token: ",
        lambda: "pip install keyring artifacts-keyring\npip config set global.keyring-provider subprocess",
    ]


IDENTITY_FAMILIES: list[tuple[str, Callable[[], Forms], int]] = [
    ("npm-lockfile", i_npm_lock, 13), ("python-lockfile", i_python_lock, 13), ("conda-lockfile", i_conda_lock, 13),
    ("cargo-go-lockfile", i_cargo_go, 13), ("app-lockfile", i_app_lockfiles, 13), ("nix-store", i_nix, 13),
    ("hf-artifact", i_hf_artifacts, 13), ("tracking-run", i_tracking_runs, 13), ("dataset-version", i_dataset_versions, 13),
    ("lake-file", i_lake_files, 13), ("orchestration-id", i_orchestration_ids, 13), ("warehouse-id", i_warehouse_ids, 13),
    ("sql-literal", i_sql_literals, 13), ("sql-no-credential", i_sql_no_credential, 13), ("db-config-reference", i_db_config_reference, 14),
    ("ml-code-reference", i_ml_code_reference, 14), ("agent-config-reference", i_agent_config_reference, 13), ("masked-output", i_masked, 13),
    ("doc-placeholder", i_placeholder, 14), ("public-vendor-id", i_public_vendor_ids, 13), ("chat-platform-id", i_chat_platform_ids, 13),
    ("ai-api-id", i_ai_api_ids, 13), ("base64-public", i_base64_public, 13), ("project-path", i_project_paths, 13),
    ("ml-runtime-id", i_ml_runtime_ids, 13), ("registry-config-safe", i_registry_safe, 14),
]


def identity_rows() -> list[dict[str, object]]:
    return identity_rows_of(IDENTITY_FAMILIES, "di", 3, "data-identities")


def main() -> None:
    write_sets({"data_secrets.jsonl": secret_rows(), "data_identities.jsonl": identity_rows()})


if __name__ == "__main__":
    main()
