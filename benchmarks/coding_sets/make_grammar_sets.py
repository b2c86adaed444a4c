"""Generate the option-grammar sets (``grammar_secrets.jsonl``, ``grammar_identities.jsonl``): a
second secret and identity set, written apart from ``make_secrets.py`` / ``make_identities.py``
and by another method.

``make_secrets.py`` lists secret shapes row by row, as seen in sessions. This generator starts
from the *documented grammars* instead: for each credential-taking command-line tool, the options
its manual says take a password, a token or a key, with every spelling its option parser accepts
(short option with the value attached or separated, long option with ``=`` or a blank,
user-and-password pairs such as ``user:pass`` / ``user%pass`` / ``user,pass``, a positional
password where the manual puts one), placed among the tool's other options in a random order;
for each config and credentials file format, the fields its documentation names as credentials;
and encodings (base64 of a credentials text, of a docker ``auth`` pair, of a DSN; a password
URL-encoded in a URL). Values are fake and seeded, in several shapes (words with digits and
punctuation, random runs, passphrases with blanks, provider-shaped tokens), quoted as a shell
user would quote them.

The identity set is the other side of the same grammars: the *same tools* with options that do
not take a credential (``psql -p 5432`` is a port, ``mysql -P 3306`` too, ``curl -u user``
prompts, ``openssl -passin env:VAR`` names a variable, ``htpasswd -c file user`` prompts,
``docker login --password-stdin``), references instead of values, and the identity tokens of
a project (paths, branches, test ids, hashes, digests, UUIDs, version strings) generated from
their documented formats (semver, PEP 440, Go pseudo-versions, Maven snapshots, OCI digests,
subresource integrity, git object names).

Each row's ``split`` (``dev``/``test``) is fixed by a hash of its id, half and half, and was
committed before any rule was written against the set.

    python benchmarks/coding_sets/make_grammar_sets.py   # rewrites both files
"""

# ruff: noqa: E501  (a data table: one grammar per line reads best)

from __future__ import annotations

import base64
import hashlib
import json
import random
import shlex
import string
import urllib.parse
import uuid
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
RNG = random.Random(46_005)
AN = string.ascii_letters + string.digits
SYMBOLS = "!#%&*+,-.:=?@^_~$"

HOSTS = ["db.internal", "10.0.4.21", "pg-primary.prod.svc", "mysql-01.dc2.example.net", "localhost",
         "cache.staging.local", "ldap.corp.example.com", "nas01", "registry.gitlab.example.org",
         "ghcr.io", "artifacts.acme.dev", "mongo-rs0.example.io", "192.168.56.10", "fileserver.corp"]
USERS = ["root", "admin", "deploy", "app_user", "ci-bot", "svc_reporting", "jenkins", "postgres",
         "sa", "readonly", "backup", "alice", "build", "uploader", "cn=admin,dc=example,dc=org"]
DBS = ["shop_production", "billing", "analytics_dw", "orders", "inventory_v2", "app_test", "crm"]


def split_of(key: str) -> str:
    """``dev`` or ``test``, half and half, fixed by a hash of ``key`` (salted apart from the
    first set's split)."""
    return "test" if hashlib.sha256(f"grammar:{key}".encode()).digest()[0] % 2 else "dev"


# -- values ----------------------------------------------------------------------------------
def run(n: int, alphabet: str = AN) -> str:
    return "".join(RNG.choice(alphabet) for _ in range(n))


def password() -> str:
    """A password of one of several shapes people and generators use."""
    shape = RNG.randrange(6)
    if shape == 0:  # word + digits + punctuation
        return RNG.choice(["Winter", "hunter", "Maple", "zebra", "Copper", "lotus", "Quartz", "pepper"]) \
            + RNG.choice("!#%&@$_*") + str(RNG.randrange(10, 99999)) + RNG.choice(["", "!", "Zz", "&x"])
    if shape == 1:  # random alphanumeric
        return run(RNG.randrange(12, 33))
    if shape == 2:  # random with symbols
        return run(RNG.randrange(14, 25), AN + SYMBOLS)
    if shape == 3:  # a short human password with a symbol in the middle
        return run(4, string.ascii_lowercase) + RNG.choice("&%#!@") + run(4, string.ascii_letters + string.digits)
    if shape == 4:  # digits and letters, lower case
        return run(RNG.randrange(10, 16), string.ascii_lowercase + string.digits)
    return "-".join(run(5, string.ascii_lowercase) for _ in range(4))  # generated, hyphenated


def token() -> str:
    """An opaque API token (no provider prefix)."""
    return run(RNG.choice([32, 40, 43, 64]), AN + "-_")


def passphrase() -> str:
    words = ["correct", "horse", "battery", "staple", "orbit", "velvet", "granite", "lantern"]
    return " ".join(RNG.sample(words, 4)) + str(RNG.randrange(10, 99))


def shq(value: str) -> str:
    """``value`` as a shell user writes it: bare when it holds nothing the shell reads,
    else single-quoted (double-quoted when it holds a single quote)."""
    if all(c in AN + "-_.,:+=@%/^~" for c in value):
        return value
    return shlex.quote(value)


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


# -- the credential grammars of command-line tools ------------------------------------------------
# Each grammar returns (text, secrets, keep). Options are placed in a random order among the
# tool's other (identity) options, as its parser allows.
Item = tuple[str, list[str], list[str]]


def shuffled(*parts: str) -> str:
    items = [p for p in parts if p]
    RNG.shuffle(items)
    return " ".join(items)


def g_mysql() -> Item:
    p, u, h, db = password(), RNG.choice(USERS[:8]), RNG.choice(HOSTS[:6]), RNG.choice(DBS)
    prog = RNG.choice(["mysql", "mysqldump", "mysqladmin", "mariadb", "mysqlimport", "mysqlcheck"])
    flag = RNG.choice([f"-p{shq(p)}", f"--password={shq(p)}"])  # mysql: -p only attached
    opts = shuffled(flag, RNG.choice([f"-u{u}", f"-u {u}", f"--user={u}"]),
                    RNG.choice([f"-h {h}", f"--host={h}", ""]), RNG.choice(["-P 3306", "--port=3307", ""]),
                    RNG.choice(["--single-transaction", "--default-character-set=utf8mb4", "-N", ""]))
    tail = {"mysqladmin": "status", "mysqlimport": f"{db} /tmp/{db}.csv"}.get(prog, db)
    return f"{prog} {opts} {tail}", [p], [db]


