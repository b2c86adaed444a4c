"""Generate the secret regression set (``secrets.jsonl``): secrets as they appear in coding
sessions -- shell commands, config and credentials files, tool outputs -- each row with the
exact values that must be gone after redaction (``secrets``) and, where the line also names the
project's own things, what must stay (``keep``: hosts, users, paths, variable names).

The values are fake, drawn from a seeded generator in the real shapes (provider prefixes,
lengths, alphabets). Each row's ``split`` (``dev``/``test``) is fixed by a hash of its id,
written before any rule.

    python benchmarks/coding_sets/make_secrets.py   # rewrites secrets.jsonl
"""

# ruff: noqa: E501, E702  (a data table: one row per line reads best)

from __future__ import annotations

import base64
import json
import random
from pathlib import Path

from make_identities import split_of

HERE = Path(__file__).resolve().parent
RNG = random.Random(4450)
AN = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def r(n: int, alphabet: str = AN) -> str:
    return "".join(RNG.choice(alphabet) for _ in range(n))


def pw() -> str:
    """A human-chosen-looking password with punctuation."""
    words = ["Summer", "tiger", "Blue", "monkey", "Orange", "delta", "Falcon", "river"]
    return RNG.choice(words) + RNG.choice(["!", "#", "_", "@", "$", "%"]) + str(RNG.randrange(10, 9999)) \
        + RNG.choice(["", "x", "Q", "!!"])


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def jwt() -> str:
    head = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
    body = base64.urlsafe_b64encode(
        json.dumps({"sub": r(8), "exp": RNG.randrange(1_700_000_000, 1_900_000_000)}).encode()
    ).decode().rstrip("=")
    return f"{head}.{body}.{r(43, AN + '-_')}"


