"""Generate the system sets (``system_secrets.jsonl``, ``system_identities.jsonl``): a fifth secret
and identity set, written apart from the first four and from the redactor (the redactor's code
and documents were not read, imported or run while writing it), and split and committed before
any evaluation was run on it.

The first four sets follow secret shapes seen in sessions (``make_secrets.py``), the option
grammars of credential-taking tools (``make_grammar_sets.py``), the documented formats of an
application's own config, connection strings, HTTP and vendor tokens (``make_source_sets.py``)
and the places a session reaches outside the application (CI/CD, signing, IDE files, platforms,
secret stores, OAuth, ``make_field_sets.py``). This one starts from *system places*: source code,
version-control output, logs, process and operating-system output, infrastructure state and
manifests, network and VPN configuration, and protocol transcripts, each written from the
place's documented format:

* source code: secrets hard-coded in Python, Java, Kotlin, C#, Go, Rust, Swift, PHP
  (``wp-config.php`` ``define('DB_PASSWORD', ...)`` and its salts, PDO, PHPMailer), Ruby,
  JavaScript/TypeScript (Angular ``environment.prod.ts``, ``jwt.sign``, pg ``Pool``), C/C++
  (Arduino/ESP32 ``#define WIFI_PASSWORD``, ``mysql_real_connect``, libcurl
  ``CURLOPT_USERPWD``): string literals, constants, struct and object literals, client
  constructors; test fixtures (VCR/pytest-recording cassettes, ``conftest.py``, Jest setup,
  Spring ``@TestPropertySource``, Django fixtures, Go tests); Jupyter notebook JSON
  (``source`` and ``outputs`` cells, ``%env``);
* git output: ``git diff``, ``git show`` and ``git log -p`` hunks that add or remove a secret
  line, merge-conflict blocks, ``git stash show -p``;
* logs: JSON logs (pino, structlog, zap, ECS, Cloud Logging), logfmt, combined-format access
  logs and ALB logs with tokens in the query string, Python ``logging`` of request headers and
  ``http.client`` ``send:`` lines, Java stack traces whose message carries a JDBC URL, Android logcat with
  OkHttp's ``HttpLoggingInterceptor``;
* process and system output: ``ps aux``, ``/proc/<pid>/cmdline``, ``pgrep -a``; ``docker
  inspect`` ``Env`` arrays and ``kubectl describe pod`` environments; systemd ``Environment=``
  and ``systemctl show``, ``/etc/cron.d`` lines; Windows: PowerShell ``ConvertTo-SecureString
  -AsPlainText``, ``net use \\\\server /user:x pass``, ``cmdkey /pass:``, ``setx``, ``schtasks
  /rp``, ``sc.exe config ... password=``, ``reg add`` and registry exports (Winlogon
  ``DefaultPassword``);
* infrastructure state and manifests: ``terraform.tfstate`` (sensitive attributes of
  ``aws_db_instance``, ``random_password``, ``aws_iam_access_key``), ``terraform output
  -json``, ``azurerm_storage_account`` access keys, Ansible inventories (``ansible_password``,
  ``ansible_become_pass``), Puppet hiera and Salt pillar, Nomad and Consul ACL tokens and gossip
  keys, Vault ``operator init`` unseal keys and root token, ``kubeadm join --token`` and
  ``--certificate-key``, ``docker swarm join --token``, k3s tokens;
* network and VPN config: WireGuard ``PrivateKey``/``PresharedKey``, OpenVPN static keys and
  ``auth-user-pass`` files, strongSwan ``ipsec.secrets``/``swanctl.conf`` PSKs,
  wpa_supplicant ``psk=``, ``wpa_passphrase``, NetworkManager ``.nmconnection`` and ``nmcli``,
  hostapd, Cisco IOS ``username ... password 0|7``, ``enable password``, ``crypto isakmp key``,
  ``key 7`` (type 7 is a reversible encoding, so a secret), SNMP community strings
  (``snmpd.conf``, ``snmpwalk -c``) and v3 ``createUser``, RADIUS shared secrets
  (FreeRADIUS ``clients.conf``, ``radtest``), nginx ``proxy_set_header Authorization``,
  HAProxy ``stats auth`` and ``insecure-password``, Apache ``RequestHeader``, squid
  ``cache_peer login=``;
* protocol transcripts: HAR files (request headers, cookies, ``postData``), browser "copy as
  fetch / cURL / PowerShell", SMTP sessions (``AUTH PLAIN`` and ``AUTH LOGIN`` base64, swaks),
  IMAP ``LOGIN``, FTP ``PASS`` (``curl -v``), Redis config and ACL lines, MQTT ``CONNECT``
  as ``tshark -V`` decodes it and client code.

The identity set is the other side of the same places, what must pass unchanged: WireGuard
public keys and ``wg show`` (``private key: (hidden)``), kubeadm
``--discovery-token-ca-cert-hash sha256:...``, swarm node ids, git object names and ``index
3f2a1b4..9c8d7e0 100644`` lines, diffs that move a secret to a reference, SSH host key
fingerprints and ``known_hosts`` lines, certificate serials and SHA-256 fingerprints, package
checksums, Terraform state lineage and resource ids, AWS ARNs and ids (``i-0...``, ``sg-...``,
``vpc-...``), Azure resource ids, GCP project numbers, container ids, pod names with random
suffixes, PIDs and ``ps`` lines without a credential, request/trace/span and correlation ids
in logs, MAC and IPv6 addresses, base64 of content that is not secret, environment variable
names without values, ``Environment=`` lines with harmless values, references
(``${{ secrets.X }}``, ``$(cat /run/secrets/db)``, bank-vaults ``vault:``, vals
``ref+awssecrets://``, berglas ``sm://``, Key Vault references, ``EnvironmentFile=``,
``LoadCredential=``), documentation placeholders (``<your-token>``,
``put your unique phrase here``), masked output (``****``, ``(redacted)``, ``PASS
<password>``), source code that reads its secrets from the environment, network config
without a secret, protocol transcripts without a credential (``334 VXNlcm5hbWU6`` is base64 of
``Username:``), Windows commands that prompt, infrastructure files without a secret (hiera-eyaml
``ENC[PKCS7,...]`` ciphertext, tfstate ``sensitive_attributes`` paths).

Labelling decisions (each from the format's documentation):

* In ``AUTH LOGIN`` only the password line is labelled; the base64 user name is left in
  neither list. ``AUTH PLAIN``'s one base64 blob holds the password, so the blob is the secret.
* Consul and Nomad ``AccessorID`` values are identities (their documentation uses the accessor
  to refer to a token without revealing it); ``SecretID`` values are secrets. An AWS access key id (``AKIA...``) next to
  its secret is left unlabelled, as in the third and fourth sets.
* A Cisco type 7 string is a secret (reversible); type 5/8/9 hashes and other password hashes
  are left out of both sets, as are bcrypt results in tfstate.
* ``kubeadm``'s ``--discovery-token-ca-cert-hash`` is a hash of the public CA key (identity);
  its ``--token`` and ``--certificate-key`` are secrets.
* An OpenVPN static key's 16 hex lines are one secret (the block's body).
* Placeholders of documentation (``<your-token>``, ``YOUR_API_KEY_HERE``, ``REPLACE_ME``,
  wp-config-sample's ``put your unique phrase here`` and ``password_here``) are identities; a
  weak default that might be real (``changeme``, ``hunter2``) is left out of both sets.
* Ciphertext (hiera-eyaml ``ENC[PKCS7,...]``, Ansible Vault) and masked output are identities;
  a CSRF cookie beside a session cookie is labelled neither way (as in the fourth set).

Every secret row lists each exact substring that must disappear (``secrets``) and context that
must stay (``keep``). Values are fake and drawn from a seeded generator, in each format's
documented alphabet and length.

Split: half and half *within each family* (``make_source_sets.family_split``), fixed in the
files. The split was committed with the set, before any evaluation was run on it.

    python benchmarks/coding_sets/make_system_sets.py   # rewrites both files
"""

# ruff: noqa: E501  (a data table: one format per line reads best)

from __future__ import annotations

import base64
import hashlib
import json
import random
import string
import struct
import uuid
from collections.abc import Callable
from pathlib import Path

# The third set's split rule, shared (the script's folder is on the path when it runs).
from make_source_sets import family_split, identity_rows_of, write_sets

HERE = Path(__file__).resolve().parent
RNG = random.Random(49_019)
AN = string.ascii_letters + string.digits
LOW = string.ascii_lowercase + string.digits
UP = string.ascii_uppercase + string.digits
HEX = "0123456789abcdef"
B64 = AN + "+/"
B64URL = AN + "-_"

ORGS = ["northwind", "contoso", "fabrikam", "tailspin", "wingtip", "adatum"]
PROJECTS = ["orders-api", "billing-worker", "edge-proxy", "telemetry", "inventory", "portal",
            "sensor-hub", "mailer", "search-indexer", "vpn-gateway"]
USERS = ["svc_app", "deploy", "ops", "maria", "backup", "netadmin", "etl_rw", "monitor"]
HOSTS = ["db01.corp.internal", "10.40.2.17", "pg.prod.svc.cluster.local", "mysql-primary.data",
         "192.168.10.5", "sql02.contoso.local", "cache.internal", "172.20.4.31"]
SSIDS = ["Northwind-Office", "HomeNet5G", "Lab_IoT", "WH-Scanners", "guest-2ghz"]
NAMES = ["DB_PASSWORD", "API_TOKEN", "REDIS_PASSWORD", "SMTP_PASSWORD", "JWT_SECRET",
         "MQTT_PASSWORD", "SNMP_COMMUNITY", "WG_PRIVATE_KEY", "ADMIN_PASSWORD", "LDAP_BIND_PW"]


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
    """A password as people and generators make them, with punctuation that needs no quoting in
    a shell word, a source string literal, JSON, YAML, INI or XML (``-_.@%+=~^!``)."""
    shape = RNG.randrange(5)
    if shape == 0:
        return RNG.choice(["Lantern", "osprey", "Granite", "juniper", "Monsoon", "cobble", "Vesper", "tundra"]) + RNG.choice("@%+=_-.!") + digits(RNG.randrange(2, 5)) + RNG.choice(["", "k", "Q", "^"])
    if shape == 1:
        return run(RNG.randrange(14, 28))
    if shape == 2:
        return run(RNG.randrange(16, 26), AN + "-_.@%+=~^!")
    if shape == 3:
        return "-".join(run(RNG.randrange(4, 8), string.ascii_lowercase) for _ in range(RNG.choice([3, 4])))
    return run(RNG.choice([24, 32]), B64URL)


def alnum_password() -> str:
    """A generated password that needs no escaping anywhere (URLs, logfmt, query strings)."""
    return run(RNG.randrange(16, 33))


def api_key() -> str:
    """An opaque API key or bearer token in one of the common generated shapes."""
    shape = RNG.randrange(4)
    if shape == 0:
        return hexrun(RNG.choice([32, 40, 64]))
    if shape == 1:
        return run(RNG.choice([32, 40, 48]), B64URL)
    if shape == 2:
        return run(RNG.choice([24, 32]), AN)
    return b64bytes(RNG.choice([24, 33]))


def jwt() -> str:
    def enc(obj: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj, separators=(",", ":")).encode()).decode().rstrip("=")
    iat = 1_801_000_000 + RNG.randrange(10**6)
    body = {"sub": digits(7), "iss": f"https://auth.{RNG.choice(ORGS)}.com", "iat": iat, "exp": iat + RNG.choice([900, 3600, 86400])}
    return f"{enc({'alg': RNG.choice(['RS256', 'HS256']), 'typ': 'JWT'})}.{enc(body)}.{run(RNG.choice([43, 342]), B64URL)}"


def wg_key() -> str:
    """A WireGuard key: base64 of 32 bytes (a private key clamped as ``wg genkey`` does)."""
    raw = bytearray(RNG.randbytes(32))
    raw[0] &= 248
    raw[31] = (raw[31] & 127) | 64
    return b64(bytes(raw))


CISCO_XLAT = "dsfd;kfoA,.iyewrkldJKDHSUBsgvca69834ncxv9873254k;fg87"


def cisco7(plain: str) -> str:
    """Cisco IOS type 7 encoding (the documented reversible Vigenere with a fixed key)."""
    seed = RNG.randrange(0, 16)
    return f"{seed:02d}" + "".join(f"{ord(c) ^ ord(CISCO_XLAT[(seed + i) % len(CISCO_XLAT)]):02X}" for i, c in enumerate(plain))


def ssh_pub(kind: str = "ssh-ed25519") -> str:
    """The base64 blob of an OpenSSH public key (RFC 4253 string framing)."""
    def s(b: bytes) -> bytes:
        return struct.pack(">I", len(b)) + b
    if kind == "ssh-ed25519":
        blob = s(b"ssh-ed25519") + s(RNG.randbytes(32))
    elif kind == "ecdsa-sha2-nistp256":
        blob = s(b"ecdsa-sha2-nistp256") + s(b"nistp256") + s(b"\x04" + RNG.randbytes(64))
    else:
        blob = s(b"ssh-rsa") + s(b"\x01\x00\x01") + s(b"\x00" + RNG.randbytes(256))
    return b64(blob)


def ssh_fp() -> str:
    return "SHA256:" + b64(RNG.randbytes(32)).rstrip("=")


def colon_hex(n: int) -> str:
    return ":".join(f"{b:02X}" for b in RNG.randbytes(n))


def mac() -> str:
    return ":".join(f"{b:02x}" for b in RNG.randbytes(6))


def ipv6() -> str:
    return f"2001:db8:{RNG.randrange(1, 0xffff):x}:{RNG.randrange(0, 0xffff):x}::{RNG.randrange(1, 0xffff):x}"


def ip() -> str:
    return f"10.{RNG.randrange(0, 255)}.{RNG.randrange(0, 255)}.{RNG.randrange(1, 254)}"


def ts() -> str:
    return f"2027-02-{RNG.randrange(1, 28):02d}T{RNG.randrange(24):02d}:{RNG.randrange(60):02d}:{RNG.randrange(60):02d}.{RNG.randrange(1000):03d}Z"


def clf_time() -> str:
    return f"{RNG.randrange(1, 28):02d}/Feb/2027:{RNG.randrange(24):02d}:{RNG.randrange(60):02d}:{RNG.randrange(60):02d} +0000"


def short_sha() -> str:
    return hexrun(7)


def sha1() -> str:
    return hexrun(40)


def pod_suffix() -> str:
    # Kubernetes' rand.String alphabet ("bcdfghjklmnpqrstvwxz2456789"): no vowels, no 0/1/3.
    alpha = "bcdfghjklmnpqrstvwxz2456789"
    return f"{run(RNG.choice([9, 10]), alpha)}-{run(5, alpha)}"