def g_psql() -> Item:
    p, u, h, db = password(), RNG.choice(USERS[:8]), RNG.choice(HOSTS[:6]), RNG.choice(DBS)
    form = RNG.randrange(4)
    if form == 0:
        return f"PGPASSWORD={shq(p)} psql -h {h} -p 5432 -U {u} -d {db} -c 'select 1'", [p], [db]
    if form == 1:
        q = urllib.parse.quote(p, safe="")
        return f'psql "postgresql://{u}:{q}@{h}:5432/{db}?sslmode=require"', [q], [db]
    if form == 2:
        return f"psql 'host={h} port=5432 dbname={db} user={u} password={p.replace(' ', '')}'", [p.replace(' ', '')], [db]
    q = urllib.parse.quote(p, safe="")
    return f"pg_dump --dbname=postgresql://{u}:{q}@{h}/{db} -Fc -f {db}.dump", [q], [f"{db}.dump"]


def g_sshpass() -> Item:
    p, u, h = password(), RNG.choice(USERS), RNG.choice(HOSTS)
    form = RNG.randrange(3)
    if form == 0:
        return f"sshpass -p {shq(p)} ssh -o StrictHostKeyChecking=no {u}@{h} uptime", [p], [h]
    if form == 1:
        return f"sshpass -p{shq(p)} scp -P 2222 build.tar.gz {u}@{h}:/srv/releases/", [p], ["build.tar.gz"]
    return f"SSHPASS={shq(p)} sshpass -e rsync -az dist/ {u}@{h}:/var/www/", [p], ["dist/"]


def g_curl() -> Item:
    p, u, h = password(), RNG.choice(USERS), RNG.choice(HOSTS)
    url = f"https://{h}/api/v1/items"
    form = RNG.randrange(6)
    if form == 0:
        return f"curl -sS {RNG.choice(['-u', '--user'])} {shq(u + ':' + p)} {url}", [p], [url]
    if form == 1:
        return f"curl -fsS -u{shq(u + ':' + p)} -X POST {url}", [p], [url]
    if form == 2:
        return f"curl --proxy http://proxy:3128 --proxy-user {shq(u + ':' + p)} {url}", [p], [url]
    if form == 3:
        t = token()
        return f"curl --oauth2-bearer {t} {url}", [t], [url]
    if form == 4:
        t = token()
        return f"curl -H 'X-Auth-Token: {t}' {url}", [t], [url]
    q = urllib.parse.quote(p, safe="")
    return f"curl -O ftp://{u}:{q}@{h}/pub/backup.tgz", [q], ["backup.tgz"]


def g_wget() -> Item:
    p, u, h = password(), RNG.choice(USERS), RNG.choice(HOSTS)
    opt = RNG.choice(["--password", "--http-password", "--ftp-password", "--proxy-password"])
    user_opt = {"--http-password": "--http-user", "--ftp-password": "--ftp-user",
                "--proxy-password": "--proxy-user"}.get(opt, "--user")
    return f"wget -q {shuffled(f'{user_opt}={u}', f'{opt}={shq(p)}')} https://{h}/dist/app.zip", [p], ["app.zip"]


def g_registry_login() -> Item:
    p, u = password(), RNG.choice(USERS)
    reg = RNG.choice(["registry.gitlab.example.org", "ghcr.io", "artifacts.acme.dev:5000", "quay.io"])
    prog = RNG.choice(["docker login", "podman login", "nerdctl login", "buildah login", "helm registry login", "skopeo login"])
    flag = RNG.choice([f"-p {shq(p)}", f"--password {shq(p)}", f"--password={shq(p)}", f"-p{shq(p)}"])
    return f"{prog} {shuffled(flag, RNG.choice([f'-u {u}', f'--username {u}', f'--username={u}']))} {reg}", [p], [reg]


def g_htpasswd() -> Item:
    p, u = password(), RNG.choice(USERS[:12])
    path = RNG.choice(["/etc/nginx/.htpasswd", "auth/htpasswd", ".htpasswd", "/etc/apache2/.htpasswd"])
    flags = RNG.choice([["-b"], ["-c", "-b"], ["-b", "-c"], ["-bc"], ["-cb"], ["-B", "-b"], ["-bB"],
                        ["-b", "-B", "-C", "12"], ["-cbB"], ["-b", "-m"], ["-c", "-B", "-b"]])
    if RNG.random() < 0.15:  # -n: print the line, no file
        return f"htpasswd -nb{RNG.choice(['', 'B'])} {u} {shq(p)}", [p], [u]
    return f"htpasswd {' '.join(flags)} {path} {u} {shq(p)}", [p], [path]


def g_openssl() -> Item:
    p = password()
    form = RNG.randrange(5)
    if form == 0:
        return f"openssl pkcs12 -export -in cert.pem -inkey key.pem -out bundle.p12 -passout pass:{shq(p)}", [p], ["bundle.p12"]
    if form == 1:
        return f"openssl rsa -in server.key -out server.nopass.key -passin pass:{shq(p)}", [p], ["server.key"]
    if form == 2:
        return f"openssl enc -aes-256-cbc -pbkdf2 -in backup.tar -out backup.tar.enc -k {shq(p)}", [p], ["backup.tar.enc"]
    if form == 3:
        return f"openssl enc -d -aes-256-cbc -pbkdf2 -in secrets.enc -pass pass:{shq(p)}", [p], ["secrets.enc"]
    return f"openssl req -new -key site.key -out site.csr -passin 'pass:{p}'", [p], ["site.csr"]