def rows() -> list[dict[str, object]]:
    out: list[tuple[str, str, list[str], list[str]]] = []

    def add(where: str, text: str, secrets: list[str], keep: list[str] | None = None) -> None:
        out.append((where, text, secrets, keep or []))

    p = pw(); add("shell", f"mysql -u root -p{p} -h db.internal shop_production", [p], ["db.internal", "shop_production"])
    p = pw(); add("shell", f"mysql --user=app --password={p} orders", [p], ["orders"])
    p = r(14); add("shell", f"mysqldump -uadmin -p'{p}' --single-transaction billing > dump.sql", [p], ["billing"])
    p = pw(); add("shell", f"sshpass -p '{p}' ssh deploy@10.0.3.17 'systemctl restart api'", [p], ["deploy@10.0.3.17"])
    p = r(12); add("shell", f"sshpass -p {p} scp build.tar.gz ci@bastion:/srv/", [p], ["build.tar.gz"])
    p = pw(); add("shell", f"curl -u admin:{p} https://jenkins.acme.io/job/api/build", [p], ["jenkins.acme.io"])
    p = r(20); add("shell", f"curl --user ci-bot:{p} -X POST https://nexus.internal/service/rest/v1/components", [p], ["nexus.internal"])
    p = r(24); add("shell", f"docker login -u acme-ci -p {p} registry.acme.io", [p], ["registry.acme.io", "acme-ci"])
    p = r(30); add("shell", f"docker login --username=bot --password={p} ghcr.io", [p], ["ghcr.io"])
    p = r(16); add("shell", f"echo '{p}' | docker login --password-stdin -u deploy registry.gitlab.com", [p], ["registry.gitlab.com"])
    p = pw(); add("shell", f"PGPASSWORD={p} psql -h localhost -U ledger ledger_dev", [p], ["ledger_dev"])
    p = pw(); add("shell", f"psql 'postgresql://ledger:{p}@localhost:5432/ledger?sslmode=disable'", [p], ["localhost:5432/ledger"])
    p = "Tr0ub4dor&" + r(6); add("shell", f"export DB_PASS='{p}'", [p])
    p = "a&b" + r(10); add("shell", f"DATABASE_URL=postgres://app:{p}@db:5432/app rails s", [p, p.split('&')[1]], ["db:5432/app"])
    p = r(10) + "&" + r(8); add("config", f"SMTP_PASSWORD={p}", [p, p.split('&')[1]])
    p = r(32); add("shell", f"redis-cli -h cache.internal -a {p} FLUSHDB", [p], ["cache.internal"])
    p = pw(); add("shell", f"mongosh 'mongodb+srv://admin:{p}@cluster0.ab1cd.mongodb.net/test'", [p], ["cluster0.ab1cd.mongodb.net"])
    p = r(18); add("shell", f"git clone https://jdoe:{p}@bitbucket.org/acme/payments.git", [p], ["bitbucket.org/acme/payments.git"])
    t = "ghp_" + r(36); add("shell", f"git remote set-url origin https://x-access-token:{t}@github.com/acme/calc.git", [t], ["github.com/acme/calc.git"])
    t = "glpat-" + r(20, AN + "-_"); add("shell", f"GITLAB_TOKEN={t} glab mr create --fill", [t], ["glab mr create"])
    p = r(20); add("shell", f"htpasswd -b -c .htpasswd admin {p}", [p], [".htpasswd"])
    p = r(16); add("shell", f"openssl pkcs12 -export -in cert.pem -out cert.p12 -passout pass:{p}", [p], ["cert.p12"])
    p = pw(); add("shell", f"keytool -importkeystore -srckeystore a.jks -srcstorepass {p} -deststorepass {p}", [p], ["a.jks"])
    p = r(22); add("shell", f"ansible-vault decrypt --vault-password-file <(echo {p}) group_vars/prod.yml", [p], ["group_vars/prod.yml"])
    p = pw(); add("shell", f"az login --service-principal -u 6f1c2d3e-aaaa-bbbb-cccc-1234567890ab -p {p} --tenant acme.onmicrosoft.com", [p], ["acme.onmicrosoft.com"])
    t = "npm_" + r(36); add("shell", f"npm config set //registry.npmjs.org/:_authToken {t}", [t], ["registry.npmjs.org"])
    p = r(26); add("shell", f"mvn deploy -Drepo.password={p} -Drepo.user=ci", [p], ["mvn deploy"])
    p = r(26); add("shell", f"./gradlew publish -PsigningPassword={p}", [p], ["./gradlew publish"])
    p = r(24); add("shell", f"dotnet nuget add source https://pkgs.dev.azure.com/acme/_packaging/feed/nuget/v3/index.json -u ci -p {p} --store-password-in-clear-text", [p], ["pkgs.dev.azure.com"])
    p = r(28); add("shell", f"helm repo add internal https://charts.acme.io --username ci --password {p}", [p], ["charts.acme.io"])
    # config and credentials files
    p = pw(); add("config", f"db.internal:5432:ledger:ledger:{p}", [p], ["db.internal:5432"])
    p = r(16); add("config", f"# ~/.pgpass\nlocalhost:*:*:postgres:{p}\n", [p])
    p = r(20); add("config", f"machine api.heroku.com\n  login jane@acme.io\n  password {p}\n", [p], ["api.heroku.com"])
    p = r(18); add("config", f"machine github.com login jdoe password {p}", [p], ["github.com"])
    p = pw(); add("config", f"[client]\nuser=root\npassword={p}\nhost=127.0.0.1\n", [p], ["127.0.0.1"])
    k, s = "AKIA" + r(16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"), r(40, AN + "+/")
    add("config", f"[default]\naws_access_key_id = {k}\naws_secret_access_key = {s}\nregion = eu-west-1\n", [k, s], ["eu-west-1"])
    p = r(24); add("config", f"spring.datasource.password={p}\nspring.datasource.url=jdbc:postgresql://db:5432/orders", [p], ["jdbc:postgresql://db:5432/orders"])
    p = r(20); add("config", f"  <server>\n    <id>nexus</id>\n    <username>deploy</username>\n    <password>{p}</password>\n  </server>", [p], ["nexus"])
    p = r(20); add("config", f"ConnectionStrings__Default=Server=sql01;Database=Shop;User Id=sa;Password={p};TrustServerCertificate=True", [p], ["sql01"])
    p = pw(); add("config", f'"ConnectionStrings": {{ "Db": "Host=pg;Database=app;Username=app;Password={p}" }}', [p])
    p = r(30); add("config", f"DB_CONNECTION=mysql\nDB_HOST=127.0.0.1\nDB_USERNAME=laravel\nDB_PASSWORD={p}\nAPP_KEY=base64:{b64(r(32))}", [p], ["127.0.0.1", "laravel"])
    k = b64(r(32)); add("config", f"APP_KEY=base64:{k}", [k])
    p = r(20); add("config", f"production:\n  adapter: postgresql\n  password: <%= ENV['X'] %>\n  secret_key_base: {r(2)}{p}", [p])
    p = r(22); add("config", f"[pypi]\n  username = __token__\n  password = pypi-{p}{r(40)}", [p])
    t = "xoxb-" + f"{RNG.randrange(10**11, 10**12)}-{RNG.randrange(10**11, 10**12)}-" + r(24)
    add("config", f"slack:\n  bot_token: {t}\n  channel: '#deploys'", [t], ["#deploys"])
    p = r(32); add("config", f"//npm.pkg.github.com/:_authToken={p}", [p], ["npm.pkg.github.com"])
    p = r(40, AN + "+/"); enc = b64("-----BEGIN RSA PRIVATE KEY-----\n" + p + "\n-----END RSA PRIVATE KEY-----")
    add("config", f"users:\n- name: ci\n  user:\n    client-key-data: {enc}", [enc])
    # tool outputs: env dumps with neutral names, printed values, headers
    p = r(28); add("output", f"$ env | sort\nHOME=/home/dev\nLANG=C.UTF-8\nORDERS_DB_PASS={p}\nPATH=/usr/bin:/bin", [p], ["HOME=/home/dev", "ORDERS_DB_PASS"])
    v = r(40, AN + "+/"); add("output", f"$ printenv\nSTAGING_AWS_SECRET={v}\nSHELL=/bin/zsh", [v], ["SHELL=/bin/zsh"])
    v = r(32); add("output", f"$ env\nSERVICE_X_VALUE={v}\nVAULT_ADDR=https://vault.internal:8200", [v], ["VAULT_ADDR=https://vault.internal:8200"])
    v = r(36); add("output", f"$ heroku config\n=== acme-api Config Vars\nDATABASE_URL: postgres://u:{v}@ec2-1-2-3-4.compute-1.amazonaws.com:5432/d", [v])
    p = pw(); enc = b64(f"password={p}"); add("output", f"$ kubectl get secret db -o jsonpath='{{.data.config}}'\n{enc}", [enc])
    p = pw(); enc = b64(f"admin:{p}"); add("output", f"Authorization: Basic {enc}", [enc])
    p = r(26); enc = b64(f'{{"user":"ci","password":"{p}"}}'); add("output", f"AUTH_BLOB={enc}", [enc])
    t = jwt(); add("output", f"> GET /api/v1/me HTTP/1.1\n> Authorization: Bearer {t}\n> Host: api.acme.io", [t], ["api.acme.io"])
    t = r(40); add("output", f"Authorization: token {t}", [t])
    t = r(32); add("output", f"X-Api-Key: {t}", [t])
    t = "sk_live_" + r(24); add("output", f"stripe.error.AuthenticationError: Invalid API Key provided: {t}", [t])
    t = "whsec_" + r(32); add("output", f"> Ready! Your webhook signing secret is {t} (^C to quit)", [t])
    t = "sk-ant-api03-" + r(80, AN + "-_"); add("output", f"anthropic.AuthenticationError: invalid x-api-key {t}", [t])
    t = "sk-proj-" + r(48, AN + "-_"); add("config", f"OPENAI_API_KEY={t}", [t])
    t = "AIza" + r(35, AN + "-_"); add("output", f'  "apiKey": "{t}",', [t])
    t = "hf_" + r(34); add("shell", f"huggingface-cli login --token {t}", [t])
    t = "github_pat_" + r(22) + "_" + r(59); add("output", f"remote: Invalid username or token {t}", [t])
    t = f"{RNG.randrange(10**8, 10**9)}:AA{r(33, AN + '-_')}"; add("config", f"TELEGRAM_BOT={t}", [t])
    t = "SG." + r(22, AN + "-_") + "." + r(43, AN + "-_"); add("config", f"sendgrid: {t}", [t])
    body = "\n".join(r(64, AN + "+/") for _ in range(6))
    add("output", f"$ cat ~/.ssh/id_ed25519\n-----BEGIN OPENSSH PRIVATE KEY-----\n{body}\n-----END OPENSSH PRIVATE KEY-----", body.split("\n"))
    p = r(14); add("output", f"Connecting to amqp://guest:{p}@rabbitmq:5672// ... connected", [p], ["rabbitmq:5672"])
    p = pw(); add("output", f"sqlalchemy.exc.OperationalError: (psycopg2.OperationalError) connection to server at \"db\" failed for postgresql+psycopg2://svc:{p}@db/ledger", [p])
    p = r(18); add("output", f"INFO  Starting with args: --db-password {p} --port 8080", [p], ["--port 8080"])
    p = r(18); add("output", f"+ ./bin/migrate -u admin -P {p} --host db", [p])
    p = r(20); add("shell", f"wget --http-user=ci --http-password={p} https://artifacts.acme.io/app.tar.gz", [p], ["artifacts.acme.io"])
    p = r(24); add("shell", f"snowsql -a acme -u etl --password {p} -q 'select 1'", [p])
    p = r(24); add("output", f"Set-Variable -Name pwd -Value '{p}'\n$cred = New-Object PSCredential('svc', (ConvertTo-SecureString '{p}' -AsPlainText -Force))", [p])
    p = r(16); add("shell", f"sqlcmd -S tcp:sql01,1433 -U sa -P '{p}' -Q 'SELECT 1'", [p], ["tcp:sql01,1433"])
    result = []
    for i, (where, text, secrets, keep) in enumerate(out):
        rid = f"sec{i:03d}"
        result.append({"id": rid, "where": where, "text": text, "secrets": secrets, "keep": keep,
                       "split": split_of(rid)})
    return result


def main() -> None:
    data = rows()
    (HERE / "secrets.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in data), encoding="utf-8")
    print(f"{len(data)} secret cases -> {HERE / 'secrets.jsonl'}")


if __name__ == "__main__":
    main()