def sha256_of(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


Item = tuple[str, list[str], list[str]]
Form = Callable[[], Item]


def pick(i: int, forms: list[Form]) -> Item:
    """The family's ``i``-th form, in turn, so that every form appears."""
    return forms[i % len(forms)]()


# -- source code ---------------------------------------------------------------------------------
def s_python(i: int) -> Item:
    p, k, h = password(), api_key(), RNG.choice(HOSTS)
    return pick(i, [
        lambda: (f'# settings/local.py\nDEBUG = True\nSECRET_TOKEN = "{k}"\nALLOWED_HOSTS = ["localhost"]', [k], ["DEBUG = True", 'ALLOWED_HOSTS = ["localhost"]']),
        lambda: (f'conn = psycopg2.connect(host="{h}", dbname="orders", user="svc_app", password="{p}")', [p], [f'host="{h}"', 'dbname="orders"']),
        lambda: (f'@dataclass\nclass SmtpConfig:\n    host: str = "smtp.{RNG.choice(ORGS)}.com"\n    port: int = 587\n    username: str = "mailer"\n    password: str = "{p}"', [p], ["port: int = 587", "class SmtpConfig:"]),
        lambda: (f'resp = requests.get(\n    "https://api.{RNG.choice(ORGS)}.com/v2/shipments",\n    headers={{"X-Api-Key": "{k}"}},\n    timeout=10,\n)', [k], ["timeout=10,", "/v2/shipments"]),
        lambda: (f'client = paramiko.SSHClient()\nclient.set_missing_host_key_policy(paramiko.AutoAddPolicy())\nclient.connect("{h}", username="deploy", password="{p}")', [p], ["paramiko.AutoAddPolicy()", 'username="deploy"']),
        lambda: (f'r = redis.Redis(host="cache.internal", port=6379, db=0, password="{p}", ssl=True)', [p], ['host="cache.internal"', "ssl=True"]),
        lambda: (f'ldap_conn.simple_bind_s("cn=reader,dc={RNG.choice(ORGS)},dc=com", "{p}")', [p], ["ldap_conn.simple_bind_s"]),
    ])


def s_jvm(i: int) -> Item:
    p, k, h = password(), api_key(), RNG.choice(HOSTS)
    return pick(i, [
        lambda: (f'public final class DbConfig {{\n    private static final String URL = "jdbc:postgresql://{h}:5432/orders";\n    private static final String USER = "svc_app";\n    private static final String PASSWORD = "{p}";\n}}', [p], ['private static final String USER = "svc_app";', "jdbc:postgresql://"]),
        lambda: (f'Connection conn = DriverManager.getConnection(\n        "jdbc:mysql://{h}:3306/inventory", "etl_rw", "{p}");', [p], ["DriverManager.getConnection(", '"etl_rw"']),
        lambda: (f'object ApiConfig {{\n    const val BASE_URL = "https://api.{RNG.choice(ORGS)}.com/"\n    const val API_KEY = "{k}"\n}}', [k], ["object ApiConfig {", "const val BASE_URL"]),
        lambda: (f'val client = OkHttpClient.Builder()\n    .addInterceptor {{ chain ->\n        chain.proceed(chain.request().newBuilder()\n            .header("Authorization", "Bearer {k}")\n            .build())\n    }}\n    .build()', [k], ["OkHttpClient.Builder()", ".header(\"Authorization\""]),
        lambda: (f'Properties props = new Properties();\nprops.put("mail.smtp.auth", "true");\nSession session = Session.getInstance(props, new Authenticator() {{\n    protected PasswordAuthentication getPasswordAuthentication() {{\n        return new PasswordAuthentication("alerts@{RNG.choice(ORGS)}.com", "{p}");\n    }}\n}});', [p], ['props.put("mail.smtp.auth", "true");', "getPasswordAuthentication()"]),
        lambda: (f'HikariConfig cfg = new HikariConfig();\ncfg.setJdbcUrl("jdbc:sqlserver://{h};databaseName=billing");\ncfg.setUsername("billing");\ncfg.setPassword("{p}");', [p], ['cfg.setUsername("billing");', "databaseName=billing"]),
    ])


def s_dotnet(i: int) -> Item:
    p, k, h = password(), api_key(), RNG.choice(HOSTS)
    return pick(i, [
        lambda: (f'internal static class Secrets\n{{\n    public const string ApiKey = "{k}";\n    public const int TimeoutSeconds = 30;\n}}', [k], ["public const int TimeoutSeconds = 30;", "internal static class Secrets"]),
        lambda: (f'var smtp = new SmtpClient("smtp.office365.com", 587)\n{{\n    EnableSsl = true,\n    Credentials = new NetworkCredential("noreply@{RNG.choice(ORGS)}.com", "{p}")\n}};', [p], ["EnableSsl = true,", 'new SmtpClient("smtp.office365.com", 587)']),
        lambda: (f'using var conn = new SqlConnection(\n    "Server={h};Database=Billing;User Id=billing_app;Password={p};TrustServerCertificate=True");', [p], ["Database=Billing", "TrustServerCertificate=True"]),
        lambda: (f'_http.DefaultRequestHeaders.Authorization =\n    new AuthenticationHeaderValue("Bearer", "{k}");', [k], ["new AuthenticationHeaderValue(\"Bearer\""]),
        lambda: (f'var factory = new ConnectionFactory\n{{\n    HostName = "rabbit.internal",\n    UserName = "orders",\n    Password = "{p}",\n    VirtualHost = "/prod"\n}};', [p], ['HostName = "rabbit.internal",', 'VirtualHost = "/prod"']),
    ])


def s_go(i: int) -> Item:
    p, k, h = password(), api_key(), RNG.choice(HOSTS)
    return pick(i, [
        lambda: (f'const apiToken = "{k}"\n\nfunc newClient() *Client {{\n\treturn &Client{{BaseURL: "https://api.{RNG.choice(ORGS)}.com", Token: apiToken}}\n}}', [k], ["func newClient() *Client {", "Token: apiToken"]),
        lambda: (f'db, err := sql.Open("mysql", "svc_app:{p}@tcp({h}:3306)/orders?parseTime=true")\nif err != nil {{\n\tlog.Fatal(err)\n}}', [p], ["sql.Open(\"mysql\"", "parseTime=true"]),
        lambda: (f'var cfg = Config{{\n\tHost:     "{h}",\n\tPort:     5432,\n\tUser:     "etl_rw",\n\tPassword: "{p}",\n\tSSLMode:  "require",\n}}', [p], ['SSLMode:  "require",', "Port:     5432,"]),
        lambda: (f'req, _ := http.NewRequest(http.MethodGet, url, nil)\nreq.SetBasicAuth("admin", "{p}")\nresp, err := http.DefaultClient.Do(req)', [p], ['req.SetBasicAuth("admin"', "http.DefaultClient.Do(req)"]),
        lambda: (f'rdb := redis.NewClient(&redis.Options{{\n\tAddr:     "cache.internal:6379",\n\tPassword: "{p}",\n\tDB:       0,\n}})', [p], ['Addr:     "cache.internal:6379",']),
    ])


def s_rust(i: int) -> Item:
    p, k, h = password(), api_key(), RNG.choice(HOSTS)
    return pick(i, [
        lambda: (f'const API_KEY: &str = "{k}";\nconst USER_AGENT: &str = "sensor-hub/0.4";', [k], ['const USER_AGENT: &str = "sensor-hub/0.4";']),
        lambda: (f'let resp = reqwest::Client::new()\n    .get("https://registry.{RNG.choice(ORGS)}.com/v2/_catalog")\n    .basic_auth("robot", Some("{p}"))\n    .send()\n    .await?;', [p], ['.basic_auth("robot"', ".send()"]),
        lambda: (f'let (client, connection) = tokio_postgres::connect(\n    "host={h} user=svc_app password={(q := alnum_password())} dbname=orders",\n    NoTls,\n).await?;', [q], ["tokio_postgres::connect(", "dbname=orders", "NoTls,"]),
        lambda: (f'let settings = Settings {{\n    mqtt_host: "broker.internal".into(),\n    mqtt_user: "sensor".into(),\n    mqtt_pass: "{p}".into(),\n}};', [p], ['mqtt_host: "broker.internal".into(),']),
    ])


def s_swift(i: int) -> Item:
    p, k = password(), api_key()
    return pick(i, [
        lambda: (f'enum Keys {{\n    static let weatherAPIKey = "{k}"\n    static let baseURL = URL(string: "https://api.{RNG.choice(ORGS)}.com")!\n}}', [k], ["enum Keys {", "static let baseURL"]),
        lambda: (f'var request = URLRequest(url: url)\nrequest.setValue("Bearer {k}", forHTTPHeaderField: "Authorization")', [k], ['forHTTPHeaderField: "Authorization"', "var request = URLRequest(url: url)"]),
        lambda: (f'let credential = URLCredential(user: "kiosk", password: "{p}", persistence: .forSession)', [p], ['user: "kiosk"', "persistence: .forSession"]),
        lambda: (f'let config = MQTTConfig(host: "broker.internal", port: 8883, username: "ios-app", password: "{p}")', [p], ['host: "broker.internal", port: 8883']),
    ])


WP_SALT = string.ascii_letters + string.digits + "!@#$%^&*()-_[]{}<>~`+=,.;:/?|"


def s_php(i: int) -> Item:
    p, k, h = password(), api_key(), RNG.choice(HOSTS)
    salt1, salt2 = run(64, WP_SALT), run(64, WP_SALT)
    return pick(i, [
        lambda: (f"/** The name of the database for WordPress */\ndefine( 'DB_NAME', 'wp_shop' );\n\n/** Database username */\ndefine( 'DB_USER', 'wp_shop' );\n\n/** Database password */\ndefine( 'DB_PASSWORD', '{p}' );\n\ndefine( 'DB_HOST', 'localhost' );", [p], ["define( 'DB_NAME', 'wp_shop' );", "define( 'DB_HOST', 'localhost' );"]),
        lambda: (f"define('DB_PASSWORD', '{p}');", [p], ["define('DB_PASSWORD', '"]),
        lambda: (f"define( 'AUTH_KEY',         '{salt1}' );\ndefine( 'SECURE_AUTH_KEY',  '{salt2}' );", [salt1, salt2], ["define( 'AUTH_KEY',", "define( 'SECURE_AUTH_KEY',"]),
        lambda: (f"$pdo = new PDO('mysql:host={h};dbname=shop;charset=utf8mb4', 'shop_app', '{p}');", [p], ["dbname=shop;charset=utf8mb4", "'shop_app'"]),
        lambda: (f"$mail = new PHPMailer(true);\n$mail->isSMTP();\n$mail->Host       = 'smtp.{RNG.choice(ORGS)}.com';\n$mail->SMTPAuth   = true;\n$mail->Username   = 'orders@{RNG.choice(ORGS)}.com';\n$mail->Password   = '{p}';\n$mail->Port       = 587;", [p], ["$mail->SMTPAuth   = true;", "$mail->Port       = 587;"]),
        lambda: (f"return [\n    'api' => [\n        'endpoint' => 'https://api.{RNG.choice(ORGS)}.com',\n        'key' => '{k}',\n    ],\n];", [k], ["'endpoint' => 'https://api."]),
    ])


def s_ruby(i: int) -> Item:
    p, k = password(), api_key()
    return pick(i, [
        lambda: (f"config.action_mailer.smtp_settings = {{\n  address: 'smtp.sendgrid.net',\n  port: 587,\n  user_name: 'apikey',\n  password: '{p}',\n  authentication: :plain\n}}", [p], ["address: 'smtp.sendgrid.net',", "authentication: :plain"]),
        lambda: (f'client = Octokit::Client.new(access_token: "{k}")\nclient.auto_paginate = true', [k], ["client.auto_paginate = true", "Octokit::Client.new(access_token:"]),
        lambda: (f"ActiveRecord::Base.establish_connection(\n  adapter: 'postgresql', host: '{RNG.choice(HOSTS)}',\n  username: 'report', password: '{p}', database: 'warehouse'\n)", [p], ["adapter: 'postgresql'", "database: 'warehouse'"]),
        lambda: (f"API_SECRET = '{k}'.freeze\nAPI_VERSION = 'v3'.freeze", [k], ["API_VERSION = 'v3'.freeze"]),
        lambda: (f"Net::SFTP.start('sftp.{RNG.choice(ORGS)}.com', 'partner', password: '{p}') do |sftp|\n  sftp.upload!('out/report.csv', '/inbound/report.csv')\nend", [p], ["sftp.upload!('out/report.csv', '/inbound/report.csv')"]),
    ])


def s_js_ts(i: int) -> Item:
    p, k = password(), api_key()
    return pick(i, [
        lambda: (f"export const environment = {{\n  production: true,\n  apiUrl: 'https://api.{RNG.choice(ORGS)}.com',\n  mapsApiKey: '{k}',\n}};", [k], ["production: true,", "export const environment = {"]),
        lambda: (f"const pool = new Pool({{\n  host: '{RNG.choice(HOSTS)}',\n  user: 'svc_app',\n  password: '{p}',\n  database: 'orders',\n  max: 10,\n}});", [p], ["database: 'orders',", "max: 10,"]),
        lambda: (f"const token = jwt.sign({{ sub: user.id, role: user.role }}, '{p}', {{ expiresIn: '1h' }});", [p], ["expiresIn: '1h'", "jwt.sign({ sub: user.id, role: user.role }"]),
        lambda: (f"const api = axios.create({{\n  baseURL: 'https://api.{RNG.choice(ORGS)}.com/v1',\n  headers: {{ Authorization: `Bearer {k}` }},\n}});", [k], ["axios.create({", "headers: { Authorization: `Bearer"]),
        lambda: (f"const transporter = nodemailer.createTransport({{\n  host: 'smtp.{RNG.choice(ORGS)}.com',\n  port: 465,\n  secure: true,\n  auth: {{ user: 'alerts', pass: '{p}' }},\n}});", [p], ["nodemailer.createTransport({", "port: 465,"]),
        lambda: (f"const client = mqtt.connect('mqtts://broker.internal:8883', {{\n  username: 'dashboard',\n  password: '{p}',\n}});", [p], ["mqtt.connect('mqtts://broker.internal:8883'", "username: 'dashboard',"]),
    ])


def s_c_cpp(i: int) -> Item:
    p, k = password(), api_key()
    ssid = RNG.choice(SSIDS)
    return pick(i, [
        lambda: (f'#include <WiFi.h>\n\n#define WIFI_SSID     "{ssid}"\n#define WIFI_PASSWORD "{p}"\n\nvoid setup() {{\n  WiFi.begin(WIFI_SSID, WIFI_PASSWORD);\n}}', [p], [f'#define WIFI_SSID     "{ssid}"', "WiFi.begin(WIFI_SSID, WIFI_PASSWORD);"]),
        lambda: (f'const char* ssid = "{ssid}";\nconst char* password = "{p}";\nconst char* mqtt_server = "192.168.1.20";', [p], [f'const char* ssid = "{ssid}";', 'const char* mqtt_server = "192.168.1.20";']),
        lambda: (f'if (!mysql_real_connect(conn, "{RNG.choice(HOSTS)}", "etl_rw", "{p}", "warehouse", 3306, NULL, 0)) {{\n    fprintf(stderr, "%s\\n", mysql_error(conn));\n}}', [p], ['"warehouse", 3306, NULL, 0', "mysql_error(conn)"]),
        lambda: (f'curl_easy_setopt(curl, CURLOPT_URL, "https://files.{RNG.choice(ORGS)}.com/upload");\ncurl_easy_setopt(curl, CURLOPT_USERPWD, "uploader:{p}");', [p], ["CURLOPT_USERPWD, \"uploader:", "curl_easy_setopt(curl, CURLOPT_URL"]),
        lambda: (f'static const std::string kApiKey = "{k}";\nstatic constexpr int kRetries = 3;', [k], ["static constexpr int kRetries = 3;"]),
        lambda: (f'curl_easy_setopt(h, CURLOPT_USERNAME, "ftpuser");\ncurl_easy_setopt(h, CURLOPT_PASSWORD, "{p}");', [p], ['CURLOPT_USERNAME, "ftpuser"', "CURLOPT_PASSWORD"]),
    ])


def nb_cell(source: list[str], outputs: list[dict[str, object]] | None = None) -> str:
    cell: dict[str, object] = {"cell_type": "code", "execution_count": RNG.randrange(1, 40), "id": hexrun(8), "metadata": {}, "outputs": outputs or [], "source": source}
    return json.dumps(cell, indent=1)


def s_notebook(i: int) -> Item:
    p, k, hx = password(), api_key(), hexrun(40)
    sk = run(40, B64)
    return pick(i, [
        lambda: (nb_cell(["import os\n", f'os.environ["SERVICE_TOKEN"] = "{k}"\n', "from client import Service\n"]), [k], ['"cell_type": "code"', "from client import Service"]),
        lambda: (nb_cell([f"%env WANDB_API_KEY={hx}\n", "import wandb\n", 'wandb.init(project="churn")']), [hx], ["%env WANDB_API_KEY=", 'wandb.init(project=\\"churn\\")']),
        lambda: (nb_cell(["s3 = boto3.client(\n", '    "s3",\n', f'    aws_access_key_id="AKIA{run(16, string.ascii_uppercase + "234567")}",\n', f'    aws_secret_access_key="{sk}",\n', ")"]), [sk], ['"outputs": []', "boto3.client("]),
        lambda: (nb_cell(["engine = create_engine(DB_URL)\n", "print(engine.url.render_as_string(hide_password=False))"], [{"name": "stdout", "output_type": "stream", "text": [f"postgresql://analyst:{(q := alnum_password())}@{RNG.choice(HOSTS)}:5432/warehouse\n"]}]), [q], ['"output_type": "stream"', "hide_password=False"]),
        lambda: (nb_cell(["conn = snowflake.connector.connect(\n", '    user="ANALYST",\n', f'    password="{p}",\n', '    account="xy12345.eu-west-1",\n', ")"]), [p], ['account=\\"xy12345.eu-west-1\\"', "snowflake.connector.connect("]),
    ])


def s_fixture(i: int) -> Item:
    p, k = password(), api_key()
    org = RNG.choice(ORGS)
    return pick(i, [
        lambda: (f"interactions:\n- request:\n    body: null\n    headers:\n      Accept:\n      - application/json\n      Authorization:\n      - Bearer {k}\n    method: GET\n    uri: https://api.{org}.com/v1/invoices?limit=10\n  response:\n    status:\n      code: 200\n      message: OK", [k], ["uri: https://api.", "method: GET", "message: OK"]),
        lambda: (f'@pytest.fixture\ndef billing_client():\n    return BillingClient(base_url="https://sandbox.{org}.com", api_key="{k}")', [k], ["@pytest.fixture", "def billing_client():"]),
        lambda: (f"// jest.setup.ts\nprocess.env.PAYMENTS_API_URL = 'https://sandbox.{org}.com';\nprocess.env.PAYMENTS_API_KEY = '{k}';", [k], ["// jest.setup.ts", "process.env.PAYMENTS_API_KEY = '"]),
        lambda: (f'@SpringBootTest\n@TestPropertySource(properties = {{\n    "spring.datasource.username=it_user",\n    "spring.datasource.password={p}"\n}})\nclass OrderRepositoryIT {{', [p], ["class OrderRepositoryIT {", '"spring.datasource.username=it_user",']),
        lambda: (f'[\n  {{\n    "model": "accounts.apiclient",\n    "pk": 1,\n    "fields": {{"name": "partner-sync", "secret": "{k}"}}\n  }}\n]', [k], ['"model": "accounts.apiclient"', '"name": "partner-sync"']),
        lambda: (f'func TestUpload(t *testing.T) {{\n\tc := NewClient("https://files.{org}.com", "uploader", "{p}")\n\tif err := c.Upload("testdata/a.bin"); err != nil {{\n\t\tt.Fatal(err)\n\t}}\n}}', [p], ['c.Upload("testdata/a.bin")', "func TestUpload(t *testing.T) {"]),
    ])


# -- git output -----------------------------------------------------------------------------------
def diff_head(path: str) -> str:
    return f"diff --git a/{path} b/{path}\nindex {short_sha()}..{short_sha()} 100644\n--- a/{path}\n+++ b/{path}"


def author() -> str:
    u = RNG.choice(["Maria Lopez", "Kenji Watanabe", "Priya Nair", "Tom Becker", "Ana Sousa"])
    return f"Author: {u} <{u.split()[0].lower()}@{RNG.choice(ORGS)}.com>\nDate:   {RNG.choice(['Mon', 'Tue', 'Wed', 'Thu', 'Fri'])} Feb {RNG.randrange(1, 28)} {RNG.randrange(8, 19)}:{RNG.randrange(60):02d}:{RNG.randrange(60):02d} 2027 +0100"


def s_git_diff(i: int) -> Item:
    p, k, p2 = password(), api_key(), password()
    return pick(i, [
        lambda: (f'{diff_head("config/settings.py")}\n@@ -14,7 +14,7 @@ DATABASES = {{\n         "USER": "svc_app",\n-        "PASSWORD": os.environ["DB_PASSWORD"],\n+        "PASSWORD": "{p}",\n         "HOST": "db01.corp.internal",', [p], ['"USER": "svc_app",', '-        "PASSWORD": os.environ["DB_PASSWORD"],']),
        lambda: (f'{diff_head("src/client.ts")}\n@@ -3,5 +3,5 @@\n-const API_KEY = \'{k}\';\n+const API_KEY = process.env.API_KEY ?? \'\';\n export const client = new Client({{ apiKey: API_KEY }});', [k], ["+const API_KEY = process.env.API_KEY ?? '';", "export const client"]),
        lambda: (f"{diff_head('.env.staging')}\n@@ -1,3 +1,4 @@\n APP_ENV=staging\n LOG_LEVEL=info\n+SMTP_PASSWORD={p}\n+SMTP_USER=mailer", [p], ["APP_ENV=staging", "+SMTP_USER=mailer"]),
        lambda: (f"$ git diff --cached deploy/values-prod.yaml\n{diff_head('deploy/values-prod.yaml')}\n@@ -21,4 +21,4 @@ redis:\n   auth:\n     enabled: true\n-    password: {p2}\n+    password: {p}", [p, p2], ["enabled: true", "$ git diff --cached deploy/values-prod.yaml"]),
        lambda: (f'{diff_head("internal/mail/mail.go")}\n@@ -9,6 +9,7 @@ func Send(to string, body []byte) error {{\n \tauth := smtp.PlainAuth("", "alerts@{RNG.choice(ORGS)}.com",\n-\t\tos.Getenv("SMTP_PASSWORD"), "smtp.office365.com")\n+\t\t"{p}", "smtp.office365.com")', [p], ["auth := smtp.PlainAuth(", '-\t\tos.Getenv("SMTP_PASSWORD"), "smtp.office365.com")']),
        lambda: (f"{diff_head('ansible/group_vars/db.yml')}\n@@ -2,3 +2,3 @@\n postgres_port: 5432\n-postgres_admin_password: {p2}\n+postgres_admin_password: \"{{{{ vault_postgres_admin_password }}}}\"", [p2], ['+postgres_admin_password: "{{ vault_postgres_admin_password }}"', "postgres_port: 5432"]),
    ])


def s_git_log(i: int) -> Item:
    p, k = password(), api_key()
    return pick(i, [
        lambda: (f"$ git show {(c := sha1())[:10]}\ncommit {c}\n{author()}\n\n    temp: hardcode staging creds\n\n{diff_head('app/config.rb')}\n@@ -4,3 +4,3 @@\n-  api_key: ENV.fetch('PARTNER_API_KEY'),\n+  api_key: '{k}',", [k], ["temp: hardcode staging creds", "-  api_key: ENV.fetch('PARTNER_API_KEY'),"]),
        lambda: (f"$ git log -p -S '{p}' --all -- docker-compose.yml\ncommit {sha1()}\n{author()}\n\n    remove db password from compose\n\n{diff_head('docker-compose.yml')}\n@@ -11,3 +11,2 @@ services:\n     environment:\n-      POSTGRES_PASSWORD: {p}\n+      POSTGRES_PASSWORD_FILE: /run/secrets/pg", [p], ["remove db password from compose", "+      POSTGRES_PASSWORD_FILE: /run/secrets/pg"]),
        lambda: (f"commit {sha1()}\n{author()}\n\n    add monitoring exporter\n\n{diff_head('monitoring/snmp.yml')}\n@@ -0,0 +1,4 @@\n+auths:\n+  public_v2:\n+    community: {(c := run(RNG.randrange(10, 18), AN))}\n+    version: 2", [c], ["add monitoring exporter", "+    version: 2"]),
        lambda: (f"$ git show HEAD~3:scripts/backup.sh | head -4\n#!/bin/sh\nset -eu\nexport PGPASSWORD='{p}'\npg_dump -h db01 -U backup shop > /backup/shop.sql", [p], ["$ git show HEAD~3:scripts/backup.sh", "pg_dump -h db01 -U backup shop"]),
        lambda: (f"{short_sha()} (HEAD -> main) rotate key\n{diff_head('src/main/resources/application.yml')}\n@@ -7,2 +7,2 @@ app:\n   partner:\n-    token: {k}\n+    token: ${{PARTNER_TOKEN}}", [k], ["+    token: ${PARTNER_TOKEN}", "(HEAD -> main) rotate key"]),
    ])


def s_git_conflict(i: int) -> Item:
    p, p2, k, k2 = password(), password(), api_key(), api_key()
    return pick(i, [
        lambda: (f"APP_ENV=production\n<<<<<<< HEAD\nDB_PASSWORD={p}\n=======\nDB_PASSWORD={p2}\n>>>>>>> rotate-db-credentials\nDB_HOST=db01.corp.internal", [p, p2], ["<<<<<<< HEAD", ">>>>>>> rotate-db-credentials", "DB_HOST=db01.corp.internal"]),
        lambda: (f"  redis:\n<<<<<<< ours\n    password: {p}\n||||||| base\n    password: ${{REDIS_PASSWORD}}\n=======\n    password: {p2}\n>>>>>>> theirs", [p, p2], ["<<<<<<< ours", ">>>>>>> theirs", "password: ${REDIS_PASSWORD}"]),
        lambda: (f"$ git diff --name-only --diff-filter=U\nsrc/config.js\n$ sed -n 3,9p src/config.js\n<<<<<<< HEAD\n  stripeKey: '{k}',\n=======\n  stripeKey: '{k2}',\n>>>>>>> {sha1()}", [k, k2], ["--diff-filter=U", "$ sed -n 3,9p src/config.js"]),
        lambda: (f"diff --cc settings.ini\nindex {short_sha()},{short_sha()}..0000000\n--- a/settings.ini\n+++ b/settings.ini\n@@@ -1,3 -1,3 +1,7 @@@\n  [mail]\n++<<<<<<< HEAD\n +password = {p}\n++=======\n+ password = {p2}\n++>>>>>>> feature/mailer", [p, p2], ["diff --cc settings.ini", "  [mail]"]),
    ])


def s_git_stash(i: int) -> Item:
    p, k = password(), api_key()
    return pick(i, [
        lambda: (f"$ git stash show -p stash@{{0}}\n{diff_head('.env.local')}\n@@ -1,2 +1,3 @@\n NEXT_PUBLIC_API_URL=http://localhost:4000\n+API_SECRET={k}\n NODE_ENV=development", [k], ["$ git stash show -p stash@{0}", "NODE_ENV=development"]),
        lambda: (f"$ git stash list\nstash@{{0}}: WIP on main: {short_sha()} fix login\n$ git stash show -p\n{diff_head('config/database.yml')}\n@@ -5,2 +5,2 @@ development:\n-  password:\n+  password: {p}", [p], ["stash@{0}: WIP on main:", "-  password:"]),
        lambda: (f"$ git stash show -p stash@{{1}} -- appsettings.Development.json\n{diff_head('appsettings.Development.json')}\n@@ -3,3 +3,3 @@\n   \"ConnectionStrings\": {{\n-    \"Default\": \"Server=(localdb)\\\\mssqllocaldb;Database=Shop;Trusted_Connection=True\"\n+    \"Default\": \"Server=sql02;Database=Shop;User Id=shop;Password={p}\"", [p], ['"ConnectionStrings": {', "Trusted_Connection=True"]),
        lambda: (f"$ git stash show -p | grep '^+'\n+++ b/scripts/sync.sh\n+export SYNC_TOKEN={k}\n+./sync --since 2d", [k], ["+./sync --since 2d", "$ git stash show -p | grep '^+'"]),
    ])


# -- logs -------------------------------------------------------------------------------------------
def pod_name(base: str | None = None) -> str:
    return f"{base or RNG.choice(PROJECTS)}-{pod_suffix()}"


def s_json_log(i: int) -> Item:
    t, p, k = jwt(), alnum_password(), api_key()
    org = RNG.choice(ORGS)
    return pick(i, [
        lambda: (json.dumps({"level": 30, "time": 1_801_000_000_000 + RNG.randrange(10**9), "pid": RNG.randrange(7, 40000), "hostname": pod_name("orders-api"), "req": {"id": RNG.randrange(1, 9000), "method": "GET", "url": "/v1/orders?page=2", "headers": {"host": f"api.{org}.com", "authorization": f"Bearer {t}"}}, "msg": "request completed"}, separators=(",", ":")), [t], ['"msg":"request completed"', '"url":"/v1/orders?page=2"']),
        lambda: (json.dumps({"event": "db.connect", "dsn": f"postgresql://etl_rw:{p}@{RNG.choice(HOSTS)}:5432/warehouse", "level": "info", "timestamp": ts()}), [p], ['"event": "db.connect"', '"level": "info"']),
        lambda: (json.dumps({"level": "debug", "ts": 1_801_000_000 + RNG.randrange(10**6) + 0.25, "caller": "auth/refresh.go:88", "msg": "token refreshed", "access_token": t, "expires_in": 3600}, separators=(",", ":")), [t], ['"caller":"auth/refresh.go:88"', '"expires_in":3600']),
        lambda: (json.dumps({"@timestamp": ts(), "log.level": "DEBUG", "message": "calling partner API", "http.request.headers": {"x-api-key": k, "accept": "application/json"}, "service.name": "billing-worker"}), [k], ['"service.name": "billing-worker"', '"message": "calling partner API"']),
        lambda: (json.dumps({"severity": "ERROR", "message": f"smtp login failed for alerts@{org}.com using password {p}", "logging.googleapis.com/trace": f"projects/{org}-prod/traces/{hexrun(32)}"}), [p], ['"severity": "ERROR"', "smtp login failed for alerts@"]),
    ])


def s_logfmt(i: int) -> Item:
    p, k, t = alnum_password(), api_key(), jwt()
    return pick(i, [
        lambda: (f'time={ts()} level=debug msg="connecting to broker" url=amqp://orders:{p}@rabbit.internal:5672/prod attempt=1', [p], ['msg="connecting to broker"', "attempt=1"]),
        lambda: (f'ts={ts()} level=debug caller=client.go:142 msg="outgoing request" method=POST url=https://api.{RNG.choice(ORGS)}.com/v1/charges header.authorization="Bearer {t}"', [t], ["caller=client.go:142", 'msg="outgoing request"']),
        lambda: (f'level=info ts={ts()} component=exporter msg="scraping target" target=10.0.4.1 community={(c := run(RNG.randrange(10, 18)))} module=if_mib', [c], ["component=exporter", "module=if_mib"]),
        lambda: (f't={ts()} lvl=dbug msg="datasource config" logger=datasource name=Prometheus basicAuthUser=grafana basicAuthPassword={p}', [p], ["logger=datasource", "basicAuthUser=grafana"]),
        lambda: (f'at=info method=POST path="/hooks/deploy?secret={k}" host=hooks.{RNG.choice(ORGS)}.com request_id={uid()} status=204 bytes=0', [k], ["at=info method=POST", "status=204 bytes=0"]),
    ])


def s_access_log(i: int) -> Item:
    k, t, p = api_key(), jwt(), alnum_password()
    org = RNG.choice(ORGS)
    return pick(i, [
        lambda: (f'{ip()} - - [{clf_time()}] "GET /api/export?access_token={k}&format=csv HTTP/1.1" 200 51234 "-" "python-requests/2.32.3"', [k], ["&format=csv HTTP/1.1", '"python-requests/2.32.3"']),
        lambda: (f'{ip()} - - [{clf_time()}] "GET /ws/notifications?token={t} HTTP/1.1" 101 0 "https://app.{org}.com/" "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"', [t], ["/ws/notifications?token=", "HTTP/1.1\" 101 0"]),
        lambda: (f'{ip()} - - [{clf_time()}] "GET /login.php?user=admin&password={p} HTTP/1.0" 302 - "-" "curl/8.5.0"', [p], ["/login.php?user=admin&password=", '"curl/8.5.0"']),
        lambda: (f'{ip()} - - [{clf_time()}] "POST /v2/telemetry?api_key={k} HTTP/2.0" 202 18 "-" "okhttp/4.12.0" rt=0.004 uct="0.000"', [k], ['"okhttp/4.12.0" rt=0.004', "/v2/telemetry?api_key="]),
        lambda: (f'h2 {ts()} app/{RNG.choice(PROJECTS)}-alb/{hexrun(16)} {ip()}:{RNG.randrange(1024, 65535)} {ip()}:8080 0.001 0.012 0.000 200 200 412 933 "GET https://api.{org}.com:443/v1/feed?apikey={k}&since=3600 HTTP/2.0" "Dart/3.4 (dart:io)"', [k], ["&since=3600 HTTP/2.0", '"Dart/3.4 (dart:io)"']),
    ])


def s_pylogging(i: int) -> Item:
    k, t, p = api_key(), jwt(), password()
    org = RNG.choice(ORGS)
    return pick(i, [
        lambda: (f"DEBUG:app.client:request headers: {{'User-Agent': 'python-requests/2.32.3', 'Accept': '*/*', 'Authorization': 'Token {k}'}}", [k], ["DEBUG:app.client:request headers:", "'User-Agent': 'python-requests/2.32.3'"]),
        lambda: (f"send: b'GET /v1/me HTTP/1.1\\r\\nHost: api.{org}.com\\r\\nAuthorization: Bearer {t}\\r\\nAccept: */*\\r\\n\\r\\n'\nreply: 'HTTP/1.1 200 OK\\r\\n'", [t], ["send: b'GET /v1/me HTTP/1.1", "reply: 'HTTP/1.1 200 OK"]),
        lambda: (f"2027-02-0{RNG.randrange(1, 9)} 09:{RNG.randrange(10, 59)}:0{RNG.randrange(0, 9)},{RNG.randrange(100, 999)} DEBUG [billing.gateway] POST https://pay.{org}.com/api headers={{'X-Api-Key': '{k}', 'Content-Type': 'application/json'}}", [k], ["DEBUG [billing.gateway]", "'Content-Type': 'application/json'"]),
        lambda: (f"[2027-02-0{RNG.randrange(1, 9)} 11:0{RNG.randrange(0, 9)}:12,{RNG.randrange(100, 999)}] WARNING in ldap_auth: bind failed for cn=reader,dc={org},dc=com with password '{p}'", [p], ["WARNING in ldap_auth: bind failed for", f"dc={org},dc=com"]),
    ])


def s_stacktrace(i: int) -> Item:
    p = alnum_password()
    h = RNG.choice(HOSTS)
    return pick(i, [
        lambda: (f"java.sql.SQLException: No suitable driver found for jdbc:mysql://{h}:3306/orders?user=svc_app&password={p}\n\tat java.sql/java.sql.DriverManager.getConnection(DriverManager.java:706)\n\tat java.sql/java.sql.DriverManager.getConnection(DriverManager.java:252)\n\tat com.northwind.orders.Db.connect(Db.java:41)", [p], ["java.sql.SQLException: No suitable driver found for", "at com.northwind.orders.Db.connect(Db.java:41)"]),
        lambda: (f"Exception in thread \"main\" redis.clients.jedis.exceptions.JedisConnectionException: Failed to connect to redis://default:{p}@cache.internal:6379\n\tat redis.clients.jedis.DefaultJedisSocketFactory.createSocket(DefaultJedisSocketFactory.java:140)\n\tat redis.clients.jedis.Connection.connect(Connection.java:201)", [p], ["JedisConnectionException: Failed to connect to", "at redis.clients.jedis.Connection.connect(Connection.java:201)"]),
        lambda: (f"org.springframework.beans.factory.BeanCreationException: Error creating bean with name 'dataSource'\nCaused by: java.lang.IllegalArgumentException: Invalid URL: jdbc:postgresql://{h}:5432/billing?user=billing&password={p}&ssl=true&sslmode=verify-ful\n\tat org.postgresql.Driver.connect(Driver.java:288)", [p], ["Error creating bean with name 'dataSource'", "at org.postgresql.Driver.connect(Driver.java:288)"]),
        lambda: (f"Traceback (most recent call last):\n  File \"/app/worker.py\", line 18, in <module>\n    conn = pika.BlockingConnection(pika.URLParameters(\"amqp://worker:{p}@rabbit.internal:5672/%2F\"))\npika.exceptions.AMQPConnectionError: Connection to 10.40.2.9:5672 failed: timeout", [p], ["Traceback (most recent call last):", "pika.exceptions.AMQPConnectionError"]),
    ])


def s_logcat(i: int) -> Item:
    t, k, p = jwt(), api_key(), password()
    org = RNG.choice(ORGS)

    def lc(tag: str, lines: list[str]) -> str:
        pid, tid = RNG.randrange(2000, 32000), RNG.randrange(2000, 32000)
        stamp = f"02-{RNG.randrange(1, 28):02d} {RNG.randrange(24):02d}:{RNG.randrange(60):02d}:{RNG.randrange(60):02d}"
        millis = sorted(RNG.randrange(1000) for _ in lines)
        return "\n".join(f"{stamp}.{ms:03d} {pid:5d} {tid:5d} D {tag:<8}: {line}" for ms, line in zip(millis, lines, strict=True))
    return pick(i, [
        lambda: (lc("OkHttp", [f"--> GET https://api.{org}.com/v1/profile", f"Authorization: Bearer {t}", "--> END GET"]), [t], [f"--> GET https://api.{org}.com/v1/profile", "--> END GET"]),
        lambda: (lc("OkHttp", [f"--> POST https://api.{org}.com/v1/login", "Content-Type: application/json; charset=utf-8", "", (body := f'{{"email":"maria@{org}.com","password":"{p}"}}'), f"--> END POST ({len(body)}-byte body)"]), [p], ["--> END POST (", "Content-Type: application/json; charset=utf-8"]),
        lambda: (lc("ApiClient", [f"init baseUrl=https://api.{org}.com apiKey={k}"]), [k], ["init baseUrl=https://api."]),
        lambda: (lc("OkHttp", [f"<-- 200 https://auth.{org}.com/oauth/token (212ms)", f'{{"access_token":"{t}","token_type":"Bearer","expires_in":3600}}', "<-- END HTTP (412-byte body)"]), [t], ['"token_type":"Bearer","expires_in":3600', "<-- END HTTP (412-byte body)"]),
    ])


# -- process and system output ----------------------------------------------------------------------
def ps_line(user: str, cmd: str) -> str:
    return f"{user:<10} {RNG.randrange(300, 60000):>6} {RNG.randrange(0, 30)}.{RNG.randrange(10)} {RNG.randrange(0, 12)}.{RNG.randrange(10)} {RNG.randrange(10**5, 4 * 10**6):>7} {RNG.randrange(10**4, 9 * 10**5):>6} ?        Ssl  09:{RNG.randrange(10, 59)}   {RNG.randrange(0, 9)}:{RNG.randrange(10, 59)} {cmd}"


PS_HEAD = "USER          PID %CPU %MEM     VSZ    RSS TTY      STAT START   TIME COMMAND"


def s_ps(i: int) -> Item:
    p, p2, k = alnum_password(), password(), api_key()
    pid = RNG.randrange(300, 60000)
    return pick(i, [
        lambda: (f"$ ps aux | grep [j]ava\n{ps_line('app', f'java -Xmx2g -Dspring.datasource.password={p2} -jar /opt/orders/orders.jar')}", [p2], ["$ ps aux | grep [j]ava", "-jar /opt/orders/orders.jar"]),
        lambda: (f"$ cat -v /proc/{pid}/cmdline\nx11vnc^@-forever^@-passwd^@{p}^@-display^@:0^@", [p], [f"$ cat -v /proc/{pid}/cmdline", "-display^@:0^@"]),
        lambda: (f"$ pgrep -a mysqldump\n{pid} mysqldump -u backup -p{p} --single-transaction --all-databases", [p], ["$ pgrep -a mysqldump", "--single-transaction --all-databases"]),
        lambda: (f"$ tr '\\0' ' ' < /proc/{pid}/cmdline; echo\nredis-cli -h cache.internal -a {p} --no-auth-warning monitor", [p], ["--no-auth-warning monitor", "redis-cli -h cache.internal"]),
        lambda: (f"{PS_HEAD}\n{ps_line('node', f'node /srv/portal/server.js --port 3000 --api-token={k}')}\n{ps_line('root', '/usr/sbin/sshd -D')}", [k], ["/usr/sbin/sshd -D", "node /srv/portal/server.js --port 3000"]),
        lambda: (f"$ ps -eo pid,args | grep [r]sync\n{pid:>6} sshpass -p {p} rsync -az /srv/data/ backup@nas01:/volume1/data/", [p], ["rsync -az /srv/data/ backup@nas01:/volume1/data/", "$ ps -eo pid,args"]),
    ])


def s_container_env(i: int) -> Item:
    p, k, p2 = password(), api_key(), password()
    return pick(i, [
        lambda: (f"$ docker inspect --format '{{{{json .Config.Env}}}}' orders-db\n[\"POSTGRES_PASSWORD={p}\",\"POSTGRES_USER=orders\",\"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\",\"PGDATA=/var/lib/postgresql/data\"]", [p], ["POSTGRES_USER=orders", "PGDATA=/var/lib/postgresql/data"]),
        lambda: (f'            "Env": [\n                "MYSQL_ROOT_PASSWORD={p}",\n                "MYSQL_DATABASE=shop",\n                "GOSU_VERSION=1.17"\n            ],\n            "Cmd": [\n                "mysqld"\n            ],', [p], ['"MYSQL_DATABASE=shop",', '"GOSU_VERSION=1.17"']),
        lambda: (f"    Environment:\n      SPRING_PROFILES_ACTIVE:  prod\n      DB_PASSWORD:             {p}\n      API_TOKEN:               <set to the key 'token' in secret 'partner-api'>  Optional: false\n    Mounts:\n      /var/run/secrets/kubernetes.io/serviceaccount from kube-api-access-{run(5, LOW)} (ro)", [p], ["<set to the key 'token' in secret 'partner-api'>", "SPRING_PROFILES_ACTIVE:  prod"]),
        lambda: (f"$ kubectl set env deployment/billing-worker --list\n# Deployment billing-worker, container worker\nQUEUE_URL=amqp://rabbit.internal:5672\nPARTNER_API_KEY={k}", [k], ["# Deployment billing-worker, container worker", "QUEUE_URL=amqp://rabbit.internal:5672"]),
        lambda: (f'$ crictl inspect {hexrun(13)} | jq .info.config.envs\n[\n  {{\n    "key": "REDIS_PASSWORD",\n    "value": "{p2}"\n  }},\n  {{\n    "key": "KUBERNETES_SERVICE_PORT",\n    "value": "443"\n  }}\n]', [p2], ['"key": "KUBERNETES_SERVICE_PORT",', "jq .info.config.envs"]),
    ])


def s_systemd_cron(i: int) -> Item:
    p, k, p2 = password(), api_key(), alnum_password()
    svc = RNG.choice(PROJECTS)
    return pick(i, [
        lambda: (f'[Service]\nUser=app\nEnvironment="NODE_ENV=production" "DB_PASSWORD={p}"\nExecStart=/usr/bin/node /srv/{svc}/server.js\nRestart=on-failure', [p], ['Environment="NODE_ENV=production"', "Restart=on-failure"]),
        lambda: (f"$ systemctl show {svc}.service -p Environment\nEnvironment=LOG_LEVEL=info API_TOKEN={k} PORT=8080", [k], [f"$ systemctl show {svc}.service -p Environment", "PORT=8080"]),
        lambda: (f"# /etc/systemd/system/{svc}.service.d/override.conf\n[Service]\nEnvironment=SMTP_PASSWORD={p2}", [p2], [f"# /etc/systemd/system/{svc}.service.d/override.conf"]),
        lambda: (f"# /etc/cron.d/db-backup\nSHELL=/bin/sh\n30 2 * * * backup PGPASSWORD={p2} /usr/bin/pg_dump -h db01 -U backup shop | gzip > /srv/backup/shop.sql.gz", [p2], ["# /etc/cron.d/db-backup", "SHELL=/bin/sh"]),
        lambda: (f"$ sudo systemd-run --unit=reindex --setenv=ES_PASSWORD={p} /usr/local/bin/reindex --all\nRunning as unit: reindex.service", [p], ["Running as unit: reindex.service", "/usr/local/bin/reindex --all"]),
        lambda: (f"$ sudo crontab -l -u monitor\n*/5 * * * * /usr/local/bin/check_snmp -H 10.0.0.1 -C {(c := run(RNG.randrange(10, 16)))} -o sysUpTime.0 >/dev/null", [c], ["$ sudo crontab -l -u monitor", "-o sysUpTime.0 >/dev/null"]),
    ])


def s_powershell(i: int) -> Item:
    p = password()
    return pick(i, [
        lambda: (f"$secpass = ConvertTo-SecureString '{p}' -AsPlainText -Force\n$cred = New-Object System.Management.Automation.PSCredential ('CORP\\svc_deploy', $secpass)\nInvoke-Command -ComputerName app01 -Credential $cred -ScriptBlock {{ Restart-Service W3SVC }}", [p], ["New-Object System.Management.Automation.PSCredential ('CORP\\svc_deploy', $secpass)", "Restart-Service W3SVC"]),
        lambda: (f'New-LocalUser -Name "kiosk" -Password (ConvertTo-SecureString "{p}" -AsPlainText -Force) -PasswordNeverExpires', [p], ['New-LocalUser -Name "kiosk"', "-PasswordNeverExpires"]),
        lambda: (f"Set-ADAccountPassword -Identity mlopez -Reset -NewPassword (ConvertTo-SecureString -AsPlainText '{p}' -Force)", [p], ["Set-ADAccountPassword -Identity mlopez -Reset"]),
        lambda: (f"Invoke-Sqlcmd -ServerInstance sql02 -Database Billing -Username sa -Password '{p}' -Query \"SELECT COUNT(*) FROM dbo.Invoices\"", [p], ["-ServerInstance sql02 -Database Billing", "SELECT COUNT(*) FROM dbo.Invoices"]),
        lambda: (f"PS C:\\> Connect-VIServer -Server vcenter01.corp.internal -User administrator@vsphere.local -Password '{p}'\n\nName                           Port  User\n----                           ----  ----\nvcenter01.corp.internal        443   VSPHERE.LOCAL\\Administrator", [p], ["Connect-VIServer -Server vcenter01.corp.internal", "VSPHERE.LOCAL\\Administrator"]),
    ])


def s_windows_cli(i: int) -> Item:
    p = password()
    return pick(i, [
        lambda: (f"C:\\> net use \\\\fs01\\finance /user:CORP\\svc_backup {p} /persistent:no\nThe command completed successfully.", [p], ["/user:CORP\\svc_backup", "The command completed successfully."]),
        lambda: (f"cmdkey /generic:TERMSRV/rdp01.corp.internal /user:CORP\\ops /pass:{p}\n\nCMDKEY: Credential added successfully.", [p], ["cmdkey /generic:TERMSRV/rdp01.corp.internal", "CMDKEY: Credential added successfully."]),
        lambda: (f'C:\\> setx DB_PASSWORD "{p}"\n\nSUCCESS: Specified value was saved.', [p], ["SUCCESS: Specified value was saved.", "setx DB_PASSWORD"]),
        lambda: (f'Windows Registry Editor Version 5.00\n\n[HKEY_LOCAL_MACHINE\\SOFTWARE\\Microsoft\\Windows NT\\CurrentVersion\\Winlogon]\n"AutoAdminLogon"="1"\n"DefaultUserName"="kiosk"\n"DefaultPassword"="{p}"', [p], ['"AutoAdminLogon"="1"', '"DefaultUserName"="kiosk"']),
        lambda: (f'reg add "HKLM\\SOFTWARE\\Microsoft\\Windows NT\\CurrentVersion\\Winlogon" /v DefaultPassword /t REG_SZ /d {p} /f', [p], ["/v DefaultPassword /t REG_SZ", "Winlogon"]),
        lambda: (f"schtasks /create /tn \"Nightly Backup\" /tr C:\\scripts\\backup.cmd /sc daily /st 02:00 /ru CORP\\svc_backup /rp {p}", [p], ['/tn "Nightly Backup"', "/ru CORP\\svc_backup"]),
        lambda: (f'sc.exe config OrdersSvc obj= "CORP\\svc_orders" password= "{p}"\n[SC] ChangeServiceConfig SUCCESS', [p], ['obj= "CORP\\svc_orders"', "[SC] ChangeServiceConfig SUCCESS"]),
    ])


# -- infrastructure state and manifests --------------------------------------------------------------
def tf_resource(rtype: str, name: str, attrs: dict[str, object], sensitive: list[str]) -> str:
    """One resource of a version-4 state file, as an editor shows it (the instance's attributes
    and its ``sensitive_attributes`` paths)."""
    attr_lines = ",\n".join(f"            {json.dumps(k)}: {json.dumps(v)}" for k, v in attrs.items())
    paths = ", ".join(json.dumps([{"type": "get_attr", "value": s}]) for s in sensitive)
    return (f'    {{\n      "mode": "managed",\n      "type": "{rtype}",\n      "name": "{name}",\n      "instances": [\n        {{\n'
            f'          "attributes": {{\n{attr_lines}\n          }},\n          "sensitive_attributes": [{paths}]\n        }}\n      ]\n    }}')


def s_terraform(i: int) -> Item:
    p, p2, lineage = password(), password(), uid()
    sk, ses = run(40, B64), "B" + run(43, B64)
    acct = run(RNG.randrange(8, 14), string.ascii_lowercase + string.digits)
    sa_key = b64bytes(64)
    return pick(i, [
        lambda: (f'{{\n  "version": 4,\n  "serial": {RNG.randrange(3, 300)},\n  "lineage": "{lineage}",\n  "resources": [\n' + "\n".join(tf_resource("aws_db_instance", "orders", {"identifier": "orders-prod", "username": "orders", "password": p}, ["password"]).splitlines()[:10]), [p], [f'"lineage": "{lineage}"', '"identifier": "orders-prod"']),
        lambda: (tf_resource("random_password", "db", {"id": "none", "length": len(p), "special": True, "result": p}, ["result"]), [p], ['"type": "random_password"', '"special": true']),
        lambda: (tf_resource("aws_iam_access_key", "smtp", {"id": f"AKIA{run(16, string.ascii_uppercase + '234567')}", "user": "ses-smtp", "secret": sk, "ses_smtp_password_v4": ses, "status": "Active"}, ["secret", "ses_smtp_password_v4"]), [sk, ses], ['"user": "ses-smtp"', '"status": "Active"']),
        lambda: (json.dumps({"db_endpoint": {"sensitive": False, "type": "string", "value": f"orders-prod.{run(12, LOW)}.eu-west-1.rds.amazonaws.com:5432"}, "db_password": {"sensitive": True, "type": "string", "value": p2}}, indent=2), [p2], ['"sensitive": true', '"db_endpoint": {']),
        lambda: (f"$ terraform output -raw admin_password\n{p2}", [p2], ["$ terraform output -raw admin_password"]),
        lambda: (tf_resource("azurerm_storage_account", "logs", {"name": acct, "account_tier": "Standard", "primary_access_key": sa_key, "primary_blob_endpoint": f"https://{acct}.blob.core.windows.net/"}, ["primary_access_key"]), [sa_key], [f'"primary_blob_endpoint": "https://{acct}.blob.core.windows.net/"', '"account_tier": "Standard"']),
    ])


def s_ansible(i: int) -> Item:
    p, p2 = password(), password()
    return pick(i, [
        lambda: (f"[db]\ndb01 ansible_host=10.0.2.11 ansible_user=deploy ansible_password={p} ansible_become_pass={p2}\ndb02 ansible_host=10.0.2.12 ansible_user=deploy", [p, p2], ["db02 ansible_host=10.0.2.12 ansible_user=deploy", "[db]"]),
        lambda: (f"all:\n  children:\n    windows:\n      hosts:\n        win01:\n          ansible_host: 10.0.3.4\n      vars:\n        ansible_user: Administrator\n        ansible_password: {p}\n        ansible_connection: winrm\n        ansible_winrm_transport: ntlm", [p], ["ansible_connection: winrm", "ansible_winrm_transport: ntlm"]),
        lambda: (f"# host_vars/app01.yml\nansible_become_password: {p}\nnginx_worker_processes: 4", [p], ["# host_vars/app01.yml", "nginx_worker_processes: 4"]),
        lambda: (f'$ ansible-inventory -i hosts.ini --host sw-core-01\n{{\n    "ansible_connection": "network_cli",\n    "ansible_network_os": "cisco.ios.ios",\n    "ansible_user": "netadmin",\n    "ansible_ssh_pass": "{p}"\n}}', [p], ['"ansible_network_os": "cisco.ios.ios"', "--host sw-core-01"]),
        lambda: (f"[routers:vars]\nansible_network_os=vyos.vyos.vyos\nansible_user=vyos\nansible_ssh_pass={p}", [p], ["[routers:vars]", "ansible_network_os=vyos.vyos.vyos"]),
    ])


def s_hiera_pillar(i: int) -> Item:
    p, k = password(), api_key()
    return pick(i, [
        lambda: (f"---\nprofile::postgres::port: 5432\nprofile::postgres::replication_password: '{p}'\nprofile::postgres::max_connections: 200", [p], ["profile::postgres::port: 5432", "profile::postgres::max_connections: 200"]),
        lambda: (f"class {{ 'mysql::server':\n  root_password           => '{p}',\n  remove_default_accounts => true,\n}}", [p], ["class { 'mysql::server':", "remove_default_accounts => true,"]),
        lambda: (f"# /srv/pillar/mysql.sls\nmysql:\n  server:\n    root_password: {p}\n  database:\n    - shop", [p], ["# /srv/pillar/mysql.sls", "    - shop"]),
        lambda: (f"$ sudo salt 'web*' pillar.get monitoring:api_key\nweb01.corp.internal:\n    {k}", [k], ["pillar.get monitoring:api_key", "web01.corp.internal:"]),
        lambda: (f'{{\n  "id": "smtp",\n  "host": "smtp.office365.com",\n  "user": "alerts",\n  "password": "{p}"\n}}', [p], ['"id": "smtp"', '"host": "smtp.office365.com"']),
    ])


def s_hashicorp(i: int) -> Item:
    acc, sec = uid(), uid()
    gossip, unseal1, unseal2 = b64bytes(32), b64bytes(33), b64bytes(33)
    root = "hvs." + run(24)
    return pick(i, [
        lambda: (f"AccessorID:       {acc}\nSecretID:         {sec}\nDescription:      Bootstrap Token (Global Management)\nLocal:            false\nPolicies:\n   00000000-0000-0000-0000-000000000001 - global-management", [sec], [acc, "00000000-0000-0000-0000-000000000001 - global-management"]),
        lambda: (f"$ nomad acl bootstrap\nAccessor ID  = {acc}\nSecret ID    = {sec}\nName         = Bootstrap Token\nType         = management\nGlobal       = true", [sec], [acc, "Type         = management"]),
        lambda: (f'datacenter = "dc1"\ndata_dir   = "/opt/consul"\nencrypt    = "{gossip}"\n\nacl {{\n  enabled = true\n  tokens {{\n    agent = "{sec}"\n  }}\n}}', [gossip, sec], ['data_dir   = "/opt/consul"', "enabled = true"]),
        lambda: (f"export NOMAD_ADDR=https://nomad.service.consul:4646\nexport NOMAD_TOKEN={sec}\nnomad job status", [sec], ["export NOMAD_ADDR=https://nomad.service.consul:4646", "nomad job status"]),
        lambda: (f"$ vault operator init -key-shares=3 -key-threshold=2\nUnseal Key 1: {unseal1}\nUnseal Key 2: {unseal2}\n\nInitial Root Token: {root}\n\nVault initialized with 3 key shares and a key threshold of 2.", [unseal1, unseal2, root], ["Vault initialized with 3 key shares and a key threshold of 2."]),
    ])


def s_cluster_join(i: int) -> Item:
    tid, tsec = run(6, LOW), run(16, LOW)
    tok = f"{tid}.{tsec}"
    ca = "sha256:" + hexrun(64)
    ck = hexrun(64)
    swarm = f"SWMTKN-1-{run(50, LOW)}-{run(25, LOW)}"
    k3s = f"K10{hexrun(64)}::server:{hexrun(32)}"
    api = f"10.0.0.{RNG.randrange(2, 250)}:6443"
    return pick(i, [
        lambda: (f"kubeadm join {api} --token {tok} \\\n\t--discovery-token-ca-cert-hash {ca}", [tok], [ca, f"kubeadm join {api}"]),
        lambda: (f"$ kubeadm token create --print-join-command\nkubeadm join {api} --token {tok} --discovery-token-ca-cert-hash {ca}", [tok], [ca, "--print-join-command"]),
        lambda: (f"kubeadm join {api} --token {tok} \\\n\t--discovery-token-ca-cert-hash {ca} \\\n\t--control-plane --certificate-key {ck}", [tok, ck], [ca, "--control-plane"]),
        lambda: (f"$ docker swarm join-token worker\nTo add a worker to this swarm, run the following command:\n\n    docker swarm join --token {swarm} 10.0.0.{RNG.randrange(2, 250)}:2377", [swarm], ["To add a worker to this swarm, run the following command:"]),
        lambda: (f"curl -sfL https://get.k3s.io | K3S_URL=https://{api} K3S_TOKEN={k3s} sh -", [k3s], ["curl -sfL https://get.k3s.io", f"K3S_URL=https://{api}"]),
        lambda: (f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: bootstrap-token-{tid}\n  namespace: kube-system\ntype: bootstrap.kubernetes.io/token\nstringData:\n  token-id: {tid}\n  token-secret: {tsec}\n  usage-bootstrap-authentication: \"true\"", [tsec], ["type: bootstrap.kubernetes.io/token", f"token-id: {tid}"]),
    ])


# -- network and VPN config -----------------------------------------------------------------------------
def s_wireguard(i: int) -> Item:
    priv, pub, psk = wg_key(), wg_key(), b64bytes(32)
    org = RNG.choice(ORGS)
    return pick(i, [
        lambda: (f"[Interface]\nPrivateKey = {priv}\nAddress = 10.8.0.{RNG.randrange(2, 250)}/24\nDNS = 10.8.0.1\n\n[Peer]\nPublicKey = {pub}\nPresharedKey = {psk}\nEndpoint = vpn.{org}.com:51820\nAllowedIPs = 0.0.0.0/0, ::/0", [priv, psk], [pub, f"Endpoint = vpn.{org}.com:51820", "AllowedIPs = 0.0.0.0/0, ::/0"]),
        lambda: (f"$ sudo wg showconf wg0\n[Interface]\nListenPort = 51820\nPrivateKey = {priv}\n\n[Peer]\nPublicKey = {pub}\nAllowedIPs = 10.8.0.{RNG.randrange(2, 250)}/32", [priv], [pub, "$ sudo wg showconf wg0", "ListenPort = 51820"]),
        lambda: (f"$ sudo wg show wg0 private-key\n{priv}", [priv], ["$ sudo wg show wg0 private-key"]),
        lambda: (f"$ echo '{priv}' | wg pubkey\n{pub}", [priv], [pub, "| wg pubkey"]),
        lambda: (f"[Peer]\nPublicKey = {pub}\nPresharedKey = {psk}\nAllowedIPs = 10.8.0.{RNG.randrange(2, 250)}/32\nPersistentKeepalive = 25", [psk], [pub, "PersistentKeepalive = 25"]),
    ])


def ovpn_static() -> tuple[str, str]:
    body = "\n".join(hexrun(32) for _ in range(16))
    return body, f"-----BEGIN OpenVPN Static key V1-----\n{body}\n-----END OpenVPN Static key V1-----"


def s_openvpn(i: int) -> Item:
    p = password()
    body, block = ovpn_static()
    org = RNG.choice(ORGS)
    return pick(i, [
        lambda: (f"#\n# 2048 bit OpenVPN static key\n#\n{block}", [body], ["# 2048 bit OpenVPN static key", "-----BEGIN OpenVPN Static key V1-----"]),
        lambda: (f"remote vpn.{org}.com 1194 udp\nkey-direction 1\n<tls-crypt>\n{block}\n</tls-crypt>", [body], [f"remote vpn.{org}.com 1194 udp", "<tls-crypt>"]),
        lambda: (f"$ sudo cat /etc/openvpn/client/auth.txt\nmaria.lopez\n{p}", [p], ["$ sudo cat /etc/openvpn/client/auth.txt"]),
        lambda: (f"client\ndev tun\nremote vpn.{org}.com 443 tcp\nauth-user-pass\n<auth-user-pass>\nsvc-monitor\n{p}\n</auth-user-pass>", [p], [f"remote vpn.{org}.com 443 tcp", "<auth-user-pass>"]),
        lambda: (f"$ cat /etc/openvpn/server/key.pass\n{p}\n$ grep askpass /etc/openvpn/server/server.conf\naskpass /etc/openvpn/server/key.pass", [p], ["askpass /etc/openvpn/server/key.pass"]),
    ])


def s_ipsec(i: int) -> Item:
    p, p2 = password(), password()
    return pick(i, [
        lambda: (f'# /etc/ipsec.secrets\n203.0.113.{RNG.randrange(2, 250)} 198.51.100.{RNG.randrange(2, 250)} : PSK "{p}"\n: RSA vpn-gw.key', [p], ["# /etc/ipsec.secrets", ": RSA vpn-gw.key"]),
        lambda: (f'secrets {{\n   ike-branch01 {{\n      id = branch01.{RNG.choice(ORGS)}.com\n      secret = "{p}"\n   }}\n}}', [p], ["ike-branch01 {", "secrets {"]),
        lambda: (f'%any %any : PSK "{p}"\nmaria : EAP "{p2}"', [p, p2], ["%any %any : PSK", "maria : EAP"]),
        lambda: (f"crypto isakmp key {p} address 203.0.113.{RNG.randrange(2, 250)}\ncrypto isakmp policy 10\n encr aes 256\n authentication pre-share", [p], [" authentication pre-share", "crypto isakmp policy 10"]),
    ])


def wpa_psk(passphrase: str, ssid: str) -> str:
    """The 256-bit PSK that ``wpa_passphrase`` derives (PBKDF2-HMAC-SHA1, 4096 rounds, SSID salt)."""
    return hashlib.pbkdf2_hmac("sha1", passphrase.encode(), ssid.encode(), 4096, 32).hex()


def s_wifi(i: int) -> Item:
    p, ssid = password(), RNG.choice(SSIDS)
    return pick(i, [
        lambda: (f'ctrl_interface=DIR=/var/run/wpa_supplicant GROUP=netdev\nupdate_config=1\ncountry=DE\n\nnetwork={{\n    ssid="{ssid}"\n    psk="{p}"\n    key_mgmt=WPA-PSK\n}}', [p], [f'ssid="{ssid}"', "key_mgmt=WPA-PSK"]),
        lambda: (f"$ wpa_passphrase {ssid} '{p}'\nnetwork={{\n\tssid=\"{ssid}\"\n\t#psk=\"{p}\"\n\tpsk={(h := wpa_psk(p, ssid))}\n}}", [p, h], [f'ssid="{ssid}"', "$ wpa_passphrase"]),
        lambda: (f"[connection]\nid={ssid}\ntype=wifi\n\n[wifi]\nmode=infrastructure\nssid={ssid}\n\n[wifi-security]\nkey-mgmt=wpa-psk\npsk={p}", [p], ["[wifi-security]", "key-mgmt=wpa-psk", "mode=infrastructure"]),
        lambda: (f"$ sudo nmcli -s -g 802-11-wireless-security.psk connection show {ssid}\n{p}", [p], ["-g 802-11-wireless-security.psk connection show"]),
        lambda: (f"$ nmcli device wifi connect {ssid} password {p}\nDevice 'wlan0' successfully activated with '{uid()}'.", [p], ["Device 'wlan0' successfully activated with", f"nmcli device wifi connect {ssid}"]),
        lambda: (f"interface=wlan0\nssid={ssid}\nhw_mode=g\nchannel=6\nwpa=2\nwpa_key_mgmt=WPA-PSK\nwpa_passphrase={p}\nrsn_pairwise=CCMP", [p], ["wpa_key_mgmt=WPA-PSK", "rsn_pairwise=CCMP"]),
        lambda: (f"[802-1x]\neap=peap;\nidentity=maria.lopez\npassword={p}\nphase2-auth=mschapv2", [p], ["eap=peap;", "phase2-auth=mschapv2"]),
    ])


def cisco_pw() -> str:
    return run(RNG.randrange(10, 16), AN + "!@#%-_.")


def s_cisco(i: int) -> Item:
    p, p2 = cisco_pw(), cisco_pw()
    e1, e2 = cisco7(p), cisco7(p2)
    return pick(i, [
        lambda: (f"hostname sw-core-01\n!\nusername netadmin privilege 15 password 0 {p}\nenable secret 0 {p2}\n!", [p, p2], ["hostname sw-core-01", "username netadmin privilege 15 password 0"]),
        lambda: (f"enable password 7 {e1}\n!\nusername ops password 7 {e2}\n!\nline vty 0 4\n login local\n transport input ssh", [e1, e2], ["line vty 0 4", " transport input ssh"]),
        lambda: (f"line con 0\n password 7 {e1}\n login\nline vty 0 15\n password 7 {e2}\n login", [e1, e2], ["line vty 0 15", "line con 0"]),
        lambda: (f"radius server ISE-01\n address ipv4 10.0.0.{RNG.randrange(2, 250)} auth-port 1812 acct-port 1813\n key 7 {e1}\n!\ntacacs server TAC-01\n address ipv4 10.0.0.{RNG.randrange(2, 250)}\n key 0 {p2}", [e1, p2], ["auth-port 1812 acct-port 1813", "tacacs server TAC-01"]),
        lambda: (f"interface GigabitEthernet0/1\n ip address 10.1.1.1 255.255.255.252\n ip ospf message-digest-key 1 md5 {p}\n ip ospf authentication message-digest", [p], ["interface GigabitEthernet0/1", " ip ospf authentication message-digest"]),
    ])


def s_snmp(i: int) -> Item:
    c, c2, a, x = run(RNG.randrange(10, 18)), run(RNG.randrange(10, 18)), password(), password()
    host = f"10.0.{RNG.randrange(0, 9)}.{RNG.randrange(1, 250)}"
    return pick(i, [
        lambda: (f"# /etc/snmp/snmpd.conf\nsysLocation    DC1 rack 14\nrocommunity {c} 10.0.0.0/8\nrwcommunity {c2} 127.0.0.1", [c, c2], ["sysLocation    DC1 rack 14", "# /etc/snmp/snmpd.conf"]),
        lambda: (f"$ snmpwalk -v2c -c {c} {host} 1.3.6.1.2.1.1\nSNMPv2-MIB::sysDescr.0 = STRING: Cisco IOS Software, C2960X Software, Version 15.2(7)E9\nSNMPv2-MIB::sysUpTime.0 = Timeticks: ({digits(9)}) 41 days", [c], ["SNMPv2-MIB::sysDescr.0 = STRING: Cisco IOS Software", f"{host} 1.3.6.1.2.1.1"]),
        lambda: (f'createUser netmon SHA "{a}" AES "{x}"\nrouser netmon priv', [a, x], ["rouser netmon priv", "createUser netmon SHA"]),
        lambda: (f"snmpget -v3 -l authPriv -u netmon -a SHA -A '{a}' -x AES -X '{x}' {host} sysUpTime.0", [a, x], ["-l authPriv -u netmon", "sysUpTime.0"]),
        lambda: (f"snmp-server community {c} RO 10\nsnmp-server location DC1\nsnmp-server host 10.0.0.{RNG.randrange(2, 250)} version 2c {c}", [c], ["snmp-server location DC1"]),
    ])


def s_radius(i: int) -> Item:
    s1, p = run(RNG.randrange(12, 24)), password()
    return pick(i, [
        lambda: (f"client vpn-gw {{\n\tipaddr = 10.0.0.{RNG.randrange(2, 250)}\n\tsecret = {s1}\n\tshortname = vpn\n\tnas_type = other\n}}", [s1], ["client vpn-gw {", "shortname = vpn"]),
        lambda: (f"$ radtest maria '{p}' 127.0.0.1 0 {s1}\nSent Access-Request Id {RNG.randrange(1, 255)} from 0.0.0.0:{RNG.randrange(30000, 60000)} to 127.0.0.1:1812 length 77\n\tUser-Name = \"maria\"\n\tUser-Password = \"{p}\"", [p, s1], ['User-Name = "maria"', "to 127.0.0.1:1812 length 77"]),
        lambda: (f"ieee8021x=1\nauth_server_addr=10.0.0.{RNG.randrange(2, 250)}\nauth_server_port=1812\nauth_server_shared_secret={s1}", [s1], ["auth_server_port=1812", "ieee8021x=1"]),
        lambda: (f"home_server ise01 {{\n\ttype = auth+acct\n\tipaddr = 10.0.0.{RNG.randrange(2, 250)}\n\tport = 1812\n\tsecret = {s1}\n}}", [s1], ["type = auth+acct", "home_server ise01 {"]),
    ])


def s_proxy(i: int) -> Item:
    p, k = alnum_password(), api_key()
    basic = b64(f"partner:{p}".encode())
    org = RNG.choice(ORGS)
    return pick(i, [
        lambda: (f"location /partner/ {{\n    proxy_pass https://api.{org}.com/;\n    proxy_set_header Authorization \"Basic {basic}\";\n    proxy_set_header Host api.{org}.com;\n}}", [basic], [f"proxy_pass https://api.{org}.com/;", "location /partner/ {"]),
        lambda: (f"    proxy_set_header X-Api-Key {k};\n    proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;", [k], ["proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;"]),
        lambda: (f"listen stats\n    bind :8404\n    stats enable\n    stats uri /stats\n    stats refresh 10s\n    stats auth admin:{p}", [p], ["stats uri /stats", "bind :8404"]),
        lambda: (f"userlist ops_users\n    user ops insecure-password {p}\n\nbackend admin\n    http-request auth unless {{ http_auth(ops_users) }}", [p], ["userlist ops_users", "http-request auth unless { http_auth(ops_users) }"]),
        lambda: (f'<Location "/billing">\n    ProxyPass "https://billing.internal/"\n    RequestHeader set Authorization "Bearer {k}"\n</Location>', [k], ['ProxyPass "https://billing.internal/"', '<Location "/billing">']),
        lambda: (f"cache_peer proxy.{org}.com parent 3128 0 no-query default login=squid:{p}\nnever_direct allow all", [p], ["never_direct allow all", "parent 3128 0 no-query default"]),
    ])


# -- protocol transcripts -----------------------------------------------------------------------------
def s_har(i: int) -> Item:
    t, sid, p, k = jwt(), run(32, LOW), alnum_password(), api_key()
    org = RNG.choice(ORGS)
    return pick(i, [
        lambda: (f'"request": {{\n  "method": "GET",\n  "url": "https://app.{org}.com/api/me",\n  "httpVersion": "HTTP/2",\n  "headers": [\n    {{"name": "accept", "value": "application/json"}},\n    {{"name": "authorization", "value": "Bearer {t}"}}\n  ],', [t], ['"httpVersion": "HTTP/2"', '{"name": "accept", "value": "application/json"}']),
        lambda: (f'"cookies": [\n  {{\n    "name": "sessionid",\n    "value": "{sid}",\n    "path": "/",\n    "domain": "app.{org}.com",\n    "httpOnly": true,\n    "secure": true\n  }}\n],', [sid], ['"name": "sessionid"', '"httpOnly": true']),
        lambda: (f'"postData": {{\n  "mimeType": "application/x-www-form-urlencoded",\n  "text": "username=maria&password={p}&remember=1",\n  "params": [\n    {{"name": "username", "value": "maria"}},\n    {{"name": "password", "value": "{p}"}}\n  ]\n}}', [p], ['"mimeType": "application/x-www-form-urlencoded"', '{"name": "username", "value": "maria"}']),
        lambda: (f'"response": {{\n  "status": 200,\n  "content": {{\n    "mimeType": "application/json",\n    "text": "{{\\"access_token\\":\\"{t}\\",\\"token_type\\":\\"Bearer\\",\\"expires_in\\":3600}}"\n  }}\n}}', [t], ['"status": 200', '"mimeType": "application/json"']),
        lambda: (f'{{"name": "x-api-key", "value": "{k}"}},\n{{"name": "user-agent", "value": "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"}}', [k], ['{"name": "user-agent"', "Chrome/131.0.0.0"]),
    ])


def s_browser_copy(i: int) -> Item:
    t, sid, k = jwt(), run(32, LOW), api_key()
    csrf = run(32, AN)
    org = RNG.choice(ORGS)
    return pick(i, [
        lambda: (f'fetch("https://app.{org}.com/api/orders?page=1", {{\n  "headers": {{\n    "accept": "application/json",\n    "authorization": "Bearer {t}",\n    "sec-fetch-mode": "cors"\n  }},\n  "body": null,\n  "method": "GET"\n}});', [t], ['"sec-fetch-mode": "cors"', '"method": "GET"']),
        lambda: (f"curl 'https://app.{org}.com/api/orders' \\\n  -H 'accept: application/json' \\\n  -b 'sessionid={sid}; csrftoken={csrf}' \\\n  -H 'referer: https://app.{org}.com/orders' \\\n  -H 'user-agent: Mozilla/5.0 (X11; Linux x86_64)'", [sid], ["-H 'accept: application/json'", f"-H 'referer: https://app.{org}.com/orders'"]),
        lambda: (f'$session = New-Object Microsoft.PowerShell.Commands.WebRequestSession\n$session.Cookies.Add((New-Object System.Net.Cookie("sessionid", "{sid}", "/", "app.{org}.com")))\nInvoke-WebRequest -UseBasicParsing -Uri "https://app.{org}.com/api/orders" `\n-WebSession $session', [sid], ["New-Object Microsoft.PowerShell.Commands.WebRequestSession", "-WebSession $session"]),
        lambda: (f'Invoke-WebRequest -UseBasicParsing -Uri "https://api.{org}.com/v1/reports" `\n-Headers @{{\n"authority"="api.{org}.com"\n  "x-api-key"="{k}"\n}} `\n-ContentType "application/json"', [k], ['-ContentType "application/json"', f'"authority"="api.{org}.com"']),
        lambda: (f'curl ^"https://app.{org}.com/api/me^" ^\n  -H ^"accept: */*^" ^\n  -H ^"authorization: Bearer {t}^"', [t], ['-H ^"accept: */*^" ^', f'curl ^"https://app.{org}.com/api/me^" ^']),
    ])


def s_smtp(i: int) -> Item:
    p, org = alnum_password(), RNG.choice(ORGS)
    user = f"alerts@{org}.com"
    plain = b64(f"\0{user}\0{p}".encode())
    login_user, login_pw = b64(user.encode()), b64(p.encode())
    return pick(i, [
        lambda: (f"EHLO build01\n250-smtp.{org}.com\n250-AUTH PLAIN LOGIN\n250 8BITMIME\nAUTH PLAIN {plain}\n235 2.7.0 Authentication successful", [plain], ["250-AUTH PLAIN LOGIN", "235 2.7.0 Authentication successful"]),
        lambda: (f" ~> AUTH LOGIN\n<~  334 VXNlcm5hbWU6\n ~> {login_user}\n<~  334 UGFzc3dvcmQ6\n ~> {login_pw}\n<~  235 2.7.0 Authentication successful", [login_pw], ["<~  334 VXNlcm5hbWU6", "<~  334 UGFzc3dvcmQ6"]),
        lambda: (f"send: 'ehlo [127.0.1.1]\\r\\n'\nreply: b'250-AUTH LOGIN PLAIN\\r\\n'\nsend: 'AUTH PLAIN {plain}\\r\\n'\nreply: b'235 2.7.0 Accepted\\r\\n'", [plain], ["reply: b'235 2.7.0 Accepted\\r\\n'", "send: 'ehlo [127.0.1.1]\\r\\n'"]),
        lambda: (f"$ swaks --to ops@{org}.com --server smtp.{org}.com:587 --tls --auth LOGIN --auth-user {user} --auth-password {p}\n=== Trying smtp.{org}.com:587...\n=== Connected to smtp.{org}.com.", [p], ["=== Trying smtp.", "--auth LOGIN --auth-user"]),
        lambda: (f"AUTH LOGIN\n334 VXNlcm5hbWU6\n{login_user}\n334 UGFzc3dvcmQ6\n{login_pw}\n235 Authentication succeeded", [login_pw], ["334 VXNlcm5hbWU6", "235 Authentication succeeded"]),
    ])


def s_imap_ftp(i: int) -> Item:
    p, org = alnum_password(), RNG.choice(ORGS)
    return pick(i, [
        lambda: (f"* OK [CAPABILITY IMAP4rev1 SASL-IR LOGIN-REFERRALS ID ENABLE IDLE AUTH=PLAIN] Dovecot ready.\na1 LOGIN maria@{org}.com {p}\na1 OK Logged in", [p], ["Dovecot ready.", "a1 OK Logged in"]),
        lambda: (f"< 220 (vsFTPd 3.0.5)\n> USER backup\n< 331 Please specify the password.\n> PASS {p}\n< 230 Login successful.\n> PWD", [p], ["< 331 Please specify the password.", "< 230 Login successful."]),
        lambda: (f"220 ProFTPD Server (ftp.{org}.com)\nUSER deploy\n331 Password required for deploy\nPASS {p}\n230 User deploy logged in", [p], ["331 Password required for deploy", "230 User deploy logged in"]),
        lambda: (f"+OK Dovecot ready.\nUSER maria\n+OK\nPASS {p}\n+OK Logged in.\nSTAT\n+OK 3 9216", [p], ["+OK Dovecot ready.", "+OK 3 9216"]),
        lambda: (f"> A001 CAPABILITY\n< * CAPABILITY IMAP4rev1 AUTH=PLAIN\n< A001 OK CAPABILITY completed\n> A002 LOGIN reports {p}\n< A002 OK LOGIN completed", [p], ["< A001 OK CAPABILITY completed", "< A002 OK LOGIN completed"]),
    ])


def s_redis(i: int) -> Item:
    p, p2 = alnum_password(), alnum_password()
    return pick(i, [
        lambda: (f"# /etc/redis/redis.conf\nbind 127.0.0.1 -::1\nport 6379\nrequirepass {p}\nmasterauth {p2}", [p, p2], ["bind 127.0.0.1 -::1", "# /etc/redis/redis.conf"]),
        lambda: (f"user default off\nuser worker on >{p} ~jobs:* &* +@list +@connection\nuser metrics on >{p2} ~* +info +ping", [p, p2], ["user default off", "~jobs:* &* +@list +@connection"]),
        lambda: (f"127.0.0.1:6379> AUTH worker {p}\nOK\n127.0.0.1:6379> LLEN jobs:pending\n(integer) {RNG.randrange(0, 500)}", [p], ["127.0.0.1:6379> LLEN jobs:pending"]),
        lambda: (f"sentinel monitor mymaster 10.0.5.{RNG.randrange(2, 250)} 6379 2\nsentinel auth-pass mymaster {p}\nsentinel down-after-milliseconds mymaster 5000", [p], ["sentinel down-after-milliseconds mymaster 5000"]),
    ])


def s_mqtt(i: int) -> Item:
    p = password()
    cid = f"sensor-{RNG.randrange(1, 999):03d}"
    return pick(i, [
        lambda: (f"MQ Telemetry Transport Protocol, Connect Command\n    Header Flags: 0x10, Message Type: Connect Command\n    Protocol Name: MQTT\n    Version: MQTT v3.1.1 (4)\n    Keep Alive: 60\n    Client ID: {cid}\n    User Name Length: 6\n    User Name: sensor\n    Password Length: {len(p)}\n    Password: {p}", [p], ["Version: MQTT v3.1.1 (4)", f"Client ID: {cid}"]),
        lambda: (f'client = mqtt.Client(client_id="{cid}")\nclient.username_pw_set("sensor", "{p}")\nclient.tls_set()\nclient.connect("broker.internal", 8883)', [p], ['client.connect("broker.internal", 8883)', "client.tls_set()"]),
        lambda: (f"connection cloud-bridge\naddress mqtt.{RNG.choice(ORGS)}.com:8883\nremote_username bridge-dc1\nremote_password {p}\ntopic telemetry/# out 1", [p], ["remote_username bridge-dc1", "topic telemetry/# out 1"]),
        lambda: (f"$ mosquitto_pub -h broker.internal -p 8883 -u sensor -P '{p}' -t 'site/1/temp' -m 21.5 -d\nClient {cid} sending CONNECT\nClient {cid} received CONNACK (0)", [p], [f"Client {cid} received CONNACK (0)", "-t 'site/1/temp' -m 21.5"]),
    ])


SECRET_FAMILIES: list[tuple[str, str, Callable[[int], Item], int]] = [
    ("code", "python-source", s_python, 7), ("code", "jvm-source", s_jvm, 6), ("code", "dotnet-source", s_dotnet, 5),
    ("code", "go-source", s_go, 5), ("code", "rust-source", s_rust, 4), ("code", "swift-source", s_swift, 4),
    ("code", "php-source", s_php, 6), ("code", "ruby-source", s_ruby, 5), ("code", "js-ts-source", s_js_ts, 6),
    ("code", "c-cpp-source", s_c_cpp, 6), ("code", "notebook-cell", s_notebook, 5), ("code", "test-fixture", s_fixture, 6),
    ("git", "git-diff", s_git_diff, 6), ("git", "git-log-show", s_git_log, 5), ("git", "merge-conflict", s_git_conflict, 4),
    ("git", "git-stash", s_git_stash, 4),
    ("log", "json-log", s_json_log, 5), ("log", "logfmt", s_logfmt, 5), ("log", "access-log", s_access_log, 5),
    ("log", "python-logging", s_pylogging, 4), ("log", "java-stacktrace", s_stacktrace, 4), ("log", "logcat", s_logcat, 4),
    ("process", "process-cmdline", s_ps, 6), ("process", "container-env", s_container_env, 5),
    ("process", "systemd-cron", s_systemd_cron, 6), ("process", "powershell", s_powershell, 5), ("process", "windows-cli", s_windows_cli, 7),
    ("infra", "terraform-state", s_terraform, 6), ("infra", "ansible-inventory", s_ansible, 5), ("infra", "hiera-pillar", s_hiera_pillar, 5),
    ("infra", "hashicorp-acl", s_hashicorp, 5), ("infra", "cluster-join", s_cluster_join, 6),
    ("network", "wireguard", s_wireguard, 5), ("network", "openvpn", s_openvpn, 5), ("network", "ipsec", s_ipsec, 4),
    ("network", "wifi", s_wifi, 7), ("network", "cisco-ios", s_cisco, 5), ("network", "snmp", s_snmp, 5),
    ("network", "radius", s_radius, 4), ("network", "proxy-config", s_proxy, 6),
    ("protocol", "har-file", s_har, 5), ("protocol", "browser-copy", s_browser_copy, 5), ("protocol", "smtp-auth", s_smtp, 5),
    ("protocol", "imap-pop-ftp", s_imap_ftp, 5), ("protocol", "redis-auth", s_redis, 4), ("protocol", "mqtt-connect", s_mqtt, 4),
]


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
            assert secrets and all(s and s in text for s in secrets), (family, text)
            assert all(k in text for k in keep), (family, keep, text)
            out.append({"id": f"ss{len(out):03d}", "where": where, "family": family, "text": text, "secrets": secrets,
                        "keep": [k for k in keep if k and not any(k in s or s in k for s in secrets)]})
            made += 1
    family_split(out, "system-secrets")
    return out


# -- identities -------------------------------------------------------------------------------------
Forms = list[Callable[[], str]]


def i_wireguard_public() -> Forms:
    pub, pub2 = wg_key(), wg_key()
    org = RNG.choice(ORGS)
    return [
        lambda: f"[Peer]\nPublicKey = {pub}\nEndpoint = vpn.{org}.com:51820\nAllowedIPs = 10.8.0.0/24",
        lambda: f"interface: wg0\n  public key: {pub}\n  private key: (hidden)\n  listening port: 51820\n\npeer: {pub2}\n  endpoint: 203.0.113.{RNG.randrange(2, 250)}:51820\n  allowed ips: 10.8.0.{RNG.randrange(2, 250)}/32\n  latest handshake: {RNG.randrange(2, 59)} seconds ago\n  transfer: {RNG.randrange(1, 900)}.{RNG.randrange(10, 99)} MiB received, {RNG.randrange(1, 90)}.{RNG.randrange(10, 99)} MiB sent",
        lambda: "umask 077\nwg genkey | tee /etc/wireguard/privatekey | wg pubkey > /etc/wireguard/publickey",
        lambda: f"$ cat /etc/wireguard/publickey\n{pub}",
        lambda: f"[Interface]\nAddress = 10.8.0.1/24\nListenPort = 51820\nPostUp = wg set %i private-key /etc/wireguard/%i.key\n\n[Peer]\nPublicKey = {pub}\nAllowedIPs = 10.8.0.{RNG.randrange(2, 250)}/32",
        lambda: f"$ sudo wg show wg0 peers\n{pub}\n{pub2}",
        lambda: f"$ sudo wg show wg0 latest-handshakes\n{pub}\t{1_801_000_000 + RNG.randrange(10**6)}",
        lambda: "wireguard.listen-port:                  51820\nwireguard.private-key:                  <hidden>\nwireguard.private-key-flags:            0 (none)",
        lambda: f"peers:\n  - name: laptop-maria\n    public_key: {pub}\n    allowed_ips: [10.8.0.{RNG.randrange(2, 250)}/32]",
    ]


def i_cluster_join() -> Forms:
    ca = "sha256:" + hexrun(64)
    nid = run(25, LOW)
    api = f"10.0.0.{RNG.randrange(2, 250)}:6443"
    return [
        lambda: f"--discovery-token-ca-cert-hash {ca}",
        lambda: f"kubeadm join {api} --token <token> --discovery-token-ca-cert-hash sha256:<hash>",
        lambda: f"$ openssl x509 -pubkey -in /etc/kubernetes/pki/ca.crt | openssl rsa -pubin -outform der 2>/dev/null | \\\n   openssl dgst -sha256 -hex | sed 's/^.* //'\n{ca[7:]}",
        lambda: f"ID                            HOSTNAME   STATUS    AVAILABILITY   MANAGER STATUS   ENGINE VERSION\n{nid} *   mgr01      Ready     Active         Leader           27.{RNG.randrange(0, 5)}.{RNG.randrange(0, 9)}\n{run(25, LOW)}     worker01   Ready     Active                          27.{RNG.randrange(0, 5)}.{RNG.randrange(0, 9)}",
        lambda: f"NAME       STATUS   ROLES           AGE   VERSION\ncp-01      Ready    control-plane   {RNG.randrange(2, 300)}d   v1.3{RNG.randrange(0, 3)}.{RNG.randrange(0, 9)}\nworker-01  Ready    <none>          {RNG.randrange(2, 300)}d   v1.3{RNG.randrange(0, 3)}.{RNG.randrange(0, 9)}",
        lambda: f"k3s agent --server https://{api} --token-file /var/lib/rancher/k3s/server/token",
        lambda: f"discovery:\n  bootstrapToken:\n    apiServerEndpoint: {api}\n    caCertHashes:\n      - {ca}\n    token: ${{KUBEADM_TOKEN}}",
        lambda: f"$ docker node inspect self --format '{{{{ .ID }}}}'\n{nid}",
        lambda: f"[upload-certs] Using certificate key:\n<certificate-key>\n[mark-control-plane] Marking the node cp-0{RNG.randrange(1, 4)} as control-plane",
        lambda: "This node has joined the cluster:\n* Certificate signing request was sent to apiserver and a response was received.\n* The Kubelet was informed of the new secure connection details.",
    ]


def i_git() -> Forms:
    a, b, c = short_sha(), short_sha(), sha1()
    return [
        lambda: f"diff --git a/src/db.py b/src/db.py\nindex {a}..{b} 100644\n--- a/src/db.py\n+++ b/src/db.py",
        lambda: f"commit {c}\nMerge: {a} {b}\n{author()}\n\n    Merge branch 'rotate-db-credentials'",
        lambda: "\n".join(f"{short_sha()} {m}" for m in RNG.sample(["fix: read DB password from env", "chore: drop hardcoded token", "feat(vpn): add wireguard peer", "ci: mask secrets in logs", "refactor: move creds to vault", "docs: document SNMP community setup"], 3)),
        lambda: f"$ git rev-parse HEAD\n{c}",
        lambda: f"stash@{{0}}: WIP on main: {a} read SMTP password from env\nstash@{{1}}: On feature/vpn: {b} wireguard config",
        lambda: f"diff --git a/config/settings.py b/config/settings.py\nindex {a}..{b} 100644\n@@ -14,3 +14,3 @@\n-        \"PASSWORD\": os.getenv(\"PGPASSWORD\"),\n+        \"PASSWORD\": os.environ[\"DB_PASSWORD\"],",
        lambda: f"{c} refs/remotes/origin/main\n{sha1()} refs/tags/v{RNG.randrange(1, 4)}.{RNG.randrange(0, 20)}.0",
        lambda: f"dangling blob {c}\ndangling commit {sha1()}",
        lambda: f"100644 blob {c}\t.env.example\n100644 blob {sha1()}\tdocker-compose.yml\n040000 tree {sha1()}\tsecrets",
        lambda: f"{a} HEAD@{{0}}: commit: remove leaked token\n{b} HEAD@{{1}}: checkout: moving from main to fix/leak",
        lambda: f"^{a} (Maria Lopez 2027-02-03 10:12:44 +0100 12)     password = os.environ[\"DB_PASSWORD\"]",
        lambda: f"index {a},{b}..{short_sha()}\n@@@ -1,3 -1,3 +1,3 @@@\n  [mail]\n- password = ${{SMTP_PASSWORD}}\n -password = ${{MAIL_PASSWORD}}\n++password = ${{SMTP_PASSWORD}}",
    ]


def i_ssh_host() -> Forms:
    fp, host = ssh_fp(), f"{RNG.choice(['git', 'bastion', 'build01', 'nas01'])}.{RNG.choice(ORGS)}.com"
    ed, ec = ssh_pub("ssh-ed25519"), ssh_pub("ecdsa-sha2-nistp256")
    return [
        lambda: f"The authenticity of host '{host} (10.0.{RNG.randrange(0, 9)}.{RNG.randrange(2, 250)})' can't be established.\nED25519 key fingerprint is {fp}.\nThis key is not known by any other names.",
        lambda: f"{host} ssh-ed25519 {ed}",
        lambda: f"|1|{b64bytes(20)}|{b64bytes(20)} ecdsa-sha2-nistp256 {ec}",
        lambda: f"$ ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub\n256 {fp} root@{host} (ED25519)",
        lambda: f"$ ssh-keyscan -t ed25519 {host}\n# {host}:22 SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13.5\n{host} ssh-ed25519 {ed}",
        lambda: f"ssh-ed25519 {ed} maria@laptop",
        lambda: f"{host}. IN SSHFP 4 2 {hexrun(64)}",
        lambda: f"Warning: Permanently added '{host}' (ED25519) to the list of known hosts.",
        lambda: f"debug1: Server host key: ssh-ed25519 {fp}\ndebug1: Host '{host}' is known and matches the ED25519 host key.",
        lambda: f"@cert-authority *.{RNG.choice(ORGS)}.com ssh-ed25519 {ed}",
    ]


def i_certificate() -> Forms:
    org = RNG.choice(ORGS)
    return [
        lambda: f"$ openssl x509 -noout -serial -fingerprint -sha256 -in server.crt\nserial={hexrun(32).upper()}\nsha256 Fingerprint={colon_hex(32)}",
        lambda: f"        Serial Number:\n            {':'.join(f'{b:02x}' for b in RNG.randbytes(16))}\n        Signature Algorithm: sha256WithRSAEncryption\n        Issuer: C=US, O=Let's Encrypt, CN=R11",
        lambda: f"Alias name: {org}-release\nCreation date: Feb {RNG.randrange(1, 28)}, 2027\nEntry type: PrivateKeyEntry\nCertificate fingerprints:\n\t SHA1: {colon_hex(20)}\n\t SHA256: {colon_hex(32)}",
        lambda: f"            X509v3 Subject Key Identifier:\n                {colon_hex(20)}\n            X509v3 Authority Key Identifier:\n                {colon_hex(20)}",
        lambda: f"Certificate Name: api.{org}.com\n    Serial Number: {hexrun(36).lstrip('0')}\n    Key Type: ECDSA\n    Expiry Date: 2027-05-{RNG.randrange(1, 28):02d} 08:11:02+00:00 (VALID: {RNG.randrange(10, 89)} days)",
        lambda: f"Thumbprint                                Subject\n----------                                -------\n{hexrun(40).upper()}  CN=*.{org}.com",
        lambda: f"status:\n  conditions:\n  - message: Certificate is up to date and has not expired\n    reason: Ready\n  notAfter: \"2027-05-{RNG.randrange(1, 28):02d}T08:11:02Z\"\n  revision: {RNG.randrange(1, 30)}",
        lambda: f"pin-sha256=\"{b64bytes(32)}\"",
        lambda: f"Verify return code: 0 (ok)\n---\nSSL-Session:\n    Protocol  : TLSv1.3\n    Cipher    : TLS_AES_256_GCM_SHA384\n    Session-ID: {hexrun(64).upper()}",
        lambda: f"  Authority Information Access:\n      OCSP - URI:http://r11.o.lencr.org\n  CT Precertificate SCTs:\n      Log ID    : {colon_hex(32)}",
    ]


def i_checksum() -> Forms:
    ver = f"{RNG.randrange(1, 4)}.{RNG.randrange(0, 20)}.{RNG.randrange(0, 9)}"
    tool = RNG.choice(["terraform", "nomad", "consul", "helm", "kubectl", "k3s"])
    return [
        lambda: f"{hexrun(64)}  {tool}_{ver}_linux_amd64.zip\n{hexrun(64)}  {tool}_{ver}_darwin_arm64.zip",
        lambda: f"SHA256 ({tool}-{ver}.tar.gz) = {hexrun(64)}",
        lambda: f"$ sha256sum -c {tool}_{ver}_SHA256SUMS --ignore-missing\n{tool}_{ver}_linux_amd64.zip: OK",
        lambda: f'  url "https://github.com/{RNG.choice(ORGS)}/{tool}/archive/refs/tags/v{ver}.tar.gz"\n  sha256 "{hexrun(64)}"',
        lambda: f"sha256sums=('{hexrun(64)}'\n            'SKIP')",
        lambda: f"Algorithm       Hash                                                                   Path\n---------       ----                                                                   ----\nSHA256          {hexrun(64).upper()}       C:\\Downloads\\{tool}-{ver}.msi",
        lambda: f"ARG {tool.upper()}_VERSION={ver}\nARG {tool.upper()}_SHA256={hexrun(64)}\nRUN echo \"${{{tool.upper()}_SHA256}}  /tmp/{tool}.tgz\" | sha256sum -c -",
        lambda: f"SHA256:\n {hexrun(64)}  {RNG.randrange(10**5, 10**7)} main/binary-amd64/Packages\n {hexrun(64)}  {RNG.randrange(10**4, 10**6)} main/binary-amd64/Packages.gz",
        lambda: f'  hash = "sha256-{b64bytes(32)}";',
        lambda: f"gpg: Good signature from \"HashiCorp Security (HashiCorp Package Signing) <security+packaging@hashicorp.com>\"\nPrimary key fingerprint: {' '.join(hexrun(4).upper() for _ in range(5))}  {' '.join(hexrun(4).upper() for _ in range(5))}",
        lambda: f"{tool}-{ver}-1.x86_64.rpm: digests signatures OK",
    ]


def i_terraform_ids() -> Forms:
    lineage = uid()
    return [
        lambda: f'{{\n  "version": 4,\n  "terraform_version": "1.{RNG.randrange(5, 10)}.{RNG.randrange(0, 8)}",\n  "serial": {RNG.randrange(1, 400)},\n  "lineage": "{lineage}",\n  "outputs": {{}},',
        lambda: "$ terraform state list\naws_db_instance.orders\naws_security_group.db\nmodule.vpc.aws_subnet.private[0]\nrandom_password.db",
        lambda: f"# aws_db_instance.orders:\nresource \"aws_db_instance\" \"orders\" {{\n    arn        = \"arn:aws:rds:eu-west-1:{digits(12)}:db:orders-prod\"\n    identifier = \"orders-prod\"\n    password   = (sensitive value)\n    username   = \"orders\"\n}}",
        lambda: f"$ terraform import aws_instance.bastion {(iid := 'i-0' + hexrun(16))}\naws_instance.bastion: Importing from ID \"{iid}\"...",
        lambda: "  + resource \"random_password\" \"db\" {\n      + id          = (known after apply)\n      + length      = 32\n      + result      = (sensitive value)\n      + special     = true\n    }",
        lambda: '          "sensitive_attributes": [[{"type": "get_attr", "value": "password"}]],',
        lambda: f'"db_password": {{\n  "sensitive": true,\n  "type": "string"\n}},\n"db_endpoint": {{\n  "value": "orders-prod.{run(12, LOW)}.eu-west-1.rds.amazonaws.com:5432"\n}}',
        lambda: "$ terraform output\ndb_endpoint = \"orders-prod.cluster-ro.eu-west-1.rds.amazonaws.com\"\ndb_password = <sensitive>",
        lambda: f'terraform {{\n  backend "s3" {{\n    bucket         = "{RNG.choice(ORGS)}-tfstate"\n    key            = "prod/network/terraform.tfstate"\n    dynamodb_table = "tf-locks"\n  }}\n}}',
        lambda: f"Acquiring state lock. This may take a few moments...\nLock Info:\n  ID:        {uid()}\n  Path:      {RNG.choice(ORGS)}-tfstate/prod/network/terraform.tfstate\n  Operation: OperationTypeApply",
        lambda: f'            "id": "sg-0{hexrun(16)}",\n            "vpc_id": "vpc-0{hexrun(16)}",',
    ]


def i_aws_ids() -> Forms:
    acct, region = digits(12), RNG.choice(["eu-west-1", "us-east-1", "ap-southeast-2", "eu-central-1"])
    return [
        lambda: f"i-0{hexrun(16)}",
        lambda: f'"InstanceId": "i-0{hexrun(16)}",\n"ImageId": "ami-0{hexrun(16)}",\n"SubnetId": "subnet-0{hexrun(16)}",\n"VpcId": "vpc-0{hexrun(16)}",',
        lambda: f"arn:aws:iam::{acct}:role/{RNG.choice(PROJECTS)}-task-role",
        lambda: f"arn:aws:secretsmanager:{region}:{acct}:secret:prod/{RNG.choice(PROJECTS)}/db-{run(6)}",
        lambda: f"$ aws ec2 describe-security-groups --group-ids sg-0{hexrun(16)} --query 'SecurityGroups[].IpPermissions[].FromPort'\n[\n    5432,\n    443\n]",
        lambda: f"{{\n    \"UserId\": \"AROA{run(17, string.ascii_uppercase + '234567')}:{RNG.choice(USERS)}\",\n    \"Account\": \"{acct}\",\n    \"Arn\": \"arn:aws:sts::{acct}:assumed-role/Admin/{RNG.choice(USERS)}\"\n}}",
        lambda: f"eni-0{hexrun(16)}  vol-0{hexrun(16)}  snap-0{hexrun(16)}",
        lambda: f"{acct}.dkr.ecr.{region}.amazonaws.com/{RNG.choice(PROJECTS)}:{hexrun(7)}",
        lambda: f'"valueFrom": "arn:aws:ssm:{region}:{acct}:parameter/prod/{RNG.choice(PROJECTS)}/DB_PASSWORD"',
        lambda: f"x-amz-request-id: {run(16, UP)}\nx-amz-id-2: {b64bytes(54)}",
        lambda: f"arn:aws:kms:{region}:{acct}:key/{uid()}",
        lambda: f"https://{run(10, LOW)}.execute-api.{region}.amazonaws.com/prod/orders",
    ]


def i_azure_gcp() -> Forms:
    sub, rg = uid(), f"rg-{RNG.choice(PROJECTS)}-prod"
    gproj, gnum = f"{RNG.choice(PROJECTS)}-{digits(6)}", digits(12)
    return [
        lambda: f"/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachines/vm-{RNG.choice(PROJECTS)}-01",
        lambda: f"/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.KeyVault/vaults/kv-{RNG.choice(ORGS)}-prod",
        lambda: f'{{\n  "environmentName": "AzureCloud",\n  "id": "{sub}",\n  "isDefault": true,\n  "name": "{RNG.choice(ORGS).title()} Production",\n  "tenantId": "{uid()}"\n}}',
        lambda: f"projectId: {gproj}\nprojectNumber: '{gnum}'\nlifecycleState: ACTIVE",
        lambda: f"{gnum}-compute@developer.gserviceaccount.com",
        lambda: f"deployer@{gproj}.iam.gserviceaccount.com",
        lambda: f"projects/{gnum}/locations/europe-west1/services/{RNG.choice(PROJECTS)}",
        lambda: f"id: '{digits(19)}'\nname: {RNG.choice(PROJECTS)}-vm-1\nselfLink: https://www.googleapis.com/compute/v1/projects/{gproj}/zones/europe-west1-b/instances/{RNG.choice(PROJECTS)}-vm-1",
        lambda: f"\"principalId\": \"{uid()}\",\n\"clientId\": \"{uid()}\",\n\"type\": \"SystemAssigned\"",
        lambda: f"x-ms-request-id: {uid()}\nx-ms-correlation-request-id: {uid()}",
        lambda: f"https://kv-{RNG.choice(ORGS)}-prod.vault.azure.net/secrets/db-password/{hexrun(32)}",
        lambda: f"gcloud compute instances list --project {gproj} --filter='labels.env=prod'",
    ]


def i_container_pod() -> Forms:
    app = RNG.choice(PROJECTS)
    return [
        lambda: f"CONTAINER ID   IMAGE                 COMMAND                  STATUS\n{hexrun(12)}   postgres:16           \"docker-entrypoint.s…\"   Up 3 hours\n{hexrun(12)}   redis:7-alpine        \"docker-entrypoint.s…\"   Up 3 hours",
        lambda: f"NAME                                READY   STATUS    RESTARTS   AGE\n{pod_name(app)}   1/1     Running   0          {RNG.randrange(1, 40)}h\n{pod_name(app)}   1/1     Running   1          {RNG.randrange(1, 40)}h",
        lambda: f"$ docker inspect --format '{{{{.Id}}}}' {app}\n{hexrun(64)}",
        lambda: f"{app}-{RNG.randrange(0, 5)}   2/2   Running   0   {RNG.randrange(2, 20)}d",
        lambda: f"CONTAINER           IMAGE               CREATED             STATE     NAME   ATTEMPT   POD ID\n{hexrun(13)}       {hexrun(13)}       {RNG.randrange(2, 50)} minutes ago      Running   api    0         {hexrun(13)}",
        lambda: f"containerd://{hexrun(64)}",
        lambda: f"Events:\n  Normal  Scheduled  {RNG.randrange(2, 59)}s   default-scheduler  Successfully assigned prod/{pod_name(app)} to ip-10-0-{RNG.randrange(0, 255)}-{RNG.randrange(0, 255)}.eu-west-1.compute.internal",
        lambda: f"job-{app}-{digits(8)}-{run(5, 'bcdfghjklmnpqrstvwxz2456789')}   0/1   Completed   0   {RNG.randrange(2, 59)}m",
        lambda: f"Image ID: docker.io/library/{RNG.choice(['nginx', 'redis', 'postgres'])}@sha256:{hexrun(64)}",
        lambda: f"{app}-{RNG.randrange(1, 4)}  | {ts()} INFO listening on :8080",
        lambda: f"/docker/{hexrun(64)}/merged",
        lambda: f"pod/{pod_name(app)} condition met",
    ]


def i_process_safe() -> Forms:
    pid = RNG.randrange(300, 60000)
    return [
        lambda: f"{PS_HEAD}\n{ps_line('postgres', 'postgres: 16/main: checkpointer')}\n{ps_line('redis', '/usr/bin/redis-server 127.0.0.1:6379')}",
        lambda: f"$ pgrep -a nginx\n{pid} nginx: master process /usr/sbin/nginx -g daemon on; master_process on;\n{pid + 1} nginx: worker process",
        lambda: f"$ tr '\\0' ' ' < /proc/{pid}/cmdline; echo\n/usr/bin/vault server -config=/etc/vault.d/vault.hcl",
        lambda: f"● {RNG.choice(PROJECTS)}.service - API server\n     Loaded: loaded (/etc/systemd/system/{RNG.choice(PROJECTS)}.service; enabled; preset: enabled)\n     Active: active (running) since Mon 2027-02-0{RNG.randrange(1, 9)} 09:14:02 UTC; 2h ago\n   Main PID: {pid} (node)\n      Tasks: 11 (limit: 9387)",
        lambda: f"State   Recv-Q  Send-Q  Local Address:Port  Peer Address:Port  Process\nLISTEN  0       511     0.0.0.0:443         0.0.0.0:*          users:((\"nginx\",pid={pid},fd=6))",
        lambda: f"{ps_line('app', 'java -Xmx2g -Dspring.config.location=/etc/orders/ -jar /opt/orders/orders.jar')}",
        lambda: f"$ pgrep -a openvpn\n{pid} /usr/sbin/openvpn --config /etc/openvpn/client/office.conf --auth-user-pass /etc/openvpn/client/auth.txt",
        lambda: f"{pid} docker login --username ci --password-stdin registry.{RNG.choice(ORGS)}.com",
        lambda: f"Name:\tmysqld\nUmask:\t0027\nState:\tS (sleeping)\nTgid:\t{pid}\nPid:\t{pid}\nPPid:\t1",
        lambda: f"{ps_line('mysql', '/usr/sbin/mysqld --defaults-file=/etc/mysql/my.cnf --user=mysql')}",
        lambda: f"COMMAND   PID USER   FD   TYPE DEVICE SIZE/OFF    NODE NAME\nnode    {pid} app    23u  IPv4 {digits(6)}      0t0     TCP *:3000 (LISTEN)",
        lambda: f"{pid} /usr/bin/mongod --config /etc/mongod.conf --keyFile /etc/mongo/keyfile",
    ]


def i_trace_log() -> Forms:
    tid, sid = hexrun(32), hexrun(16)
    org = RNG.choice(ORGS)
    return [
        lambda: f"traceparent: 00-{tid}-{sid}-01",
        lambda: json.dumps({"level": "info", "ts": ts(), "msg": "request completed", "trace_id": tid, "span_id": sid, "status": 200, "duration_ms": RNG.randrange(2, 900)}),
        lambda: f'time={ts()} level=info msg="job finished" job=reindex request_id={uid()} duration={RNG.randrange(1, 90)}.{RNG.randrange(100, 999)}s',
        lambda: f'{ip()} - - [{clf_time()}] "GET /api/orders?page=2&sort=created_at HTTP/1.1" 200 {RNG.randrange(200, 90000)} "-" "Mozilla/5.0" rid={hexrun(32)}',
        lambda: f"X-Amzn-Trace-Id: Root=1-{hexrun(8)}-{hexrun(24)};Parent={hexrun(16)};Sampled=1",
        lambda: f"X-Request-ID: {uid()}\nX-Correlation-ID: {uid()}",
        lambda: f"{ts()} ERROR [orders-api,{tid},{sid}] c.n.orders.OrderService : order {RNG.randrange(10**5, 10**6)} not found",
        lambda: "Caused by: com.mongodb.MongoSecurityException: Exception authenticating MongoCredential{mechanism=SCRAM-SHA-256, userName='orders', source='admin', password=<hidden>, mechanismProperties=<hidden>}",
        lambda: f"02-{RNG.randrange(1, 28):02d} 10:{RNG.randrange(10, 59)}:{RNG.randrange(10, 59)}.{RNG.randrange(100, 999)} {RNG.randrange(2000, 30000):5d} {RNG.randrange(2000, 30000):5d} D OkHttp  : <-- 200 https://api.{org}.com/v1/profile ({RNG.randrange(20, 900)}ms)",
        lambda: f"dd.trace_id={digits(19)} dd.span_id={digits(19)} dd.service=billing-worker",
        lambda: f"INFO:uvicorn.access:10.0.{RNG.randrange(0, 9)}.{RNG.randrange(2, 250)}:{RNG.randrange(30000, 60000)} - \"POST /v1/webhooks HTTP/1.1\" 204",
        lambda: f"[{ts()}] \"GET /healthz HTTP/1.1\" 200 - \"kube-probe/1.31\" x_forwarded_for=\"-\" upstream_service_time=\"1\" request_id=\"{uid()}\"",
    ]


def i_mac_ipv6() -> Forms:
    m = mac()
    return [
        lambda: f"2: eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc mq state UP mode DEFAULT group default qlen 1000\n    link/ether {m} brd ff:ff:ff:ff:ff:ff",
        lambda: f"    inet6 {ipv6()}/64 scope global dynamic mngtmpaddr\n    inet6 fe80::{RNG.randrange(1, 0xffff):x}:{RNG.randrange(1, 0xff):x}ff:fe{RNG.randrange(1, 0xff):02x}:{RNG.randrange(1, 0xffff):x}/64 scope link",
        lambda: f"? (10.0.0.{RNG.randrange(2, 250)}) at {m} [ether] on eth0",
        lambda: f"lease 10.0.0.{RNG.randrange(2, 250)} {{\n  starts 3 2027/02/03 09:14:02;\n  hardware ethernet {m};\n  client-hostname \"scanner-0{RNG.randrange(1, 9)}\";\n}}",
        lambda: f"GENERAL.HWADDR:                         {m.upper()}",
        lambda: f"Physical Address    Transport Name\n=================== ==========================================================\n{m.upper().replace(':', '-')}   \\Device\\Tcpip_{{{uid().upper()}}}",
        lambda: f"host scanner-0{RNG.randrange(1, 9)} {{ hardware ethernet {m}; fixed-address 10.0.0.{RNG.randrange(2, 250)}; }}",
        lambda: f"{ipv6()} dev eth0 lladdr {m} REACHABLE",
        lambda: f"Device {m.upper()} Keyboard K380",
        lambda: f"AAAA {ipv6()}",
        lambda: f"{m.replace(':', '')[:4]}.{m.replace(':', '')[4:8]}.{m.replace(':', '')[8:]}    DYNAMIC     Gi0/{RNG.randrange(1, 48)}",
    ]


def i_base64_public() -> Forms:
    cert_body = "\n".join(b64bytes(48) for _ in range(6))
    return [
        lambda: f"    certificate-authority-data: {b64(('-----BEGIN CERTIFICATE-----' + chr(10) + cert_body + chr(10) + '-----END CERTIFICATE-----' + chr(10)).encode())[:180]}...",
        lambda: f"binaryData:\n  logo.png: iVBORw0KGgoAAAANSUhEUgAA{run(60, B64)}",
        lambda: f"$ echo {b64(('#cloud-config' + chr(10) + 'packages: [nginx, jq]' + chr(10)).encode())} | base64 -d\n#cloud-config\npackages: [nginx, jq]",
        lambda: f"data:\n  nginx.conf: {b64(('server { listen 80; server_name ' + RNG.choice(ORGS) + '.com; }').encode())}",
        lambda: f"<img src=\"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAABAAAAAQ{run(40, B64)}\">",
        lambda: f'"user_data": "{b64(("#!/bin/bash" + chr(10) + "apt-get update && apt-get install -y nginx" + chr(10)).encode())}"',
        lambda: f"334 {b64(b'Username:')}\n334 {b64(b'Password:')}",
        lambda: f"X-Goog-Hash: crc32c={b64(RNG.randbytes(4))}, md5={b64(RNG.randbytes(16))}",
        lambda: f"Content-MD5: {b64(RNG.randbytes(16))}",
        lambda: f'"ETag": "\\"{b64(RNG.randbytes(16))}\\""',
        lambda: f"$ echo -n '{(doc := json.dumps({'env': 'prod', 'region': RNG.choice(['eu-west-1', 'us-east-1']), 'replicas': RNG.randrange(2, 9)}))}' | base64\n{b64(doc.encode())}",
        lambda: f"Sec-WebSocket-Key: {b64(RNG.randbytes(16))}\nSec-WebSocket-Version: 13",
    ]


def i_env_names() -> Forms:
    ks = RNG.sample(NAMES, 3)
    return [
        lambda: "$ printenv | cut -d= -f1 | grep -E 'PASS|TOKEN|KEY'\n" + "\n".join(ks),
        lambda: f"unset {' '.join(ks)}",
        lambda: f"[Service]\nPassEnvironment={' '.join(ks)}",
        lambda: f"docker run --rm -e {ks[0]} -e {ks[1]} {RNG.choice(PROJECTS)}:latest",
        lambda: f"Defaults env_keep += \"{ks[0]} {ks[1]}\"",
        lambda: "$ compgen -e | grep -i pass\n" + "\n".join(k for k in ks),
        lambda: f"(Get-ChildItem Env:).Name | Select-String -Pattern 'PASS|TOKEN|SECRET|KEY|COMMUNITY|PW'\n\n{ks[0]}\n{ks[1]}",
        lambda: f"sudo --preserve-env={ks[0]},{ks[1]} ./deploy.sh",
        lambda: f"env -u {ks[0]} -u {ks[1]} ./run-tests.sh",
        lambda: "required variables: " + ", ".join(ks),
        lambda: f"ssh -o SendEnv={ks[0]} deploy@bastion",
        lambda: f"      - name: {ks[0]}\n        valueFrom:\n          secretKeyRef:\n            name: {RNG.choice(PROJECTS)}-secrets\n            key: {ks[0].lower().replace('_', '-')}",
    ]


def i_systemd_safe() -> Forms:
    svc = RNG.choice(PROJECTS)
    return [
        lambda: f'[Service]\nUser=app\nEnvironment="NODE_ENV=production" "PORT={RNG.choice([3000, 8080, 8000])}"\nEnvironmentFile=/etc/{svc}/env\nExecStart=/usr/bin/node /srv/{svc}/server.js',
        lambda: f"[Service]\nLoadCredential=db-password:/etc/credstore/{svc}.db-password\nEnvironment=DB_PASSWORD_FILE=%d/db-password",
        lambda: f"$ systemctl show {svc}.service -p Environment\nEnvironment=LOG_LEVEL=info PORT=8080 GOMAXPROCS=2",
        lambda: f"Environment=JAVA_OPTS=-Xmx{RNG.choice([512, 1024, 2048])}m\nEnvironment=SPRING_PROFILES_ACTIVE=prod",
        lambda: f"$ systemctl show {svc}.service -p EnvironmentFiles\nEnvironmentFiles=/etc/default/{svc} (ignore_errors=no)",
        lambda: f"# /etc/cron.d/{svc}\nMAILTO=ops@{RNG.choice(ORGS)}.com\n{RNG.randrange(0, 59)} 3 * * * app /srv/{svc}/bin/cleanup --older-than 30d",
        lambda: f"[Timer]\nOnCalendar=*-*-* 02:30:00\nPersistent=true\nUnit={svc}-backup.service",
        lambda: f"Environment=\"PGPASSFILE=/etc/{svc}/pgpass\" \"PGHOST=db01.corp.internal\"",
        lambda: f"$ systemd-creds encrypt --name=db-password plaintext.txt /etc/credstore.encrypted/{svc}.db-password\n$ systemctl edit {svc}",
        lambda: f"ExecStartPre=/usr/bin/install -d -m 0750 -o app /run/{svc}\nRuntimeDirectory={svc}\nStateDirectory={svc}",
        lambda: "Environment=TZ=UTC LANG=C.UTF-8 PYTHONUNBUFFERED=1",
    ]


def i_reference() -> Forms:
    k, svc = RNG.choice(NAMES), RNG.choice(PROJECTS)
    return [
        lambda: f"password: ${{{{ secrets.{k} }}}}",
        lambda: f"export {k}=\"$(cat /run/secrets/{k.lower()})\"",
        lambda: f"{k}: vault:secret/data/{svc}/db#password",
        lambda: f"{k}=ref+awssecrets://prod/{svc}/db#/password",
        lambda: f"{k}=sm://{RNG.choice(ORGS)}-prod/{svc}-{k.lower().replace('_', '-')}",
        lambda: f"@Microsoft.KeyVault(SecretUri=https://kv-{RNG.choice(ORGS)}.vault.azure.net/secrets/{k.replace('_', '-')}/)",
        lambda: f"ansible_password: \"{{{{ vault_{k.lower()} }}}}\"",
        lambda: "password => lookup('profile::db::password'),",
        lambda: f"spring.datasource.password=${{{k}:?{k} is required}}",
        lambda: f"PrivateKey = $(cat /etc/wireguard/{RNG.choice(['wg0', 'wg1'])}.key)",
        lambda: "{{ pillar['mysql']['server']['root_password'] }}",
        lambda: f"secret = ${{file:/run/secrets/radius_{RNG.choice(['vpn', 'wifi'])}}}",
        lambda: f"\"valueFrom\": \"arn:aws:secretsmanager:eu-west-1:{digits(12)}:secret:prod/{svc}-{run(6)}:password::\"",
    ]


def i_placeholder() -> Forms:
    org = RNG.choice(ORGS)
    return [
        lambda: "curl -H \"Authorization: Bearer <your-token>\" https://api." + org + ".com/v1/me",
        lambda: "define( 'AUTH_KEY',         'put your unique phrase here' );\ndefine( 'SECURE_AUTH_KEY',  'put your unique phrase here' );",
        lambda: "define( 'DB_PASSWORD', 'password_here' );",
        lambda: "[Interface]\nPrivateKey = <client-private-key>\nAddress = 10.8.0.2/24\n\n[Peer]\nPublicKey = <server-public-key>",
        lambda: "network={\n    ssid=\"<your-ssid>\"\n    psk=\"<your-passphrase>\"\n}",
        lambda: f"API_KEY=YOUR_API_KEY_HERE\nAPI_URL=https://api.{org}.com",
        lambda: "kubeadm join <control-plane-host>:<control-plane-port> --token <token> --discovery-token-ca-cert-hash sha256:<hash>",
        lambda: "docker swarm join --token <worker-token> <manager-ip>:2377",
        lambda: "net use \\\\<server>\\<share> /user:<domain>\\<user> <password>",
        lambda: "snmpwalk -v2c -c <community> <host> system",
        lambda: "AUTH PLAIN <base64 of \\0user\\0password>\nAUTH LOGIN",
        lambda: "client = Client(api_key=\"...\")",
        lambda: "ansible_password: REPLACE_ME\nansible_become_pass: REPLACE_ME",
    ]


def i_masked() -> Forms:
    return [
        lambda: f'{RNG.randrange(1_801_000_000, 1_802_000_000)}.{digits(6)} [0 10.0.{RNG.randrange(0, 9)}.{RNG.randrange(2, 250)}:{RNG.randrange(30000, 60000)}] "AUTH" "(redacted)"',
        lambda: f'Mon Feb  {RNG.randrange(1, 9)} 10:{RNG.randrange(10, 59)}:{RNG.randrange(10, 59)} 2027 [pid {RNG.randrange(300, 60000)}] FTP command: Client "::ffff:10.0.{RNG.randrange(0, 9)}.{RNG.randrange(2, 250)}", "PASS <password>"',
        lambda: "*cmd* 'USER backup'\n*resp* '331 Please specify the password.'\n*cmd* 'PASS ********'",
        lambda: "  private key: (hidden)\n  preshared key: (hidden)",
        lambda: "802-11-wireless-security.psk:           <hidden>",
        lambda: f"Name:         {RNG.choice(PROJECTS)}-db\nType:  Opaque\nData\n====\npassword:  {RNG.randrange(12, 40)} bytes",
        lambda: "    password   = (sensitive value)",
        lambda: "DB_PASSWORD: ****",
        lambda: "Currently stored credentials:\n\n    Target: Domain:target=TERMSRV/rdp01.corp.internal\n    Type: Domain Password\n    User: CORP\\ops",
        lambda: "\"DefaultPassword\"=\"\"",
        lambda: f"{ts()} debug: POST /v1/login body={{\"email\":\"maria@{RNG.choice(ORGS)}.com\",\"password\":\"[REDACTED]\"}}",
        lambda: "stats auth admin:********",
        lambda: "Authorization: Bearer ***",
    ]


def i_code_safe() -> Forms:
    return [
        lambda: 'DB_PASSWORD = os.environ["DB_PASSWORD"]\nAPI_TOKEN = os.getenv("API_TOKEN", "")',
        lambda: 'private static final String PASSWORD = System.getenv("DB_PASSWORD");',
        lambda: 'token := os.Getenv("API_TOKEN")\nif token == "" {\n\tlog.Fatal("API_TOKEN is not set")\n}',
        lambda: 'var apiKey = builder.Configuration["Partner:ApiKey"]\n    ?? throw new InvalidOperationException("Partner:ApiKey missing");',
        lambda: 'let key = std::env::var("API_KEY").expect("API_KEY must be set");',
        lambda: 'let apiKey = ProcessInfo.processInfo.environment["WEATHER_API_KEY"] ?? ""',
        lambda: "define( 'DB_PASSWORD', getenv( 'WORDPRESS_DB_PASSWORD' ) );",
        lambda: "Stripe.api_key = ENV.fetch('STRIPE_SECRET_KEY')",
        lambda: "const pool = new Pool({ connectionString: process.env.DATABASE_URL });",
        lambda: '#include "arduino_secrets.h"\nchar ssid[] = SECRET_SSID;\nchar pass[] = SECRET_PASS;\nWiFi.begin(ssid, pass);',
        lambda: nb_cell(["import getpass\n", 'password = getpass.getpass("DB password: ")']),
        lambda: "const char *pw = getenv(\"SMTP_PASSWORD\");\nif (pw == NULL) return -1;",
        lambda: f"val token: String = BuildConfig.API_TOKEN\nval baseUrl = \"https://api.{RNG.choice(ORGS)}.com\"",
        lambda: "client.username_pw_set(os.environ[\"MQTT_USER\"], os.environ[\"MQTT_PASSWORD\"])",
    ]


def i_network_safe() -> Forms:
    org, ssid = RNG.choice(ORGS), RNG.choice(SSIDS)
    return [
        lambda: f"client\ndev tun\nremote vpn.{org}.com 1194 udp\nca ca.crt\ncert client.crt\nkey client.key\ntls-crypt ta.key\nauth-user-pass /etc/openvpn/client/auth.txt\nremote-cert-tls server",
        lambda: "# /etc/ipsec.secrets\n: RSA vpn-gw.key\ninclude /var/lib/strongswan/ipsec.secrets.inc",
        lambda: f"network={{\n    ssid=\"{ssid}\"\n    key_mgmt=NONE\n}}",
        lambda: "[wifi-security]\nkey-mgmt=wpa-psk\npsk-flags=1\n\n[ipv4]\nmethod=auto",
        lambda: f"Interface              IP-Address      OK? Method Status                Protocol\nGigabitEthernet0/1     10.1.1.1        YES NVRAM  up                    up\nVlan{RNG.randrange(10, 99)}                 10.{RNG.randrange(0, 255)}.0.1       YES NVRAM  up                    up",
        lambda: "agentAddress udp:161,udp6:[::1]:161\nview systemonly included .1.3.6.1.2.1.1\nsysContact ops@" + org + ".com",
        lambda: "location /admin/ {\n    auth_basic \"Restricted\";\n    auth_basic_user_file /etc/nginx/.htpasswd;\n    proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;\n}",
        lambda: "frontend https-in\n    bind :443 ssl crt /etc/haproxy/certs/\n    http-request set-header X-Forwarded-Proto https\n    default_backend web",
        lambda: "client localnet {\n\tipaddr = 10.0.0.0/8\n\tsecret = ${radius_secret}\n}",
        lambda: f"service password-encryption\nip ssh version 2\nip domain name corp.{org}.com\nlogin block-for 120 attempts 3 within 60",
        lambda: "snmp-server group MONITOR v3 priv read V3READ\nsnmp-server view V3READ iso included",
        lambda: "proxy_set_header Authorization $http_authorization;\nproxy_pass_request_headers on;",
        lambda: f"hw_mode=g\nchannel={RNG.choice([1, 6, 11])}\nieee80211n=1\nwmm_enabled=1\nwpa_psk_file=/etc/hostapd/hostapd.wpa_psk",
    ]


def i_protocol_safe() -> Forms:
    org = RNG.choice(ORGS)
    return [
        lambda: f"220 smtp.{org}.com ESMTP Postfix\nEHLO build01\n250-smtp.{org}.com\n250-PIPELINING\n250-SIZE 52428800\n250-STARTTLS\n250-AUTH PLAIN LOGIN\n250 8BITMIME",
        lambda: "<~  334 VXNlcm5hbWU6",
        lambda: "* OK [CAPABILITY IMAP4rev1 SASL-IR LOGIN-REFERRALS ID ENABLE IDLE STARTTLS AUTH=PLAIN] Dovecot ready.\na1 CAPABILITY\na1 OK Pre-login capabilities listed, post-login capabilities have more.",
        lambda: "< 220 (vsFTPd 3.0.5)\n> USER anonymous\n< 331 Please specify the password.",
        lambda: f'"timings": {{\n  "blocked": {RNG.randrange(1, 9)}.{RNG.randrange(100, 999)},\n  "dns": -1,\n  "connect": -1,\n  "send": 0.{RNG.randrange(100, 999)},\n  "wait": {RNG.randrange(20, 400)}.{RNG.randrange(100, 999)},\n  "receive": {RNG.randrange(1, 9)}.{RNG.randrange(100, 999)}\n}},\n"serverIPAddress": "{ip()}",\n"connection": "{RNG.randrange(1000, 99999)}"',
        lambda: f'fetch("https://app.{org}.com/api/health", {{\n  "headers": {{\n    "accept": "application/json"\n  }},\n  "body": null,\n  "method": "GET"\n}});',
        lambda: f"Client {(cid := f'sensor-{RNG.randrange(1, 999):03d}')} sending CONNECT\nClient {cid} received CONNACK (0)\nClient {cid} sending SUBSCRIBE (Mid: 1, Topic: site/+/temp, QoS: 0, Options: 0x00)",
        lambda: "MQ Telemetry Transport Protocol, Connect Ack\n    Header Flags: 0x20, Message Type: Connect Ack\n    Msg Len: 2\n    Acknowledge Flags: 0x00\n    Return Code: Connection Accepted (0)",
        lambda: f'{RNG.randrange(1_801_000_000, 1_802_000_000)}.{digits(6)} [0 10.0.0.{RNG.randrange(2, 250)}:{RNG.randrange(30000, 60000)}] "LPUSH" "jobs:pending" "{uid()}"',
        lambda: "535 5.7.8 Error: authentication failed: UGFzc3dvcmQ6",
        lambda: f"curl 'https://app.{org}.com/static/app.{hexrun(8)}.js' \\\n  -H 'accept: */*' \\\n  -H 'referer: https://app.{org}.com/'",
        lambda: f"{ts()} warning: unknown[10.0.{RNG.randrange(0, 9)}.{RNG.randrange(2, 250)}]: SASL LOGIN authentication failed: UGFzc3dvcmQ6",
        lambda: "+OK POP3 server ready <" + digits(5) + "." + digits(10) + "@mail." + org + ".com>",
    ]


def i_windows_safe() -> Forms:
    return [
        lambda: "C:\\> net use \\\\fs01\\finance /user:CORP\\svc_backup *\nType the password for \\\\fs01\\finance:",
        lambda: "$cred = Get-Credential -UserName 'CORP\\svc_deploy' -Message 'Deploy account'",
        lambda: "runas /user:CORP\\admin \"mmc compmgmt.msc\"\nEnter the password for CORP\\admin:",
        lambda: "$pw = Read-Host -AsSecureString -Prompt 'Password'\nNew-LocalUser -Name kiosk -Password $pw",
        lambda: f"S-1-5-21-{digits(10)}-{digits(10)}-{digits(10)}-{RNG.randrange(1000, 9999)}",
        lambda: "setx PATH \"%PATH%;C:\\tools\\bin\"\n\nSUCCESS: Specified value was saved.",
        lambda: "[HKEY_LOCAL_MACHINE\\SOFTWARE\\Microsoft\\Windows NT\\CurrentVersion\\Winlogon]\n\"AutoAdminLogon\"=\"0\"\n\"DefaultUserName\"=\"kiosk\"\n\"Shell\"=\"explorer.exe\"",
        lambda: "SERVICE_NAME: OrdersSvc\n        TYPE               : 10  WIN32_OWN_PROCESS\n        START_TYPE         : 2   AUTO_START\n        BINARY_PATH_NAME   : C:\\Services\\Orders\\Orders.exe\n        SERVICE_START_NAME : CORP\\svc_orders",
        lambda: "$cred = Import-Clixml -Path \"$env:USERPROFILE\\deploy.cred.xml\"",
        lambda: f"schtasks /query /tn \"Nightly Backup\" /fo LIST\n\nTaskName:      \\Nightly Backup\nNext Run Time: 2/{RNG.randrange(1, 28)}/2027 2:00:00 AM\nStatus:        Ready",
        lambda: f"{{{uid().upper()}}}",
        lambda: "cmdkey /list:TERMSRV/rdp01.corp.internal",
        lambda: f"Get-LocalUser kiosk | Select-Object Name, Enabled, PasswordLastSet\n\nName  Enabled PasswordLastSet\n----  ------- ---------------\nkiosk    True 2/{RNG.randrange(1, 28)}/2027 9:14:02 AM",
    ]


def i_infra_safe() -> Forms:
    return [
        lambda: f"[web]\nweb01 ansible_host=10.0.1.{RNG.randrange(2, 250)} ansible_user=deploy ansible_ssh_private_key_file=~/.ssh/id_ed25519\n\n[web:vars]\nansible_become=true",
        lambda: f"profile::postgres::password: >\n    ENC[PKCS7,{b64bytes(RNG.choice([141, 186]))}]",
        lambda: f"vault_db_password: !vault |\n          $ANSIBLE_VAULT;1.1;AES256\n          {hexrun(64)}\n          {hexrun(64)}",
        lambda: f"Node              Address             Status  Type    Build   Protocol  DC   Partition  Segment\nconsul-server-0   10.0.{RNG.randrange(0, 9)}.{RNG.randrange(2, 250)}:8301   alive   server  1.20.{RNG.randrange(0, 5)}  2         dc1  default    <all>",
        lambda: f"ID        Node Pool  DC   Name     Class   Drain  Eligibility  Status\n{hexrun(8)}  default    dc1  nomad-1  <none>  false  eligible     ready",
        lambda: f"Key                Value\n---                -----\nSeal Type          shamir\nInitialized        true\nSealed             false\nTotal Shares       5\nThreshold          3\nVersion            1.18.{RNG.randrange(0, 5)}\nCluster ID         {uid()}\nHA Enabled         true",
        lambda: "acl {\n  enabled        = true\n  default_policy = \"deny\"\n  enable_token_persistence = true\n}",
        lambda: "$ sudo salt 'web*' test.ping\nweb01.corp.internal:\n    True\nweb02.corp.internal:\n    True",
        lambda: "class { 'mysql::server':\n  root_password           => Sensitive(lookup('mysql::root_password')),\n  remove_default_accounts => true,\n}",
        lambda: f"AccessorID:       {uid()}\nDescription:      agent token for consul-server-0\nLocal:            false\nCreate Time:      2027-02-0{RNG.randrange(1, 9)} 10:22:01.{digits(6)} +0000 UTC",
        lambda: f"all:\n  hosts:\n    db01:\n      ansible_host: 10.0.2.{RNG.randrange(2, 250)}\n      postgres_port: 5432\n      postgres_max_connections: 200",
        lambda: f"$ kubeadm certs check-expiration | head -4\nCERTIFICATE                EXPIRES                  RESIDUAL TIME   CERTIFICATE AUTHORITY   EXTERNALLY MANAGED\nadmin.conf                 Feb {RNG.randrange(1, 28):02d}, 2028 09:14 UTC   364d            ca                      no\napiserver                  Feb {RNG.randrange(1, 28):02d}, 2028 09:14 UTC   364d            ca                      no",
        lambda: f"Job ID               = {RNG.choice(PROJECTS)}\nNamespace            = default\nType                 = service\nStatus               = running\nDatacenters          = dc1",
    ]


IDENTITY_FAMILIES: list[tuple[str, Callable[[], Forms], int]] = [
    ("wireguard-public", i_wireguard_public, 13), ("cluster-join-public", i_cluster_join, 12), ("git-object", i_git, 14),
    ("ssh-host-key", i_ssh_host, 13), ("certificate", i_certificate, 13), ("package-checksum", i_checksum, 13),
    ("terraform-ids", i_terraform_ids, 13), ("aws-ids", i_aws_ids, 14), ("azure-gcp-ids", i_azure_gcp, 14),
    ("container-pod", i_container_pod, 14), ("process-safe", i_process_safe, 14), ("trace-log", i_trace_log, 15),
    ("mac-ipv6", i_mac_ipv6, 13), ("base64-public", i_base64_public, 13), ("env-names", i_env_names, 13),
    ("systemd-safe", i_systemd_safe, 12), ("reference", i_reference, 15), ("placeholder", i_placeholder, 13),
    ("masked", i_masked, 13), ("code-safe", i_code_safe, 14), ("network-safe", i_network_safe, 13),
    ("protocol-safe", i_protocol_safe, 13), ("windows-safe", i_windows_safe, 13), ("infra-safe", i_infra_safe, 13),
]


def identity_rows() -> list[dict[str, object]]:
    return identity_rows_of(IDENTITY_FAMILIES, "si", 3, "system-identities")


def main() -> None:
    write_sets({"system_secrets.jsonl": secret_rows(), "system_identities.jsonl": identity_rows()})


if __name__ == "__main__":
    main()