def g_git_credentials() -> Item:
    t, u = RNG.choice([token(), "ghp_" + run(36), "glpat-" + run(20, AN + "-_")]), RNG.choice(USERS[:8])
    host = RNG.choice(["github.com", "gitlab.example.org", "bitbucket.org", "git.acme.dev"])
    repo = f"{RNG.choice(['acme', 'octo-org', 'platform'])}/{RNG.choice(['api', 'web', 'infra'])}.git"
    form = RNG.randrange(4)
    if form == 0:
        return f"git clone https://{u}:{t}@{host}/{repo}", [t], [repo]
    if form == 1:
        return f"printf 'protocol=https\\nhost={host}\\nusername={u}\\npassword={t}\\n' | git credential approve", [t], [host]
    if form == 2:
        return f"git remote set-url origin https://oauth2:{t}@{host}/{repo}", [t], [repo]
    return f"git -c http.extraHeader='Authorization: Bearer {t}' fetch origin", [t], ["origin"]


def g_cloud() -> Item:
    form = RNG.randrange(7)
    s = run(40, AN + "+/")
    if form == 0:
        return f"aws configure set aws_secret_access_key {s} --profile {RNG.choice(['prod', 'ci', 'default'])}", [s], ["--profile"]
    if form == 1:
        tid = str(uuid.UUID(int=RNG.getrandbits(128)))
        sec = run(34, AN + "~._-")
        return f"az login --service-principal -u {tid} -p {shq(sec)} --tenant {str(uuid.UUID(int=RNG.getrandbits(128)))}", [sec], [tid]
    if form == 2:
        sec = run(34, AN + "~._-")
        return f"az login --service-principal --username http://acme-ci --password={shq(sec)} --tenant acme.onmicrosoft.com", [sec], ["http://acme-ci"]
    if form == 3:
        t = "ya29." + run(80, AN + "-_")
        return f"gcloud auth print-access-token\n{t}", [t], ["gcloud auth print-access-token"]
    if form == 4:
        t = token()
        return f"doctl auth init --access-token {t}", [t], ["doctl auth init"]
    if form == 5:
        p = password()
        return f"aws rds generate-db-auth-token --hostname db.internal --port 5432 --username iam_user\nexport PGPASSWORD={shq(p)}", [p], ["iam_user"]
    t = token()
    return f"heroku config:set API_TOKEN={t} --app acme-web", [t], ["acme-web"]


def g_kubectl() -> Item:
    form = RNG.randrange(6)
    t, p = token(), password()
    if form == 0:
        return f"kubectl config set-credentials ci-user --token={t}", [t], ["ci-user"]
    if form == 1:
        return f"kubectl config set-credentials admin --username=admin --password={shq(p)}", [p], ["--username=admin"]
    if form == 2:
        name = RNG.choice(["DB_PASSWORD", "password", "api-key", "STRIPE_KEY", "token"])
        return f"kubectl create secret generic app-env --from-literal={name}={shq(p)} -n prod", [p], ["app-env"]
    if form == 3:
        return f"kubectl create secret docker-registry regcred --docker-server=ghcr.io --docker-username=bot --docker-password={shq(p)}", [p], ["regcred"]
    if form == 4:
        return f"kubectl --token {t} get pods -n payments", [t], ["payments"]
    return f"helm upgrade --install api ./chart --set postgresql.auth.password={shq(p)} --set image.tag=1.4.2", [p], ["image.tag=1.4.2"]


def g_redis_mongo() -> Item:
    p, h, u = password(), RNG.choice(HOSTS[:6]), RNG.choice(USERS[:8])
    form = RNG.randrange(7)
    if form == 0:
        return f"redis-cli -h {h} -p 6379 -a {shq(p)} --no-auth-warning ping", [p], [h]
    if form == 1:
        return f"redis-cli --user {u} --pass {shq(p)} -n 2 keys 'session:*'", [p], ["session:*"]
    if form == 2:
        return f"REDISCLI_AUTH={shq(p)} redis-cli -h {h} info replication", [p], ["info replication"]
    if form == 3:
        q = urllib.parse.quote(p, safe="")
        return f"redis-cli -u redis://{u}:{q}@{h}:6380/0 dbsize", [q], ["dbsize"]
    if form == 4:
        return f"mongosh --host {h} {shuffled(f'-u {u}', RNG.choice([f'-p {shq(p)}', f'--password {shq(p)}', f'--password={shq(p)}']), '--authenticationDatabase admin')}", [p], ["admin"]
    if form == 5:
        return f"mongodump {shuffled(f'--username={u}', f'--password={shq(p)}', '--db=orders', '--gzip')} --out=/backups/orders", [p], ["/backups/orders"]
    q = urllib.parse.quote(p, safe="")
    return f'mongosh "mongodb+srv://{u}:{q}@cluster0.ab1cd.mongodb.net/orders?retryWrites=true"', [q], ["cluster0.ab1cd.mongodb.net"]


def g_ldap_smb() -> Item:
    p, u = password(), RNG.choice(USERS[:10])
    form = RNG.randrange(6)
    dn = "cn=admin,dc=example,dc=org"
    if form == 0:
        return f"ldapsearch -x -H ldap://ldap.corp.example.com -D '{dn}' -w {shq(p)} -b 'dc=example,dc=org' '(uid={u})'", [p], ["dc=example,dc=org"]
    if form == 1:
        return f"ldapmodify -x -D '{dn}' -w{shq(p)} -f change.ldif", [p], ["change.ldif"]
    if form == 2:
        return f"smbclient //fileserver.corp/share -U {shq(u + '%' + p)} -c 'ls'", [p], ["//fileserver.corp/share"]
    if form == 3:
        return f"smbclient -L nas01 --user={shq('CORP/' + u + '%' + p)}", [p], ["nas01"]
    if form == 4:
        return f"smbclient //nas01/backup --password={shq(p)} -U {u}", [p], ["//nas01/backup"]
    return f"mount -t cifs //nas01/media /mnt/media -o username={u},password={p.replace(',', '')},vers=3.0", [p.replace(',', '')], ["/mnt/media"]


def g_misc_cli() -> Item:
    p, u, h = password(), RNG.choice(USERS[:10]), RNG.choice(HOSTS)
    t = "pypi-" + run(60, AN + "-_")
    forms: list[Callable[[], Item]] = [
        lambda: (f"sqlcmd -S {h},1433 -U sa -P {shq(p)} -d {RNG.choice(DBS)} -Q 'SELECT 1'", [p], [h]),
        lambda: (f"lftp -u {shq(u + ',' + p)} sftp://{h} -e 'mirror -R dist /www; bye'", [p], [h]),
        lambda: (f"svn checkout https://svn.example.org/repos/app/trunk app --username {u} --password {shq(p)} --non-interactive", [p], ["app/trunk"]),
        lambda: (f"twine upload -u __token__ -p {t} dist/*", [t], ["dist/*"]),
        lambda: (f"7z a -p{shq(p)} -mhe=on backup.7z data/", [p], ["backup.7z"]),
        lambda: (f"zip -r -P {shq(p)} export.zip reports/", [p], ["export.zip"]),
        lambda: (f"unzip -P {shq(p)} export.zip -d out/", [p], ["export.zip"]),
        lambda: (f"gpg --batch --pinentry-mode loopback --passphrase {shq(p)} -d secrets.gpg", [p], ["secrets.gpg"]),
        lambda: (f"ssh-keygen -t ed25519 -N {shq(p)} -f ~/.ssh/deploy_key -C deploy@ci", [p], ["~/.ssh/deploy_key"]),
        lambda: (f"mosquitto_pub -h {h} -u {u} -P {shq(p)} -t sensors/temp -m 21.5", [p], ["sensors/temp"]),
        lambda: (f"cqlsh {h} 9042 -u {u} -p {shq(p)} -e 'DESCRIBE KEYSPACES'", [p], ["DESCRIBE KEYSPACES"]),
        lambda: (f"rabbitmqadmin -H {h} -u {u} -p {shq(p)} list queues", [p], ["list queues"]),
        lambda: (f"xfreerdp /v:{h} /u:{u} /p:{shq(p)} /cert:ignore", [p], [f"/v:{h}"]),
        lambda: (f"keytool -importkeystore -srckeystore old.jks -srcstorepass {shq(p)} -destkeystore new.p12 -deststoretype PKCS12 -deststorepass {shq(p)}", [p], ["new.p12"]),
        lambda: (f"vault login -method=userpass username={u} password={shq(p)}", [p], ["-method=userpass"]),
        lambda: (f"terraform apply -auto-approve -var 'db_password={p}' -var region=eu-west-1", [p], ["region=eu-west-1"]),
    ]
    return RNG.choice(forms)()


def g_env_flags() -> Item:
    p, t = password(), token()
    form = RNG.randrange(5)
    if form == 0:
        name = RNG.choice(["POSTGRES_PASSWORD", "MYSQL_ROOT_PASSWORD", "RABBITMQ_DEFAULT_PASS", "MINIO_ROOT_PASSWORD"])
        return f"docker run -d -e {name}={shq(p)} -p 5432:5432 --name db postgres:16.2", [p], ["postgres:16.2"]
    if form == 1:
        return f"docker build --build-arg NPM_TOKEN={t} -t acme/web:2.3.0 .", [t], ["acme/web:2.3.0"]
    if form == 2:
        return f"ansible-playbook site.yml -i inventory/prod --extra-vars 'ansible_become_password={p}'", [p], ["inventory/prod"]
    if form == 3:
        return f"npm config set //registry.npmjs.org/:_authToken {t}", [t], ["//registry.npmjs.org/"]
    return f"pip install --index-url https://{RNG.choice(USERS[:6])}:{urllib.parse.quote(p, safe='')}@pypi.acme.dev/simple/ acme-core==2.1.0", [urllib.parse.quote(p, safe="")], ["acme-core==2.1.0"]


# -- config and credentials files ---------------------------------------------------------------
def g_netrc() -> Item:
    p, u, h = password().replace(" ", ""), RNG.choice(USERS[:10]), RNG.choice(HOSTS)
    if RNG.random() < 0.5:
        return f"machine {h} login {u} password {p}", [p], [h]
    return f"machine {h}\n  login {u}\n  password {p}\nmachine api.heroku.com\n  login me@example.com\n  password {p}", [p], [h]


def g_pgpass() -> Item:
    p, u, h, db = password().replace(":", "").replace(" ", ""), RNG.choice(USERS[:8]), RNG.choice(HOSTS[:6]), RNG.choice(DBS)
    return f"{h}:{RNG.choice(['5432', '*', '6432'])}:{RNG.choice([db, '*'])}:{u}:{p}", [p], [h]


def g_npmrc_pypirc() -> Item:
    t, p, u = token(), password(), RNG.choice(USERS[:6])
    form = RNG.randrange(5)
    if form == 0:
        return f"registry=https://npm.acme.dev/\n//npm.acme.dev/:_authToken={t}\nalways-auth=true", [t], ["https://npm.acme.dev/"]
    if form == 1:
        a = b64(f"{u}:{p}")
        return f"_auth={a}\nemail=ci@acme.dev\nregistry=https://npm.acme.dev/", [a], ["email=ci@acme.dev"]
    if form == 2:
        a = b64(p)
        return f"//npm.acme.dev/:username={u}\n//npm.acme.dev/:_password={a}", [a], [f"//npm.acme.dev/:username={u}"]
    if form == 3:
        return f"[distutils]\nindex-servers = pypi private\n\n[private]\nrepository = https://pypi.acme.dev/\nusername = {u}\npassword = {p}", [p], ["https://pypi.acme.dev/"]
    t = "pypi-" + run(70, AN + "-_")
    return f"[pypi]\nusername: __token__\npassword: {t}", [t], ["[pypi]"]


def g_docker_config() -> Item:
    u, p = RNG.choice(USERS[:8]), password()
    reg = RNG.choice(["https://index.docker.io/v1/", "ghcr.io", "registry.gitlab.example.org"])
    a = b64(f"{u}:{p}")
    if RNG.random() < 0.5:
        return json.dumps({"auths": {reg: {"auth": a}}}, indent=2), [a], [reg]
    return json.dumps({"auths": {reg: {"auth": a, "email": "ci@acme.dev"}}, "credsStore": "desktop"}), [a], ["desktop"]


def g_kubeconfig() -> Item:
    t, p = token(), password()
    form = RNG.randrange(4)
    if form == 0:
        return f"users:\n- name: ci\n  user:\n    token: {t}", [t], ["name: ci"]
    if form == 1:
        return f"users:\n- name: admin\n  user:\n    username: admin\n    password: {p}", [p], ["username: admin"]
    if form == 2:
        k = b64("-----BEGIN EC PRIVATE KEY-----\n" + run(64, AN + "+/") + "\n-----END EC PRIVATE KEY-----\n")
        return f"users:\n- name: kind-dev\n  user:\n    client-certificate-data: {b64('CERT ' + run(30))}\n    client-key-data: {k}", [k], ["name: kind-dev"]
    idt = "eyJ" + run(30, AN + "-_") + ".eyJ" + run(60, AN + "-_") + "." + run(43, AN + "-_")
    rt = run(45, AN)
    return f"    auth-provider:\n      config:\n        id-token: {idt}\n        refresh-token: {rt}\n        client-id: kubernetes\n      name: oidc", [idt, rt], ["client-id: kubernetes"]


def g_dotenv() -> Item:
    name = RNG.choice(["DATABASE_PASSWORD", "DB_PASS", "SECRET_KEY", "JWT_SECRET", "API_TOKEN", "SMTP_PASSWORD",
                       "REDIS_PASSWORD", "APP_KEY", "SENTRY_AUTH_TOKEN", "OAUTH_CLIENT_SECRET", "ENCRYPTION_KEY",
                       "MAIL_PASSWORD", "AWS_SECRET_ACCESS_KEY", "SESSION_SECRET", "WEBHOOK_SIGNING_SECRET"])
    v = RNG.choice([password(), token(), "base64:" + b64(run(32))])
    quote = RNG.choice(["", '"', "'"])
    if "'" in v or '"' in v or " " in v:
        quote = '"' if '"' not in v else "'"
    prefix = RNG.choice(["", "export "])
    return f"APP_ENV=production\n{prefix}{name}={quote}{v}{quote}\nLOG_LEVEL=info", [v], ["APP_ENV=production"]


def g_ini_toml_yaml() -> Item:
    p, t = password(), token()
    form = RNG.randrange(8)
    if form == 0:
        return f"[client]\nuser = {RNG.choice(USERS[:6])}\npassword = {p}\nhost = db.internal", [p], ["host = db.internal"]
    if form == 1:
        s = run(40, AN + "+/")
        return f"[default]\naws_access_key_id = AKIA{run(16, string.ascii_uppercase + string.digits)}\naws_secret_access_key = {s}", [s], ["[default]"]
    if form == 2:
        return f'[tool.poetry.http-basic.private]\nusername = "ci"\npassword = "{p}"', [p], ["[tool.poetry.http-basic.private]"]
    if form == 3:
        return f'[database]\nurl = "postgres://app@db.internal/app"\npass = "{p}"', [p], ["postgres://app@db.internal/app"]
    if form == 4:
        return f"spring:\n  datasource:\n    url: jdbc:postgresql://db.internal:5432/app\n    username: app\n    password: {p}", [p], ["jdbc:postgresql://db.internal:5432/app"]
    if form == 5:
        return f"smtp:\n  host: smtp.mailgun.org\n  port: 587\n  user: postmaster@mg.acme.dev\n  pass: {p}", [p], ["smtp.mailgun.org"]
    if form == 6:
        return f'{{"database": {{"host": "db.internal", "user": "app", "passwd": "{p}"}}, "debug": false}}', [p], ['"host": "db.internal"']
    return f"github:\n  app_id: 123456\n  webhook_secret: {t}\n  private_key_path: /etc/app/github.pem", [t], ["/etc/app/github.pem"]


def g_dsn() -> Item:
    p, u, h, db = password().replace(";", "").replace(" ", ""), RNG.choice(USERS[:8]), RNG.choice(HOSTS[:6]), RNG.choice(DBS)
    q = urllib.parse.quote(p, safe="")
    form = RNG.randrange(8)
    if form == 0:
        return f"jdbc:postgresql://{h}:5432/{db}?user={u}&password={q}&ssl=true", [q], [db]
    if form == 1:
        return f"jdbc:sqlserver://{h}:1433;databaseName={db};user={u};password={p};encrypt=true", [p], [db]
    if form == 2:
        return f"Server={h};Database={db};User Id={u};Password={p};TrustServerCertificate=True", [p], [db]
    if form == 3:
        return f"DRIVER={{ODBC Driver 18 for SQL Server}};SERVER={h};DATABASE={db};UID={u};PWD={p}", [p], [db]
    if form == 4:
        return f"sqlplus {u}/{p.replace('/', '').replace('@', '')}@//{h}:1521/ORCLPDB1", [p.replace('/', '').replace('@', '')], ["ORCLPDB1"]
    if form == 5:
        return f"amqp://{u}:{q}@{h}:5672/%2F", [q], [h]
    if form == 6:
        return f"DATABASE_URL=mysql2://{u}:{q}@{h}/{db}?pool=5", [q], [db]
    return f"jdbc:mysql://{h}:3306/{db}?user={u}&password={q}&useSSL=false", [q], [db]


def g_encoded() -> Item:
    p, u, h = password(), RNG.choice(USERS[:8]), RNG.choice(HOSTS[:6])
    name = RNG.choice(["CONFIG_BLOB", "SETTINGS", "PAYLOAD", "BOOTSTRAP_DATA", "APP_CONFIG_B64", "INIT"])
    form = RNG.randrange(6)
    if form == 0:
        v = b64(json.dumps({"user": u, "password": p}))
        return f"{name}={v}", [v], [name]
    if form == 1:
        v = b64(f"postgresql://{u}:{urllib.parse.quote(p, safe='')}@{h}:5432/app")
        return f"  {RNG.choice(['DATABASE_URL', 'dsn', 'uri'])}: {v}", [v], []
    if form == 2:
        v = b64(p)
        return f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ndata:\n  {RNG.choice(['password', 'DB_PASSWORD', 'postgres-password'])}: {v}", [v], ["name: db"]
    if form == 3:
        v = b64(f"{u}:{p}")
        return f'"{RNG.choice(["credentials", "basicAuth", "auth"])}": "{v}"', [v], []
    if form == 4:
        v = b64(f"[default]\naws_access_key_id = AKIA{run(16, string.ascii_uppercase + string.digits)}\naws_secret_access_key = {run(40, AN + '+/')}\n")
        return f"echo {v} | base64 -d > ~/.aws/credentials", [v], ["~/.aws/credentials"]
    v = b64(f"machine {h} login {u} password {p}")
    return f"{name}: {v}", [v], [name]


GRAMMARS: list[tuple[str, str, Callable[[], Item], int]] = [
    ("shell", "mysql", g_mysql, 10), ("shell", "psql", g_psql, 8), ("shell", "sshpass", g_sshpass, 6),
    ("shell", "curl", g_curl, 10), ("shell", "wget", g_wget, 5), ("shell", "registry-login", g_registry_login, 10),
    ("shell", "htpasswd", g_htpasswd, 10), ("shell", "openssl", g_openssl, 8), ("shell", "git", g_git_credentials, 8),
    ("shell", "cloud", g_cloud, 10), ("shell", "kubectl", g_kubectl, 10), ("shell", "redis-mongo", g_redis_mongo, 12),
    ("shell", "ldap-smb", g_ldap_smb, 10), ("shell", "misc", g_misc_cli, 24), ("shell", "env-flags", g_env_flags, 8),
    ("config", "netrc", g_netrc, 5), ("config", "pgpass", g_pgpass, 5), ("config", "npmrc-pypirc", g_npmrc_pypirc, 8),
    ("config", "docker-config", g_docker_config, 5), ("config", "kubeconfig", g_kubeconfig, 6),
    ("config", "dotenv", g_dotenv, 8), ("config", "ini-toml-yaml", g_ini_toml_yaml, 12), ("config", "dsn", g_dsn, 12),
    ("encoded", "encoded", g_encoded, 12),
]


def secret_rows() -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    seen: set[str] = set()
    for where, family, grammar, count in GRAMMARS:
        made = 0
        while made < count:
            text, secrets, keep = grammar()
            if text in seen:
                continue
            seen.add(text)
            rid = f"gs{len(out):03d}"
            out.append({"id": rid, "where": where, "family": family, "text": text,
                        "secrets": secrets, "keep": [k for k in keep if k and k in text],
                        "split": split_of(rid)})
            made += 1
    return out


# -- identities ----------------------------------------------------------------------------------
def hexrun(n: int) -> str:
    return run(n, "0123456789abcdef")


def semver() -> str:
    v = f"{RNG.randrange(0, 30)}.{RNG.randrange(0, 40)}.{RNG.randrange(0, 200)}"
    pre = RNG.choice(["", "", f"-rc.{RNG.randrange(1, 9)}", f"-beta.{RNG.randrange(1, 20)}", "-alpha", "-SNAPSHOT",
                      f"-{RNG.randrange(1, 400)}-g{hexrun(7)}"])
    build = RNG.choice(["", "", f"+build.{RNG.randrange(1, 9999)}", f"+{hexrun(7)}", f"+sha.{hexrun(10)}"])
    return RNG.choice(["", "v"]) + v + pre + build


def pep440() -> str:
    return f"{RNG.randrange(0, 9)}.{RNG.randrange(0, 30)}" + RNG.choice(["", f".{RNG.randrange(0, 20)}"]) + RNG.choice(
        ["", f"a{RNG.randrange(1, 5)}", f"b{RNG.randrange(1, 5)}", f"rc{RNG.randrange(1, 3)}", f".post{RNG.randrange(1, 4)}",
         f".dev{RNG.randrange(1, 999)}", f"+local.{hexrun(7)}"])


def go_pseudo() -> str:
    return f"v0.0.0-{RNG.randrange(2019, 2027)}{RNG.randrange(1, 13):02d}{RNG.randrange(1, 29):02d}{RNG.randrange(0, 240000):06d}-{hexrun(12)}"


def digest() -> str:
    form = RNG.randrange(5)
    if form == 0:
        return "sha256:" + hexrun(64)
    if form == 1:
        return f"{RNG.choice(['ghcr.io/acme/api', 'docker.io/library/postgres', 'registry.k8s.io/pause', 'quay.io/prometheus/node-exporter'])}@sha256:{hexrun(64)}"
    if form == 2:
        return "sha512-" + base64.b64encode(RNG.randbytes(64)).decode()
    if form == 3:
        return "sha384-" + base64.b64encode(RNG.randbytes(48)).decode()
    return "sha1-" + base64.b64encode(RNG.randbytes(20)).decode()


CAMEL = ["Order", "Payment", "User", "Invoice", "Cart", "Session", "Token", "Password", "Secret", "Auth", "Key", "Credential",
         "Account", "Report", "Webhook", "Signing", "Login", "Api", "Oauth2", "Jwt", "Refresh", "Reset"]


def camel(n: int) -> str:
    return "".join(RNG.choice(CAMEL) for _ in range(n))


def snake(n: int) -> str:
    return "_".join(RNG.choice(CAMEL).lower() for _ in range(n))


def path_like() -> str:
    form = RNG.randrange(10)
    if form == 0:
        return f"src/main/java/com/{RNG.choice(['acme', 'initech'])}/{RNG.choice(['auth', 'billing', 'security'])}/{camel(2)}Service{RNG.choice(['', 'Impl', 'V2'])}.java"
    if form == 1:
        return f"app/{RNG.choice(['controllers', 'models', 'services'])}/{snake(2)}_{RNG.choice(['controller', 'service', 'job'])}.rb"
    if form == 2:
        return f"/Users/{RNG.choice(['jane', 'JSmith', 'kwame.mensah'])}/{RNG.choice(['code', 'Developer', 'src'])}/{camel(1)}{RNG.choice(['Api', 'Web', 'Svc'])}{RNG.randrange(2, 9)}/{RNG.choice(['.env.example', 'config/secrets.yml.example', 'docker-compose.yml'])}"
    if form == 3:
        return f"C:\\Users\\{RNG.choice(['JSmith', 'AhmedK', 'RBrown01'])}\\source\\repos\\{camel(2)}\\{camel(1)}.Tests\\{camel(2)}Tests.cs"
    if form == 4:
        return f"packages/{RNG.choice(['auth', 'web', 'core'])}/src/{RNG.choice(['hooks', 'utils', 'lib'])}/use{camel(2)}.{RNG.choice(['ts', 'tsx'])}"
    if form == 5:
        return f"internal/{snake(1)}/{snake(2)}_test.go"
    if form == 6:
        return f"/var/run/secrets/kubernetes.io/serviceaccount/{RNG.choice(['token', 'ca.crt', 'namespace'])}"
    if form == 7:
        return f"migrations/{RNG.randrange(2019, 2027)}{RNG.randrange(1, 13):02d}{RNG.randrange(1, 29):02d}{RNG.randrange(0, 999999):06d}_add_{snake(2)}.sql"
    if form == 8:
        return f"~/.config/{RNG.choice(['gcloud', 'gh', 'helm'])}/{RNG.choice(['credentials.db', 'hosts.yml', 'repositories.yaml', 'configurations/config_default'])}"
    return f"node_modules/.pnpm/@{RNG.choice(['aws-sdk', 'azure', 'babel'])}+{RNG.choice(['client-s3', 'identity', 'core'])}@{semver().lstrip('v')}/node_modules"


def branch() -> str:
    form = RNG.randrange(6)
    if form == 0:
        return f"{RNG.choice(['feature', 'bugfix', 'hotfix', 'chore'])}/{RNG.choice(['JIRA', 'PAY', 'SEC', 'AUTH'])}-{RNG.randrange(1, 9999)}-{RNG.choice(['rotate', 'fix', 'add', 'hash'])}-{RNG.choice(['password', 'token', 'api-key', 'secret'])}-{RNG.choice(['reset', 'storage', 'validation', 'expiry'])}"
    if form == 1:
        return f"dependabot/{RNG.choice(['npm_and_yarn', 'pip', 'maven', 'go_modules'])}/{RNG.choice(['jsonwebtoken', 'passlib', 'bcrypt', 'golang.org/x/crypto'])}-{semver().lstrip('v')}"
    if form == 2:
        return f"users/{RNG.choice(['jsmith', 'priya.raman', 'o.adeyemi'])}/{camel(3)}{RNG.randrange(1, 99)}"
    if form == 3:
        return f"renovate/{RNG.choice(['major', 'lock-file-maintenance', 'docker'])}-{RNG.choice(['auth0', 'keycloak', 'vault'])}-{RNG.randrange(1, 30)}.x"
    if form == 4:
        return f"release/{semver()}"
    return f"revert-{RNG.randrange(100, 9999)}-{snake(2).replace('_', '-')}"


def test_id() -> str:
    form = RNG.randrange(7)
    if form == 0:
        return f"tests/{snake(1)}/test_{snake(2)}.py::Test{camel(2)}::test_{snake(3)}[{RNG.choice(['sha256', 'bcrypt', 'argon2id', 'None-None', 'case7'])}]"
    if form == 1:
        return f"com.acme.{RNG.choice(['auth', 'security'])}.{camel(2)}Test#should{camel(3)}"
    if form == 2:
        return f"Test{camel(2)}/{RNG.choice(['rejects', 'accepts', 'rotates'])}_{snake(2)}_{RNG.randrange(1, 20)}"
    if form == 3:
        return f"{camel(2)}Tests.{camel(2)}Tests.Validate{camel(2)}_Returns{RNG.choice(['False', 'True', 'Unauthorized'])}"
    if form == 4:
        return f"./spec/{snake(2)}_spec.rb:{RNG.randrange(10, 400)}"
    if form == 5:
        return f"src/{RNG.choice(['auth', 'api'])}/__tests__/{camel(2)}.test.ts > {camel(1)} > {RNG.choice(['refreshes', 'hashes', 'rejects'])} {snake(2).replace('_', ' ')}"
    return f"test_{snake(2)} ({RNG.choice(['tests', 'app.tests'])}.test_{snake(1)}.{camel(2)}TestCase)"


def near_miss() -> str:
    """A credential-taking tool's options that take no credential, or a reference to one."""
    u, h, db = RNG.choice(USERS[:8]), RNG.choice(HOSTS[:8]), RNG.choice(DBS)
    forms = [
        lambda: f"psql -h {h} -p {RNG.choice(['5432', '6432'])} -U {u} -d {db} -c '\\dt'",
        lambda: f"mysql -u {u} -p -h {h} -P 3306 {db}",
        lambda: f"mysql --user={u} --password --port={RNG.choice(['3306', '3307'])} {db}",
        lambda: f"ssh -p {RNG.choice(['2222', '22022'])} -i ~/.ssh/id_ed25519 {u}@{h}",
        lambda: f"scp -P 2222 -r dist/ {u}@{h}:/srv/app/",
        lambda: f"redis-cli -h {h} -p {RNG.choice(['6379', '6380'])} -n 3 ping",
        lambda: f"curl -u {u} https://{h}/api/health",
        lambda: f"curl -H \"Authorization: Bearer $API_TOKEN\" https://{h}/api/v2/items",
        lambda: "curl -H 'Authorization: Bearer ${GITHUB_TOKEN}' https://api.github.com/repos/acme/api",
        lambda: f"htpasswd -c /etc/nginx/.htpasswd {u}",
        lambda: f"htpasswd -B -i auth/htpasswd {u} < /run/secrets/web_pass",
        lambda: "openssl rsa -in server.key -passin env:KEY_PASSPHRASE -out plain.key",
        lambda: "openssl pkcs12 -export -in c.pem -inkey k.pem -passout file:/run/secrets/p12pass -out c.p12",
        lambda: f"openssl req -x509 -newkey rsa:4096 -nodes -keyout key.pem -out cert.pem -days {RNG.randrange(30, 999)}",
        lambda: "echo \"$CI_REGISTRY_PASSWORD\" | docker login -u \"$CI_REGISTRY_USER\" --password-stdin $CI_REGISTRY",
        lambda: f"cat ~/.ghcr_token | podman login ghcr.io -u {u} --password-stdin",
        lambda: f"docker run -p 8080:80 -e POSTGRES_PASSWORD_FILE=/run/secrets/db -v pgdata:/var/lib/postgresql/data postgres:{RNG.randrange(12, 17)}",
        lambda: "docker run -e POSTGRES_PASSWORD=$POSTGRES_PASSWORD --name db postgres:16",
        lambda: "ldapsearch -x -D 'cn=reader,dc=example,dc=org' -W -b 'ou=people,dc=example,dc=org'",
        lambda: f"ldapsearch -x -D 'cn=reader,dc=example,dc=org' -y /etc/ldap.secret '(uid={u})'",
        lambda: f"sshpass -f ~/.ssh/{u}.pass ssh {u}@{h}",
        lambda: f"sshpass -e ssh {u}@{h} 'df -h'",
        lambda: "git log -p --since=2.weeks -- src/auth/password_reset.py",
        lambda: f"git commit -m 'rotate the {RNG.choice(['token', 'password', 'api key'])} cache after {RNG.randrange(2, 60)} minutes'",
        lambda: "pytest -p no:cacheprovider -k 'test_password_hash or test_token_expiry' tests/auth",
        lambda: f"kubectl create secret generic app-env --from-env-file=.env.production -n {RNG.choice(['prod', 'staging'])}",
        lambda: f"kubectl port-forward svc/{RNG.choice(['keycloak', 'vault', 'api'])} 8443:443 -n auth",
        lambda: "kubectl config set-credentials ci --token=$(cat /var/run/secrets/kubernetes.io/serviceaccount/token)",
        lambda: f"vault kv get -field=password secret/{RNG.choice(['db', 'apps/api', 'ci/registry'])}",
        lambda: f"aws secretsmanager get-secret-value --secret-id prod/{RNG.choice(['api', 'db'])}/credentials --query SecretString",
        lambda: f"aws configure set region {RNG.choice(['eu-west-1', 'us-east-2'])} --profile {RNG.choice(['prod', 'ci'])}",
        lambda: f"gcloud auth activate-service-account --key-file=/secrets/{RNG.choice(['ci', 'deploy'])}-sa.json",
        lambda: "az login --service-principal -u $AZURE_CLIENT_ID -p $AZURE_CLIENT_SECRET --tenant $AZURE_TENANT_ID",
        lambda: f"mongosh --host {h} -u {u} -p --authenticationDatabase admin",
        lambda: f"smbclient //nas01/share -U {u} -c 'ls'",
        lambda: "zip -r -e export.zip reports/",
        lambda: f"npm publish --access public --tag {RNG.choice(['next', 'beta', 'latest'])}",
        lambda: f"wget --user={u} --ask-password https://{h}/dist/app.zip",
        lambda: f"terraform apply -var-file=env/{RNG.choice(['prod', 'staging'])}.tfvars -var 'db_password=${{var.db_password}}'",
        lambda: f"helm upgrade --install api ./chart --set image.tag={semver().lstrip('v')} --set auth.existingSecret=api-auth",
        lambda: f"PGPASSWORD=$DB_PASSWORD psql -h {h} -U {u} {db}",
        lambda: "export DB_PASSWORD=\"$(vault kv get -field=password secret/db)\"",
        lambda: "TOKEN=$(gh auth token) && curl -H \"Authorization: token $TOKEN\" https://api.github.com/user",
        lambda: "password_reset_path: /users/password/edit",
        lambda: f"token_url = \"https://auth.{RNG.choice(['acme.dev', 'example.com'])}/oauth2/token\"",
        lambda: f"auth_method: {RNG.choice(['password', 'token', 'oidc'])}",
        lambda: "api_key_header: X-Api-Key",
        lambda: f"secret_name: {RNG.choice(['db-credentials', 'api-keys', 'registry-pull'])}",
        lambda: f"passwordPolicy:\n  minLength: {RNG.randrange(8, 20)}\n  requireSymbols: true",
        lambda: "DB_PASSWORD=${DB_PASSWORD:?set it}",
        lambda: f"machine {h} login {u}",
        lambda: f"{h}:5432:{db}:{u}:*",
        lambda: f"jdbc:postgresql://{h}:5432/{db}?sslmode=require&ApplicationName={RNG.choice(['billing-job', 'api'])}",
        lambda: f"postgresql://{u}@{h}:5432/{db}",
        lambda: f"Server={h};Database={db};Trusted_Connection=True;Encrypt=True",
        lambda: f"echo {b64(RNG.choice(['hello world', 'release notes for 2.3', 'user=alice role=admin', 'staging rollout done']))} | base64 -d",
    ]
    return RNG.choice(forms)()


def identity_rows() -> list[dict[str, object]]:
    makers: list[tuple[str, Callable[[], str], int]] = [
        ("path", path_like, 260), ("branch", branch, 130), ("test", test_id, 170),
        ("hash", lambda: RNG.choice([hexrun(40), hexrun(7), hexrun(12), f"commit {hexrun(40)}",
                                      f"https://github.com/acme/api/commit/{hexrun(40)}", f"{hexrun(7)}..{hexrun(7)}"]), 80),
        ("digest", digest, 90),
        ("uuid", lambda: RNG.choice([str(uuid.UUID(int=RNG.getrandbits(128))),
                                      f"/api/v1/orders/{uuid.UUID(int=RNG.getrandbits(128))}",
                                      f"request_id={uuid.UUID(int=RNG.getrandbits(128))}",
                                      str(uuid.UUID(int=RNG.getrandbits(128))).upper()]), 70),
        ("version", lambda: RNG.choice([semver(), pep440(), go_pseudo(), f"{RNG.choice(['node', 'python', 'golang', 'eclipse-temurin'])}:{RNG.randrange(8, 23)}.{RNG.randrange(0, 12)}-{RNG.choice(['alpine3.19', 'slim-bookworm', 'jdk-jammy'])}",
                                        f"{RNG.choice(['org.springframework.security', 'io.jsonwebtoken'])}:{RNG.choice(['spring-security-crypto', 'jjwt-api'])}:{semver().lstrip('v')}"]), 120),
        ("near-miss", near_miss, 260),
    ]
    out: list[dict[str, object]] = []
    seen: set[str] = set()
    for kind, make, count in makers:
        made = 0
        while made < count:
            text = make()
            if text in seen:
                continue
            seen.add(text)
            rid = f"gi{len(out):04d}"
            out.append({"id": rid, "kind": kind, "text": text, "split": split_of(rid)})
            made += 1
    return out


def main() -> None:
    for name, data in (("grammar_secrets.jsonl", secret_rows()), ("grammar_identities.jsonl", identity_rows())):
        (HERE / name).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in data), encoding="utf-8")
        print(f"{name}: {len(data)} rows")


if __name__ == "__main__":
    main()
