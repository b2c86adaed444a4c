"""Generate the field sets (``field_secrets.jsonl``, ``field_identities.jsonl``): a fourth secret
and identity set, written apart from the first three and from the redactor's rules (the rules
were not read while writing it), and split and committed before any evaluation was run on it.

The first three sets follow secret shapes seen in sessions (``make_secrets.py``), the option
grammars of credential-taking tools (``make_grammar_sets.py``) and the documented formats of an
application's own config, connection strings, HTTP and vendor tokens (``make_source_sets.py``).
This one starts from *the places a coding session reaches outside the application's own config
and CLI grammars*, each written from the place's documented format:

* CI/CD: GitHub Actions logs (timestamped lines, ``##[group]Run`` blocks that echo a step's
  ``env:``, ``##[command]`` lines, values a step derives and so escapes masking) and workflow
  files; GitLab CI variables, pipeline trigger / runner / deploy tokens, runner ``config.toml``
  and job logs; Jenkins console output, Jenkinsfile ``environment``, API tokens, JCasC; Travis,
  Buildkite, CircleCI, Drone and Azure Pipelines settings; ``set -x`` traces (``+ curl ...``);
* mobile and desktop: ``google-services.json`` / ``GoogleService-Info.plist`` / web
  ``firebaseConfig`` and FCM server keys; Android signing (``keystore.properties``,
  ``signingConfigs``, React Native ``gradle.properties``, ``apksigner``, ``jarsigner``,
  ``bundletool``); Apple signing and notarisation (``notarytool``, ``altool``, ``security``,
  fastlane env, ``.xcconfig``); electron-builder (``CSC_KEY_PASSWORD``, ``certificatePassword``);
* IDE and API-client files: ``.vscode/launch.json`` and ``settings.json``, ``devcontainer.json``,
  JetBrains ``workspace.xml`` run configurations and ``dataSources.xml``, Postman and Insomnia
  exports, REST Client ``.http`` files, Bruno ``.bru`` files;
* platforms: Heroku ``config`` and ``authorizations``, Vercel ``env pull`` and tokens, Netlify,
  fly.io ``secrets``/``tokens``, Render ``render.yaml``, Railway, Pulumi ``config set --secret``,
  CloudFormation / SAM / CDK parameters, ``serverless.yml``, ``firebase login:ci``, Supabase,
  Cloudflare wrangler;
* webhooks and signed URLs: Discord, Power Automate / Teams, Google Chat, Mattermost, GitHub
  webhook secrets; S3 presigned URLs (``X-Amz-Signature``, ``X-Amz-Security-Token``), GCS V4
  and V2 signed URLs, CloudFront signed URLs;
* password managers and secret stores: ``op read``, ``bw get``, ``pass show``,
  ``keepassxc-cli``, ``lpass``; ``aws secretsmanager get-secret-value``, ``aws ssm
  get-parameter --with-decryption``, ``gcloud secrets versions access``, ``az keyvault secret
  show``, ``vault kv get``, ``doppler secrets get``, ``sops -d``;
* OAuth and sessions: token endpoint responses, ``client_secret`` in form bodies and Basic auth,
  Google ``client_secret.json``, GitHub OAuth app secrets; session cookies (express
  ``connect.sid``, Laravel, ``JSESSIONID``, ``PHPSESSID``, Rails); TOTP seeds (``otpauth://``,
  ``oathtool``, setup keys, ``pyotp``) and recovery codes;
* database and shell sessions: ``ALTER ROLE ... PASSWORD``, ``CREATE USER ... IDENTIFIED BY``,
  ``CONFIG GET requirepass``, ``db.createUser``, ``rabbitmqctl add_user``, ``ALTER LOGIN``;
  shell history (bash and zsh extended), crontab lines, ``expect`` scripts, ``sudo -S``;
* framework and crash output: Django's debug page settings, ``rails credentials:show``, Spring
  Boot actuator ``/env``, Laravel tinker, Werkzeug tracebacks, Next.js ``.env.local``; Sentry
  events and breadcrumbs, Node diagnostic reports, Bugsnag metadata;
* a secret-scanner catalogue of vendor formats the third set's vendor list lacks (Atlassian,
  Asana, Bitbucket, Contentful, Datadog, Dropbox, Duffel, EasyPost, Figma, Flutterwave,
  GoCardless, Heroku, Intercom, Mailchimp, Okta, PlanetScale, Pulumi, Shippo, Square, Telegram
  bot, Typeform, Vault batch tokens, age secret keys, Doppler personal tokens), each vendor once
  in prose, once in the command its documentation shows, once in a config line.

The identity set is what the same places hold that must pass unchanged: CI run, job and
artifact URLs and ids, CI log lines, masked values, references to a secret that carry none,
ciphertext, Firebase and Google identifiers, keys that are public by their documentation,
mobile identifiers (bundle ids, provisioning profile UUIDs, team ids, keystore aliases,
certificate fingerprints), environment variable names listed without values, IDE and API-client
files without a secret, object URLs without a signature, request and trace ids and provider
object ids, chat ids, artifact hashes, versions and build numbers, git in CI logs, generated
file names, secret-store output that shows no secret, masked framework output, database and
shell sessions without a password, and OAuth's public parameters.

Labelling decisions (each from the format's documentation):

* A Google API key (``AIza...``) is a secret even in ``google-services.json``: Firebase says its
  keys may ship in apps, but the same format is a billable key for Maps or Gemini and the key's
  restrictions are not in the text (and the third set counts it a secret). The project id,
  project number, app ids (``1:...:android:...``) and OAuth client ids beside it are identities
  (RFC 6749 2.2: a client identifier is not a secret).
* Public by documentation, so identities: Stripe publishable keys (``pk_live_``/``pk_test_``),
  Sentry DSNs (they only allow sending events), Supabase ``sb_publishable_`` keys, Mapbox
  public tokens (``pk.``), reCAPTCHA site keys, PostHog project keys (``phc_``), OAuth client
  ids. Supabase's legacy ``anon`` JWT is left out of both sets (its role shows only once
  decoded).
* Ciphertext is an identity: sops ``ENC[AES256_GCM,...]``, Pulumi ``secure: v1:...``, Ansible
  Vault, sealed-secrets ``encryptedData``, Travis ``secure:``, Jenkins ``{AQAAAB...}``, Rails
  ``credentials.yml.enc``, EJSON, age-armoured files: they are safe to commit by design.
* Masked values (``***``, ``****1234``, ``<redacted>``, ``[MASKED]``, ``[Filtered]``,
  ``[FILTERED]``, ``******``), OAuth's public parameters (client ids, PKCE
  ``code_challenge``, scopes, redirect URIs; the ``state`` value is left out, like CSRF
  tokens) and references (``${{ secrets.X }}``, ``op://vault/item/field``,
  ``{{resolve:secretsmanager:...}}``, ``${ssm:...}``, ``env:VAR``) are identities.
* Secrets: session cookies, bearer, access, refresh and id tokens, client secrets, TOTP seeds and
  recovery codes, signed-URL signatures and STS security tokens, webhook URL tokens. A CSRF/XSRF
  token is neither (it grants nothing without the session): it is listed in neither ``secrets``
  nor ``keep``. In a signed URL the access key id, credential scope, expiry and path are not
  secret; the access key id is left unlabelled (as in the third set), the rest is ``keep``.
  In a webhook URL only the token part is labelled (the ids before it are left unlabelled).

Every secret row lists each exact substring that must disappear (``secrets``) and context that
must stay (``keep``). Values are fake and drawn from a seeded generator, in each format's
documented alphabet and length.

Split: half and half *within each family* (ordered by a salted hash of the row id; an odd
family's middle row goes by the hash of the family's name), fixed in the files. The split was
committed with the set, before any evaluation was run on it.

    python benchmarks/coding_sets/make_field_sets.py   # rewrites both files
"""

# ruff: noqa: E501  (a data table: one format per line reads best)

from __future__ import annotations

import base64
import json
import random
import string
import urllib.parse
import uuid
from collections.abc import Callable
from pathlib import Path

# The third set's split rule, shared (the script's folder is on the path when it runs).
from make_source_sets import family_split, identity_rows_of, write_sets

HERE = Path(__file__).resolve().parent
RNG = random.Random(48_011)
AN = string.ascii_letters + string.digits
LOW = string.ascii_lowercase + string.digits
UP = string.ascii_uppercase + string.digits
HEX = "0123456789abcdef"
B64 = AN + "+/"
B64URL = AN + "-_"
B32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"

ORGS = ["acme", "globex", "initech", "umbrella-labs", "hooli", "vandelay"]
PROJECTS = ["payments-api", "mobile-app", "checkout-web", "auth-service", "ledger", "infra-live",
            "desktop-client", "notifier", "shop", "data-pipeline"]
USERS = ["app", "deploy", "ci-bot", "jane", "svc_reporting", "backup", "admin", "release"]
KEYS = ["DB_PASSWORD", "API_KEY", "DEPLOY_TOKEN", "STRIPE_SECRET_KEY", "NPM_TOKEN", "SENTRY_AUTH_TOKEN",
        "KEYSTORE_PASSWORD", "MATCH_PASSWORD", "SLACK_WEBHOOK_URL", "AWS_SECRET_ACCESS_KEY", "JWT_SECRET"]


# -- values ----------------------------------------------------------------------------------
def run(n: int, alphabet: str = AN) -> str:
    return "".join(RNG.choice(alphabet) for _ in range(n))


def hexrun(n: int) -> str:
    return run(n, HEX)


def digits(n: int) -> str:
    return str(RNG.randrange(10 ** (n - 1), 10**n))


def uid() -> str:
    return str(uuid.UUID(int=RNG.getrandbits(128), version=4))


def b64bytes(n: int) -> str:
    return base64.b64encode(RNG.randbytes(n)).decode()


def password() -> str:
    """A password as people and generators make them, with punctuation that needs no quoting in
    a shell word, JSON, YAML, XML or a properties file (``-_.@%+=~^``)."""
    shape = RNG.randrange(5)
    if shape == 0:
        return RNG.choice(["Kestrel", "amber", "Quartz", "willow", "Meridian", "pepper", "Saturn"]) + RNG.choice("@%+=_-.") + digits(RNG.randrange(2, 5)) + RNG.choice(["", "x", "Z", "~"])
    if shape == 1:
        return run(RNG.randrange(16, 30))
    if shape == 2:
        return run(RNG.randrange(16, 26), AN + "-_.@%+=~^")
    if shape == 3:
        return "-".join(run(RNG.randrange(5, 8), string.ascii_lowercase) for _ in range(4))
    return run(32, B64URL)


def alnum_password() -> str:
    """A generated password as a URL's userinfo or a bash xtrace line shows it unquoted."""
    return run(RNG.randrange(16, 33))


def apple_asp() -> str:
    """An Apple app-specific password: four groups of four lowercase letters."""
    return "-".join(run(4, string.ascii_lowercase) for _ in range(4))


def jwt(payload: dict[str, object] | None = None) -> str:
    def enc(obj: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj, separators=(",", ":")).encode()).decode().rstrip("=")
    body = payload or {"sub": digits(6), "iat": 1_764_900_000 + RNG.randrange(10**6), "exp": 1_764_990_000 + RNG.randrange(10**6)}
    return f"{enc({'alg': RNG.choice(['RS256', 'HS256', 'ES256']), 'typ': 'JWT'})}.{enc(body)}.{run(RNG.choice([43, 86, 342]), B64URL)}"


def google_api_key() -> str:
    return "AIza" + run(35, B64URL)


def google_refresh() -> str:
    return "1//0" + run(RNG.choice([99, 103]), B64URL)


def google_client_id() -> str:
    return f"{digits(12)}-{run(32, string.ascii_lowercase + string.digits)}.apps.googleusercontent.com"


def ts() -> str:
    return f"2026-12-{RNG.randrange(1, 29):02d}T{RNG.randrange(24):02d}:{RNG.randrange(60):02d}:{RNG.randrange(60):02d}.{RNG.randrange(10**7):07d}Z"


def logged(lines: list[str]) -> str:
    """Lines as a GitHub Actions log shows them: each after its own timestamp."""
    stamp = ts()[:-9]
    fractions = sorted(RNG.randrange(10**7) for _ in lines)
    return "\n".join(f"{stamp}.{f:07d}Z {line}" for f, line in zip(fractions, lines, strict=True))


def semver() -> str:
    return f"{RNG.randrange(0, 9)}.{RNG.randrange(0, 30)}.{RNG.randrange(0, 20)}"


Item = tuple[str, list[str], list[str]]
Form = Callable[[], Item]


def pick(i: int, forms: list[Form]) -> Item:
    """The family's ``i``-th form, in turn, so that every form appears."""
    return forms[i % len(forms)]()


# -- CI/CD -------------------------------------------------------------------------------------
def s_gha_log(i: int) -> Item:
    p, t, org, proj = password(), run(40, B64URL), RNG.choice(ORGS), RNG.choice(PROJECTS)
    sk, st = run(40, B64), "IQoJb3JpZ2luX2VjE" + run(280, B64)
    return pick(i, [
        lambda: (logged(["##[group]Run echo \"$CREDS_B64\" | base64 -d > creds.json && cat creds.json", "##[endgroup]", f'{{"client_id": "{proj}", "client_secret": "{p}"}}']), [p], ["##[group]Run", "creds.json"]),
        lambda: (logged(["##[group]Run docker/login-action@v3", f"##[command]/usr/bin/docker login --username ci-bot --password {p} ghcr.io", "Login Succeeded", "##[endgroup]"]), [p], ["##[command]/usr/bin/docker login", "Login Succeeded"]),
        lambda: (logged([f"##[group]Run curl -fsS https://api.{org}.io/v1/deploy", "shell: /usr/bin/bash -e {0}", "env:", f"  API_URL: https://api.{org}.io", f"  API_KEY: {t}", "##[endgroup]"]), [t], ["shell: /usr/bin/bash -e {0}", f"API_URL: https://api.{org}.io"]),
        lambda: (logged(["##[group]Run aws sts assume-role --role-arn \"$ROLE\" --role-session-name ci", "##[endgroup]", "{", '    "Credentials": {', f'        "SecretAccessKey": "{sk}",', f'        "SessionToken": "{st}",', '        "Expiration": "2026-12-06T09:12:44+00:00"', "    }"]), [sk, st], ["--role-session-name ci"]),
        lambda: (logged([f'##[group]Run echo "::add-mask::{t}"', "##[endgroup]", f'##[group]Run echo "token={t}" >> "$GITHUB_OUTPUT"']), [t], ['>> "$GITHUB_OUTPUT"']),
    ])


def s_gha_workflow(i: int) -> Item:
    p, t, sk = password(), run(40, B64URL), run(40, B64)
    ak = "AKIA" + run(16, string.ascii_uppercase + "234567")
    return pick(i, [
        lambda: (f"      - uses: docker/login-action@v3\n        with:\n          registry: ghcr.io\n          username: ${{{{ github.actor }}}}\n          password: {p}", [p], ["${{ github.actor }}", "docker/login-action@v3"]),
        lambda: (f"    services:\n      postgres:\n        image: postgres:16\n        env:\n          POSTGRES_PASSWORD: {p}\n        ports:\n          - 5432:5432", [p], ["image: postgres:16"]),
        lambda: (f"      - run: ./scripts/deploy.sh\n        env:\n          DEPLOY_KEY: {t}\n          TARGET: ${{{{ vars.TARGET }}}}", [t], ["${{ vars.TARGET }}", "./scripts/deploy.sh"]),
        lambda: (f"      - run: gh workflow run release.yml -f version=${{{{ inputs.version }}}}\n        env:\n          GH_TOKEN: {t}", [t], ["gh workflow run release.yml"]),
        lambda: (f"      - uses: aws-actions/configure-aws-credentials@v4\n        with:\n          aws-access-key-id: {ak}\n          aws-secret-access-key: {sk}\n          aws-region: eu-west-1", [sk], ["aws-actions/configure-aws-credentials@v4", "aws-region: eu-west-1"]),
    ])


def s_gitlab(i: int) -> Item:
    p, org, proj = password(), RNG.choice(ORGS), RNG.choice(PROJECTS)
    trig, runner, deploy = "glptt-" + hexrun(40), "glrt-" + run(20, B64URL), "gldt-" + run(20, B64URL)
    return pick(i, [
        lambda: (f'variables:\n  GIT_DEPTH: "10"\n  DB_PASSWORD: "{p}"\n  DOCKER_DRIVER: overlay2', [p], ['GIT_DEPTH: "10"', "DOCKER_DRIVER: overlay2"]),
        lambda: (f"curl -X POST --fail -F token={trig} -F ref=main https://gitlab.{org}.io/api/v4/projects/{digits(3)}/trigger/pipeline", [trig], ["-F ref=main", "/trigger/pipeline"]),
        lambda: (f"gitlab-runner register --non-interactive --url https://gitlab.com --token {runner} --executor docker --docker-image alpine:3.20", [runner], ["--executor docker", "alpine:3.20"]),
        lambda: (f"$ env | sort | grep -v CI_\nDEPLOY_PASSWORD={p}\nFF_USE_FASTZIP=true\nHOME=/root", [p], ["FF_USE_FASTZIP=true", "HOME=/root"]),
        lambda: (f'[[runners]]\n  name = "docker-runner-0{RNG.randrange(1, 9)}"\n  url = "https://gitlab.com"\n  token = "{runner}"\n  executor = "docker"', [runner], ['executor = "docker"', 'url = "https://gitlab.com"']),
        lambda: (f"git clone https://gitlab+deploy-token-{digits(6)}:{deploy}@gitlab.com/{org}/{proj}.git", [deploy], ["gitlab+deploy-token-", f"{org}/{proj}.git"]),
    ])


def s_jenkins(i: int) -> Item:
    p, api, org = password(), "11" + hexrun(32), RNG.choice(ORGS)
    sonar = "squ_" + hexrun(40)
    return pick(i, [
        lambda: (f"[Pipeline] sh\n+ docker login -u ci -p {p} registry.{org}.io\nWARNING! Using --password via the CLI is insecure. Use --password-stdin.", [p], ["[Pipeline] sh", "Use --password-stdin."]),
        lambda: (f"pipeline {{\n    agent any\n    environment {{\n        SONAR_TOKEN = '{sonar}'\n        GRADLE_OPTS = '-Xmx2g'\n    }}", [sonar], ["agent any", "GRADLE_OPTS = '-Xmx2g'"]),
        lambda: (f"curl -X POST -u admin:{api} https://jenkins.{org}.io/job/deploy/buildWithParameters?ENV=prod", [api], ["/job/deploy/buildWithParameters?ENV=prod"]),
        lambda: (f"java -jar jenkins-cli.jar -s https://jenkins.{org}.io/ -auth ci-bot:{api} build release -p VERSION=2.4.0", [api], ["jenkins-cli.jar", "-p VERSION=2.4.0"]),
        lambda: (f'credentials:\n  system:\n    domainCredentials:\n      - credentials:\n          - usernamePassword:\n              scope: GLOBAL\n              id: "nexus"\n              username: "deployer"\n              password: "{p}"', [p], ['id: "nexus"', 'username: "deployer"']),
    ])


def s_ci_env(i: int) -> Item:
    p, org = password(), RNG.choice(ORGS)
    heroku_key, agent, bkua = uid(), run(50, LOW), "bkua_" + hexrun(40)
    circle, drone = "CCIPAT_" + run(22) + "_" + hexrun(40), hexrun(32)
    return pick(i, [
        lambda: (f"deploy:\n  provider: heroku\n  api_key: {heroku_key}\n  app: {org}-staging", [heroku_key], ["provider: heroku", f"app: {org}-staging"]),
        lambda: (f'token="{agent}"\nname="%hostname-%spawn"\ntags="queue=deploy"', [agent], ['tags="queue=deploy"']),
        lambda: (f"export BUILDKITE_API_TOKEN={bkua}\nbk build create --pipeline {org}/deploy", [bkua], [f"--pipeline {org}/deploy"]),
        lambda: (f"circleci setup --no-prompt --host https://circleci.com --token {circle}", [circle], ["--host https://circleci.com"]),
        lambda: (f"docker run -d -e DRONE_RPC_PROTO=https -e DRONE_RPC_HOST=drone.{org}.io -e DRONE_RPC_SECRET={drone} drone/drone-runner-docker:1", [drone], [f"DRONE_RPC_HOST=drone.{org}.io", "drone/drone-runner-docker:1"]),
        lambda: (f"variables:\n  - name: buildConfiguration\n    value: Release\n  - name: sqlPassword\n    value: '{p}'", [p], ["- name: sqlPassword", "value: Release"]),
    ])


def s_xtrace(i: int) -> Item:
    p, t, org = alnum_password(), run(40, B64URL), RNG.choice(ORGS)
    return pick(i, [
        lambda: (f"+ curl -fsS -H 'Authorization: Bearer {t}' https://api.{org}.io/v1/deploy", [t], ["+ curl -fsS", f"https://api.{org}.io/v1/deploy"]),
        lambda: (f"++ cat /run/secrets/db_password\n+ DB_PASSWORD={p}\n+ export DB_PASSWORD\n+ exec gunicorn app:app", [p], ["+ exec gunicorn app:app", "++ cat /run/secrets/db_password"]),
        lambda: (f"+ echo {p}\n+ docker login --username ci --password-stdin registry.{org}.io\nLogin Succeeded", [p], ["--password-stdin", "Login Succeeded"]),
        lambda: (f"+ mysqldump -u root -p{p} --single-transaction shop_production", [p], ["--single-transaction shop_production"]),
        lambda: (f"+ helm repo add {org} https://charts.{org}.io --username ci --password {p}\n\"{org}\" has been added to your repositories", [p], ["has been added to your repositories"]),
        lambda: (f"+ ./gradlew publish -PsigningPassword={p} -PossrhToken={t} --no-daemon", [p, t], ["./gradlew publish", "--no-daemon"]),
    ])


# -- mobile and desktop ------------------------------------------------------------------------------
def s_firebase(i: int) -> Item:
    key, proj, num = google_api_key(), f"{RNG.choice(PROJECTS)}-{digits(4)}", digits(12)
    app = f"1:{num}:android:{hexrun(16)}"
    ios = f"1:{num}:ios:{hexrun(16)}"
    web = f"1:{num}:web:{hexrun(22)}"
    fcm = f"AAAA{run(7, B64URL)}:APA91b{run(134, B64URL)}"
    return pick(i, [
        lambda: (f'{{\n  "project_info": {{\n    "project_number": "{num}",\n    "project_id": "{proj}"\n  }},\n  "client": [{{\n    "client_info": {{\n      "mobilesdk_app_id": "{app}",\n      "android_client_info": {{ "package_name": "com.acme.app" }}\n    }},\n    "api_key": [{{ "current_key": "{key}" }}]\n  }}]\n}}', [key], [app, proj, '"package_name": "com.acme.app"']),
        lambda: (f"<key>API_KEY</key>\n<string>{key}</string>\n<key>GOOGLE_APP_ID</key>\n<string>{ios}</string>\n<key>BUNDLE_ID</key>\n<string>com.acme.app</string>", [key], [ios, "<string>com.acme.app</string>"]),
        lambda: (f'const firebaseConfig = {{\n  apiKey: "{key}",\n  authDomain: "{proj}.firebaseapp.com",\n  projectId: "{proj}",\n  appId: "{web}"\n}};', [key], [web, f'authDomain: "{proj}.firebaseapp.com"']),
        lambda: (f'curl -X POST -H "Authorization: key={fcm}" -H "Content-Type: application/json" https://fcm.googleapis.com/fcm/send -d @message.json', [fcm], ["https://fcm.googleapis.com/fcm/send", "-d @message.json"]),
    ])


def s_android(i: int) -> Item:
    p, p2 = password(), password()
    return pick(i, [
        lambda: (f"storePassword={p}\nkeyPassword={p2}\nkeyAlias=upload\nstoreFile=../upload-keystore.jks", [p, p2], ["keyAlias=upload", "storeFile=../upload-keystore.jks"]),
        lambda: (f'    signingConfigs {{\n        release {{\n            storeFile file("release.jks")\n            storePassword "{p}"\n            keyAlias "release"\n            keyPassword "{p}"\n        }}\n    }}', [p], ['keyAlias "release"', 'storeFile file("release.jks")']),
        lambda: (f"MYAPP_UPLOAD_STORE_FILE=my-upload-key.keystore\nMYAPP_UPLOAD_KEY_ALIAS=my-key-alias\nMYAPP_UPLOAD_STORE_PASSWORD={p}\nMYAPP_UPLOAD_KEY_PASSWORD={p2}", [p, p2], ["MYAPP_UPLOAD_KEY_ALIAS=my-key-alias"]),
        lambda: (f"apksigner sign --ks release.jks --ks-key-alias upload --ks-pass pass:{p} --key-pass pass:{p2} --out app-release.apk app-release-unsigned.apk", [p, p2], ["--ks-key-alias upload", "app-release-unsigned.apk"]),
        lambda: (f"jarsigner -verbose -sigalg SHA256withRSA -digestalg SHA-256 -keystore release.jks -storepass {p} -keypass {p2} app-release.aab upload", [p, p2], ["-sigalg SHA256withRSA", "app-release.aab upload"]),
        lambda: (f"bundletool build-apks --bundle=app-release.aab --output=app.apks --ks=release.jks --ks-pass=pass:{p} --ks-key-alias=upload --key-pass=pass:{p}", [p], ["--ks-key-alias=upload", "--output=app.apks"]),
    ])


def s_apple(i: int) -> Item:
    asp, p, p2 = apple_asp(), password(), password()
    team = run(10, string.ascii_uppercase + string.digits)
    return pick(i, [
        lambda: (f'xcrun notarytool store-credentials "AC_PASSWORD" --apple-id "dev@acme.io" --team-id "{team}" --password "{asp}"', [asp], [f'--team-id "{team}"', '"AC_PASSWORD"']),
        lambda: (f"xcrun altool --upload-app -f build/App.ipa -t ios -u dev@acme.io -p {asp}", [asp], ["build/App.ipa", "-u dev@acme.io"]),
        lambda: (f"security import dist.p12 -k ~/Library/Keychains/build.keychain-db -P {p} -T /usr/bin/codesign", [p], ["-T /usr/bin/codesign", "dist.p12"]),
        lambda: (f"FASTLANE_USER=dev@acme.io\nFASTLANE_PASSWORD={p}\nMATCH_PASSWORD={p2}\nFASTLANE_APPLE_APPLICATION_SPECIFIC_PASSWORD={asp}", [p, p2, asp], ["FASTLANE_USER=dev@acme.io"]),
        lambda: (f"security create-keychain -p {p} build.keychain\nsecurity default-keychain -s build.keychain", [p], ["security default-keychain -s build.keychain"]),
        lambda: (f"API_BASE_URL = https:/$()/api.acme.io\nBACKEND_CLIENT_SECRET = {p}\nDEVELOPMENT_TEAM = {team}", [p], ["API_BASE_URL = https:/$()/api.acme.io", f"DEVELOPMENT_TEAM = {team}"]),
    ])


def s_electron(i: int) -> Item:
    p, asp = password(), apple_asp()
    team = run(10, string.ascii_uppercase + string.digits)
    return pick(i, [
        lambda: (f"CSC_LINK=./certs/mac-developer-id.p12\nCSC_KEY_PASSWORD={p}\nnpx electron-builder --mac --publish never", [p], ["CSC_LINK=./certs/mac-developer-id.p12", "--publish never"]),
        lambda: (f"APPLE_ID=dev@acme.io\nAPPLE_APP_SPECIFIC_PASSWORD={asp}\nAPPLE_TEAM_ID={team}", [asp], [f"APPLE_TEAM_ID={team}", "APPLE_ID=dev@acme.io"]),
        lambda: (f'"build": {{\n  "appId": "com.acme.desktop",\n  "win": {{\n    "certificateFile": "certs/win.pfx",\n    "certificatePassword": "{p}"\n  }}\n}}', [p], ['"certificateFile": "certs/win.pfx"', '"appId": "com.acme.desktop"']),
        lambda: (f"set WIN_CSC_LINK=C:\\certs\\codesign.pfx\nset WIN_CSC_KEY_PASSWORD={p}\nyarn electron-builder --win", [p], ["WIN_CSC_LINK=C:\\certs\\codesign.pfx"]),
    ])


# -- IDE and API clients -------------------------------------------------------------------------
def s_ide(i: int) -> Item:
    p, t = password(), run(40, B64URL)
    return pick(i, [
        lambda: (f'{{\n  "name": "Flask",\n  "type": "debugpy",\n  "request": "launch",\n  "module": "flask",\n  "env": {{\n    "FLASK_APP": "app.py",\n    "STRIPE_SECRET": "{p}"\n  }}\n}}', [p], ['"FLASK_APP": "app.py"', '"type": "debugpy"']),
        lambda: (f'<configuration name="Api" type="SpringBootApplicationConfigurationType">\n  <envs>\n    <env name="DB_PASSWORD" value="{p}" />\n    <env name="SPRING_PROFILES_ACTIVE" value="dev" />\n  </envs>\n</configuration>', [p], ['<env name="SPRING_PROFILES_ACTIVE" value="dev" />', 'name="DB_PASSWORD"']),
        lambda: (f'{{\n  "image": "mcr.microsoft.com/devcontainers/python:3.12",\n  "remoteEnv": {{\n    "API_SECRET": "{t}"\n  }}\n}}', [t], ['"image": "mcr.microsoft.com/devcontainers/python:3.12"']),
        lambda: (f'<data-source source="LOCAL" name="app@localhost" uuid="{uid()}">\n  <driver-ref>postgresql</driver-ref>\n  <jdbc-url>jdbc:postgresql://localhost:5432/app?user=app&amp;password={(q := alnum_password())}</jdbc-url>\n</data-source>', [q], ["<driver-ref>postgresql</driver-ref>", 'name="app@localhost"']),
        lambda: (f'"sqltools.connections": [\n  {{\n    "name": "prod",\n    "driver": "PostgreSQL",\n    "server": "db.prod.internal",\n    "username": "app",\n    "password": "{p}"\n  }}\n]', [p], ['"driver": "PostgreSQL"', '"server": "db.prod.internal"']),
        lambda: (f'{{\n  "type": "node",\n  "request": "launch",\n  "program": "${{workspaceFolder}}/src/cli.js",\n  "args": ["--api-key", "{t}"]\n}}', [t], ['"program": "${workspaceFolder}/src/cli.js"', '"request": "launch"']),
    ])


def s_api_client(i: int) -> Item:
    p, t = password(), run(RNG.choice([32, 40, 48]), B64URL)
    return pick(i, [
        lambda: (f'{{\n  "id": "{uid()}",\n  "name": "prod",\n  "values": [\n    {{"key": "baseUrl", "value": "https://api.acme.io", "type": "default", "enabled": true}},\n    {{"key": "apiKey", "value": "{t}", "type": "secret", "enabled": true}}\n  ],\n  "_postman_variable_scope": "environment"\n}}', [t], ['"_postman_variable_scope": "environment"', '"value": "https://api.acme.io"']),
        lambda: (f'"auth": {{\n  "type": "bearer",\n  "bearer": [\n    {{"key": "token", "value": "{t}", "type": "string"}}\n  ]\n}}', [t], ['"type": "bearer"']),
        lambda: (f'{{\n  "_id": "req_{hexrun(32)}",\n  "_type": "request",\n  "method": "GET",\n  "authentication": {{"type": "basic", "username": "admin", "password": "{p}"}}\n}}', [p], ['"_type": "request"', '"username": "admin"']),
        lambda: (f"@host = https://api.acme.io\n@token = {t}\n\nGET {{{{host}}}}/v1/orders\nAuthorization: Bearer {{{{token}}}}", [t], ["Authorization: Bearer {{token}}", "GET {{host}}/v1/orders"]),
        lambda: (f"POST https://api.acme.io/v1/refunds\nAuthorization: Basic admin {p}\nContent-Type: application/json\n\n{{\"charge\": \"ch_123\"}}", [p], ["Content-Type: application/json", "POST https://api.acme.io/v1/refunds"]),
        lambda: (f"meta {{\n  name: list orders\n  type: http\n}}\n\nget {{\n  url: {{{{baseUrl}}}}/orders\n  auth: bearer\n}}\n\nauth:bearer {{\n  token: {t}\n}}", [t], ["auth:bearer {", "url: {{baseUrl}}/orders"]),
    ])


# -- platforms --------------------------------------------------------------------------------------
def s_heroku(i: int) -> Item:
    app = f"{RNG.choice(ORGS)}-api"
    pw1, pw2, key = "p" + hexrun(64), "p" + hexrun(64), "HRKU-AA" + run(58, B64URL)
    host = f"ec2-{RNG.randrange(3, 99)}-{RNG.randrange(0, 255)}-{RNG.randrange(0, 255)}-{RNG.randrange(0, 255)}.compute-1.amazonaws.com"
    return pick(i, [
        lambda: (f"=== {app} Config Vars\nDATABASE_URL: postgres://u{run(13, LOW)}:{pw1}@{host}:5432/d{run(13, LOW)}\nREDIS_URL:    rediss://:{pw2}@{host}:{RNG.randrange(10000, 30000)}\nWEB_CONCURRENCY: 2", [pw1, pw2], [f"=== {app} Config Vars", "WEB_CONCURRENCY: 2"]),
        lambda: (f"heroku config:set SESSION_SECRET={(s := password())} -a {app}\nSetting SESSION_SECRET and restarting ⬢ {app}... done, v{RNG.randrange(10, 400)}", [s], [f"-a {app}", "restarting"]),
        lambda: (f"Creating OAuth Authorization... done\nClient:      <none>\nID:          {uid()}\nDescription: ci deploy\nScope:       global\nToken:       {key}", [key], ["Scope:       global", "Description: ci deploy"]),
        lambda: (f"$ heroku auth:token\n ›   Warning: token will expire 12/05/2027\n{key}", [key], ["$ heroku auth:token"]),
    ])


def s_vercel_netlify(i: int) -> Item:
    p, vt, nfp = alnum_password(), run(24), "nfp_" + run(36)
    oidc = jwt({"iss": "https://oidc.vercel.com/acme", "sub": "owner:acme:project:web:environment:development", "aud": "https://vercel.com/acme", "iat": 1_764_900_000, "exp": 1_764_943_200})
    return pick(i, [
        lambda: (f'# Created by Vercel CLI\nVERCEL_OIDC_TOKEN="{oidc}"\nDATABASE_URL="postgres://default:{p}@ep-{run(8, string.ascii_lowercase)}-{digits(6)}.eu-central-1.aws.neon.tech:5432/verceldb?sslmode=require"', [oidc, p], ["# Created by Vercel CLI", "sslmode=require"]),
        lambda: (f"vercel deploy --prod --token {vt} --scope acme", [vt], ["vercel deploy --prod", "--scope acme"]),
        lambda: (f"netlify env:set STRIPE_WEBHOOK_SECRET {(s := password())} --context production", [s], ["netlify env:set STRIPE_WEBHOOK_SECRET", "--context production"]),
        lambda: (f"NETLIFY_AUTH_TOKEN={nfp} netlify deploy --prod --dir=dist", [nfp], ["netlify deploy --prod --dir=dist"]),
    ])


def s_fly_render(i: int) -> Item:
    p, hx, app = alnum_password(), hexrun(64), f"{RNG.choice(ORGS)}-api"
    fly = "FlyV1 fm2_" + b64bytes(RNG.randrange(230, 300)) + ",fm2_" + b64bytes(RNG.randrange(150, 220))
    return pick(i, [
        lambda: (f"fly secrets set DATABASE_URL=postgres://app:{p}@{app}-db.flycast:5432/app SECRET_KEY_BASE={hx} -a {app}", [p, hx], [f"-a {app}", "fly secrets set"]),
        lambda: (f"$ fly tokens create deploy -x 999999h\n{fly}", [fly[len('FlyV1 '):]], ["fly tokens create deploy"]),
        lambda: (f"services:\n  - type: web\n    name: {app}\n    envVars:\n      - key: NODE_ENV\n        value: production\n      - key: JWT_SECRET\n        value: {(s := password())}", [s], ["value: production", "- key: JWT_SECRET"]),
        lambda: (f"$ railway variables --kv\nNODE_ENV=production\nPGPASSWORD={p}\nRAILWAY_ENVIRONMENT_NAME=production", [p], ["RAILWAY_ENVIRONMENT_NAME=production"]),
    ])


def s_iac(i: int) -> Item:
    p = password()
    return pick(i, [
        lambda: (f"pulumi config set --secret dbPassword {p} --stack acme/prod", [p], ["--secret dbPassword", "--stack acme/prod"]),
        lambda: (f"aws cloudformation deploy --template-file template.yaml --stack-name acme-prod --parameter-overrides Env=prod DBPassword={p} --capabilities CAPABILITY_IAM", [p], ["--stack-name acme-prod", "Env=prod"]),
        lambda: (f'[default.deploy.parameters]\nstack_name = "acme-api"\nparameter_overrides = "Stage=\\"prod\\" DbPassword=\\"{p}\\""\nconfirm_changeset = true', [p], ['stack_name = "acme-api"', "confirm_changeset = true"]),
        lambda: (f"provider:\n  name: aws\n  runtime: nodejs20.x\n  environment:\n    STRIPE_SECRET: {p}\n    STAGE: ${{sls:stage}}", [p], ["runtime: nodejs20.x", "STAGE: ${sls:stage}"]),
        lambda: (f"Parameters:\n  DBPassword:\n    Type: String\n    NoEcho: true\n    Default: {p}", [p], ["NoEcho: true", "Type: String"]),
        lambda: (f"npx cdk deploy ApiStack --parameters DbPassword={p} --require-approval never", [p], ["npx cdk deploy ApiStack", "--require-approval never"]),
    ])


def s_baas(i: int) -> Item:
    p, ref = password(), run(20, string.ascii_lowercase)
    role = jwt({"iss": "supabase", "ref": ref, "role": "service_role", "iat": 1_733_400_000, "exp": 2_048_976_000})
    cf = run(40, B64URL)
    return pick(i, [
        lambda: (f'✔  Success! Use this token to login on a CI server:\n\n{(g := google_refresh())}\n\nExample: firebase deploy --token "$FIREBASE_TOKEN"', [g], ['firebase deploy --token "$FIREBASE_TOKEN"']),
        lambda: (f"NEXT_PUBLIC_SUPABASE_URL=https://{ref}.supabase.co\nSUPABASE_SERVICE_ROLE_KEY={role}", [role], [f"NEXT_PUBLIC_SUPABASE_URL=https://{ref}.supabase.co"]),
        lambda: (f"supabase secrets set --project-ref {ref} OPENAI_KEY={p} SUPABASE_SECRET_KEY={(s := 'sb_secret_' + run(31, B64URL))}", [p, s], [f"--project-ref {ref}"]),
        lambda: (f'API_TOKEN="{p}"\nENVIRONMENT="dev"', [p], ['ENVIRONMENT="dev"']),
        lambda: (f"echo {(q := alnum_password())} | npx wrangler secret put SIGNING_KEY --env production", [q], ["npx wrangler secret put SIGNING_KEY"]),
        lambda: (f"CLOUDFLARE_API_TOKEN={cf} npx wrangler deploy --env production", [cf], ["npx wrangler deploy"]),
    ])


# -- webhooks and signed URLs --------------------------------------------------------------------
def s_webhook(i: int) -> Item:
    org = RNG.choice(ORGS)
    return pick(i, [
        lambda: (f"DISCORD_WEBHOOK=https://discord.com/api/webhooks/{digits(19)}/{(t := run(68, B64URL))}", [t], ["DISCORD_WEBHOOK=https://discord.com/api/webhooks/"]),
        lambda: (f"TEAMS_WEBHOOK_URL=https://prod-{RNG.randrange(10, 99)}.westeurope.logic.azure.com:443/workflows/{hexrun(32)}/triggers/manual/paths/invoke?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig={(t := run(43, B64URL))}", [t], ["api-version=2016-06-01", "TEAMS_WEBHOOK_URL="]),
        lambda: (f"curl -X POST 'https://chat.googleapis.com/v1/spaces/AAAA{run(7, B64URL)}/messages?key={google_api_key()}&token={(t := run(43, B64URL))}' -H 'Content-Type: application/json' -d '{{\"text\": \"deploy done\"}}'", [t], ["deploy done", "https://chat.googleapis.com/v1/spaces/"]),
        lambda: (f"curl -i -X POST -H 'Content-Type: application/json' -d '{{\"text\": \"build green\"}}' https://chat.{org}.io/hooks/{(t := run(26, LOW))}", [t], ["build green", f"https://chat.{org}.io/hooks/"]),
        lambda: (f"https://{org}.webhook.office.com/webhookb2/{uid()}@{uid()}/IncomingWebhook/{(t := hexrun(32))}/{uid()}", [t], ["/IncomingWebhook/", f"https://{org}.webhook.office.com/webhookb2/"]),
        lambda: (f"gh api repos/{org}/{RNG.choice(PROJECTS)}/hooks -f name=web -f config[url]=https://ci.{org}.io/github-webhook/ -f config[secret]={(s := password())}", [s], [f"config[url]=https://ci.{org}.io/github-webhook/"]),
    ])


def s_presigned(i: int) -> Item:
    bucket, region = f"{RNG.choice(ORGS)}-artifacts", RNG.choice(["eu-west-1", "us-east-1", "ap-southeast-2"])
    key = f"builds/{RNG.choice(PROJECTS)}-{semver()}.zip"
    date = f"202612{RNG.randrange(1, 29):02d}"
    token = urllib.parse.quote("IQoJb3JpZ2luX2VjE" + run(300, B64), safe="")
    sig = hexrun(64)
    akid = RNG.choice(["ASIA", "AKIA"]) + run(16, string.ascii_uppercase + "234567")
    s3 = f"https://{bucket}.s3.{region}.amazonaws.com/{key}?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential={akid}%2F{date}%2F{region}%2Fs3%2Faws4_request&X-Amz-Date={date}T091402Z&X-Amz-Expires=3600"
    cf_sig = run(172, AN + "-~") + "__"
    return pick(i, [
        lambda: (f"{s3}&X-Amz-Security-Token={token}&X-Amz-SignedHeaders=host&X-Amz-Signature={sig}", [token, sig], ["X-Amz-Expires=3600", key]),
        lambda: (f"$ aws s3 presign s3://{bucket}/{key} --expires-in 3600\n{s3}&X-Amz-SignedHeaders=host&X-Amz-Signature={sig}", [sig], ["aws s3 presign", "X-Amz-SignedHeaders=host"]),
        lambda: (f"https://storage.googleapis.com/{bucket}/{key}?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Credential=signer%40acme-prod.iam.gserviceaccount.com%2F{date}%2Fauto%2Fstorage%2Fgoog4_request&X-Goog-Date={date}T091402Z&X-Goog-Expires=900&X-Goog-SignedHeaders=host&X-Goog-Signature={(g := hexrun(512))}", [g], ["X-Goog-Expires=900", f"storage.googleapis.com/{bucket}"]),
        lambda: (f"https://d{run(13, LOW)}.cloudfront.net/videos/intro.mp4?Expires=1765000000&Signature={cf_sig}&Key-Pair-Id=K{run(13, string.ascii_uppercase + string.digits)}", [cf_sig], ["Key-Pair-Id=K", "videos/intro.mp4?Expires=1765000000"]),
        lambda: (f"https://storage.googleapis.com/{bucket}/{key}?GoogleAccessId=signer%40acme-prod.iam.gserviceaccount.com&Expires=1765000000&Signature={(g := urllib.parse.quote(b64bytes(256), safe=''))}", [g], ["GoogleAccessId=signer%40acme-prod.iam.gserviceaccount.com", "Expires=1765000000"]),
    ])


# -- password managers and secret stores ----------------------------------------------------------
def s_password_manager(i: int) -> Item:
    p = password()
    totp = run(32, B32)
    return pick(i, [
        lambda: (f'$ op read "op://Prod/Postgres/password"\n{p}', [p], ['op read "op://Prod/Postgres/password"']),
        lambda: (f"$ bw get password github.com\n{p}", [p], ["bw get password github.com"]),
        lambda: (f"$ pass show infra/db/prod\n{p}\nuser: app\nurl: db.prod.internal", [p], ["user: app", "pass show infra/db/prod"]),
        lambda: (f"$ keepassxc-cli show -s -a Password vault.kdbx prod/api\nEnter password to unlock vault.kdbx:\n{p}", [p], ["keepassxc-cli show -s -a Password vault.kdbx prod/api"]),
        lambda: (f"$ lpass show --password prod-db\n{p}", [p], ["lpass show --password prod-db"]),
        lambda: (f'  "login": {{\n    "username": "ci",\n    "password": "{p}",\n    "totp": "{totp}"\n  }},\n  "revisionDate": "2026-11-30T08:12:44.120Z"', [p, totp], ['"username": "ci"', '"revisionDate": "2026-11-30T08:12:44.120Z"']),
    ])


def s_secret_store(i: int) -> Item:
    p, acct = password(), digits(12)
    arn = f"arn:aws:secretsmanager:eu-west-1:{acct}:secret:prod/db-{run(6)}"
    return pick(i, [
        lambda: (f'{{\n    "ARN": "{arn}",\n    "Name": "prod/db",\n    "VersionId": "{uid()}",\n    "SecretString": "{{\\"username\\":\\"app\\",\\"password\\":\\"{p}\\"}}",\n    "VersionStages": ["AWSCURRENT"]\n}}', [p], [arn, '"Name": "prod/db"']),
        lambda: (f"$ gcloud secrets versions access latest --secret=stripe-webhook --project=acme-prod\n{p}", [p], ["gcloud secrets versions access latest --secret=stripe-webhook"]),
        lambda: (f'{{\n  "id": "https://kv-acme.vault.azure.net/secrets/db-password/{hexrun(32)}",\n  "name": "db-password",\n  "value": "{p}"\n}}', [p], ['"name": "db-password"', "https://kv-acme.vault.azure.net/secrets/db-password/"]),
        lambda: (f"====== Data ======\nKey         Value\n---         -----\npassword    {p}\nusername    app", [p], ["====== Data ======", "username    app"]),
        lambda: (f"$ doppler secrets get DB_PASSWORD --plain --config prd\n{p}", [p], ["doppler secrets get DB_PASSWORD --plain"]),
        lambda: (f"$ sops -d secrets.enc.yaml\ndb:\n    user: app\n    password: {p}", [p], ["sops -d secrets.enc.yaml", "user: app"]),
        lambda: (f'{{\n    "Parameter": {{\n        "Name": "/prod/api/db-password",\n        "Type": "SecureString",\n        "Value": "{p}",\n        "Version": 3\n    }}\n}}', [p], ['"Type": "SecureString"', '"Name": "/prod/api/db-password"']),
    ])


# -- OAuth, sessions, second factors -----------------------------------------------------------------
def s_oauth(i: int) -> Item:
    secret, okta_id = run(40, B64URL), "0oa" + run(17)
    at, rt = "ya29.a0" + run(RNG.choice([150, 200]), B64URL), google_refresh()
    cid = google_client_id()
    gocspx = "GOCSPX-" + run(28, B64URL)
    return pick(i, [
        lambda: (f'{{\n  "access_token": "{at}",\n  "expires_in": 3599,\n  "refresh_token": "{rt}",\n  "scope": "openid https://www.googleapis.com/auth/userinfo.email",\n  "token_type": "Bearer",\n  "id_token": "{(idt := jwt())}"\n}}', [at, rt, idt], ['"token_type": "Bearer"', '"expires_in": 3599']),
        lambda: (f"curl -X POST https://auth.acme.io/oauth/token -d grant_type=client_credentials -d client_id={okta_id} -d client_secret={secret}", [secret], ["grant_type=client_credentials", f"client_id={okta_id}"]),
        lambda: (f"POST /oauth2/v1/token HTTP/1.1\nContent-Type: application/x-www-form-urlencoded\n\ngrant_type=refresh_token&refresh_token={(r := run(64, B64URL))}&client_id={okta_id}&client_secret={secret}", [r, secret], [f"client_id={okta_id}", "grant_type=refresh_token"]),
        lambda: (f'{{"installed":{{"client_id":"{cid}","project_id":"acme-cli","auth_uri":"https://accounts.google.com/o/oauth2/auth","token_uri":"https://oauth2.googleapis.com/token","client_secret":"{gocspx}","redirect_uris":["http://localhost"]}}}}', [gocspx], [cid, '"project_id":"acme-cli"']),
        lambda: (f"curl -u {okta_id}:{secret} -d grant_type=client_credentials -d scope=api.read https://acme.okta.com/oauth2/default/v1/token", [secret], [okta_id, "scope=api.read"]),
        lambda: (f"GITHUB_CLIENT_ID=Iv1.{hexrun(16)}\nGITHUB_CLIENT_SECRET={(g := hexrun(40))}\nGITHUB_CALLBACK_URL=http://localhost:3000/auth/github/callback", [g], ["GITHUB_CLIENT_ID=Iv1.", "GITHUB_CALLBACK_URL=http://localhost:3000/auth/github/callback"]),
    ])


def s_cookie(i: int) -> Item:
    sid = "s%3A" + run(32, B64URL) + "." + urllib.parse.quote(run(43, B64), safe="")
    blob = json.dumps({"iv": b64bytes(16), "value": b64bytes(48), "mac": hexrun(64), "tag": ""}, separators=(",", ":"))
    laravel = urllib.parse.quote(base64.b64encode(blob.encode()).decode(), safe="")
    xsrf = urllib.parse.quote(base64.b64encode(json.dumps({"iv": b64bytes(16), "value": b64bytes(48), "mac": hexrun(64)}, separators=(",", ":")).encode()).decode(), safe="")
    return pick(i, [
        lambda: (f"< HTTP/1.1 200 OK\n< Set-Cookie: connect.sid={sid}; Path=/; Expires=Sat, 05 Dec 2026 10:00:00 GMT; HttpOnly", [sid], ["Path=/;", "< HTTP/1.1 200 OK"]),
        lambda: (f"curl 'https://app.acme.io/api/me' -H 'accept: application/json' -H 'cookie: XSRF-TOKEN={xsrf}; laravel_session={laravel}'", [laravel], ["accept: application/json", "https://app.acme.io/api/me"]),
        lambda: (f"Cookie: JSESSIONID={(j := run(32, '0123456789ABCDEF'))}; Path=/app", [j], ["Path=/app"]),
        lambda: (f"[05-Dec-2026 09:14:02 UTC] Session started: PHPSESSID={(s := run(26, LOW))} user_id=4412", [s], ["user_id=4412", "Session started"]),
        lambda: (f"Set-Cookie: _shop_session={(s := urllib.parse.quote(b64bytes(96), safe='') + '--' + urllib.parse.quote(b64bytes(12), safe='') + '--' + urllib.parse.quote(b64bytes(16), safe=''))}; path=/; secure; httponly; samesite=lax", [s], ["samesite=lax"]),
    ])


def s_totp(i: int) -> Item:
    seed = run(RNG.choice([16, 32]), B32)
    return pick(i, [
        lambda: (f"otpauth://totp/ACME:jane%40acme.io?secret={seed}&issuer=ACME&algorithm=SHA1&digits=6&period=30", [seed], ["issuer=ACME", "otpauth://totp/ACME:jane%40acme.io"]),
        lambda: (f"oathtool --totp -b {seed}\n{digits(6)}", [seed], ["oathtool --totp -b"]),
        lambda: ("$ cat ~/Downloads/github-recovery-codes.txt\n" + "\n".join(codes := [f"{hexrun(5)}-{hexrun(5)}" for _ in range(16)]), codes, ["github-recovery-codes.txt"]),
        lambda: (f"Can't scan the QR code? Enter this setup key instead:\n{(g := ' '.join(seed[k:k + 4] for k in range(0, len(seed), 4)))}", [g], ["Enter this setup key instead"]),
        lambda: (f'import pyotp\ncode = pyotp.TOTP("{seed}").now()', [seed], [".now()", "import pyotp"]),
    ])


# -- database and shell sessions ---------------------------------------------------------------------
def s_db_session(i: int) -> Item:
    p, user = password(), RNG.choice(USERS)
    return pick(i, [
        lambda: (f"app=# ALTER ROLE {user} WITH PASSWORD '{p}';\nALTER ROLE", [p], [f"ALTER ROLE {user} WITH PASSWORD"]),
        lambda: (f"mysql> CREATE USER '{user}'@'%' IDENTIFIED BY '{p}';\nQuery OK, 0 rows affected (0.01 sec)", [p], ["Query OK, 0 rows affected", f"CREATE USER '{user}'@'%'"]),
        lambda: (f'127.0.0.1:6379> CONFIG GET requirepass\n1) "requirepass"\n2) "{p}"', [p], ['1) "requirepass"', "CONFIG GET requirepass"]),
        lambda: (f'test> db.createUser({{ user: "{user}", pwd: "{p}", roles: [ {{ role: "readWrite", db: "shop" }} ] }})\n{{ ok: 1 }}', [p], ['role: "readWrite"', f'user: "{user}"']),
        lambda: (f'$ rabbitmqctl add_user {user} {p}\nAdding user "{user}" ...', [p], [f'Adding user "{user}" ...']),
        lambda: (f"1> ALTER LOGIN sa WITH PASSWORD = '{p}';\n2> GO", [p], ["2> GO", "ALTER LOGIN sa"]),
    ])


def s_history(i: int) -> Item:
    p, k = alnum_password(), run(32)
    return pick(i, [
        lambda: (f" 1041  cd ~/src/api\n 1042  export ACME_API_KEY={k}\n 1043  gh pr list", [k], ["gh pr list", "cd ~/src/api"]),
        lambda: (f"0 3 * * * PGPASSWORD={p} pg_dump -h db.internal -U backup shop > /backups/shop.sql", [p], ["0 3 * * *", "/backups/shop.sql"]),
        lambda: (f'spawn ssh deploy@10.0.4.21\nexpect "password:"\nsend "{p}\\r"\ninteract', [p], ['expect "password:"', "spawn ssh deploy@10.0.4.21"]),
        lambda: (f"echo '{p}' | sudo -S systemctl restart nginx", [p], ["sudo -S systemctl restart nginx"]),
        lambda: (f": 1764900000:0;mysql -h db.internal -u root -p{p} shop\n: 1764900042:0;git status", [p], [": 1764900042:0;git status"]),
        lambda: (f'echo "{p}" > ~/.vault_pass && chmod 600 ~/.vault_pass', [p], ["chmod 600 ~/.vault_pass"]),
    ])


# -- framework and crash output -------------------------------------------------------------------------
def s_framework(i: int) -> Item:
    p, q = password(), alnum_password()
    return pick(i, [
        lambda: (f"CELERY_BROKER_URL\t'redis://:{q}@redis:6379/0'\nDATABASES\t{{'default': {{'ENGINE': 'django.db.backends.postgresql', 'HOST': 'db', 'NAME': 'app', 'PASSWORD': '********************', 'PORT': '5432', 'USER': 'app'}}}}", [q], ["'PASSWORD': '********************'", "'ENGINE': 'django.db.backends.postgresql'"]),
        lambda: (f"$ bin/rails credentials:show\nsecret_key_base: {(h := hexrun(128))}\naws:\n  access_key_id: AKIA{run(16, string.ascii_uppercase + '234567')}\n  secret_access_key: {(s := run(40, B64))}", [h, s], ["bin/rails credentials:show"]),
        lambda: (f'"properties": {{\n  "spring.datasource.password": {{ "value": "******" }},\n  "app.payments.api-key": {{\n    "value": "{p}",\n    "origin": "class path resource [application.yml] - 14:16"\n  }}\n}}', [p], ['"value": "******"', '"origin": "class path resource [application.yml] - 14:16"']),
        lambda: (f"> config('services.mailgun.secret')\n= \"{(m := hexrun(32) + '-' + hexrun(8) + '-' + hexrun(8))}\"", [m], ["config('services.mailgun.secret')"]),
        lambda: (f'  File "/app/app.py", line 12, in <module>\n    app.config["SECRET_KEY"] = "{p}"\nKeyError: \'DATABASE_URL\'', [p], ['File "/app/app.py", line 12', "KeyError: 'DATABASE_URL'"]),
        lambda: (f"NEXT_PUBLIC_API_URL=https://api.acme.io\nAUTH_SECRET={(a := b64bytes(32))}", [a], ["NEXT_PUBLIC_API_URL=https://api.acme.io"]),
    ])


def s_crash(i: int) -> Item:
    p, t = password(), run(40, B64URL)
    return pick(i, [
        lambda: (f'"request": {{\n  "url": "https://api.acme.io/v1/charge",\n  "headers": {{\n    "Authorization": "[Filtered]",\n    "X-Partner-Key": "{p}"\n  }}\n}}', [p], ['"Authorization": "[Filtered]"', '"url": "https://api.acme.io/v1/charge"']),
        lambda: (f'{{"category": "httplib", "data": {{"url": "https://api.acme.io/v2/export?access_token={t}", "method": "GET", "status_code": 200}}, "level": "info"}}', [t], ['"category": "httplib"', '"status_code": 200']),
        lambda: (f'"environmentVariables": {{\n  "NODE_ENV": "production",\n  "SMTP_PASS": "{p}",\n  "TZ": "UTC"\n}}', [p], ['"NODE_ENV": "production"', '"TZ": "UTC"']),
        lambda: (f'"metaData": {{\n  "app": {{ "releaseStage": "production" }},\n  "config": {{ "apiSecret": "{p}" }}\n}}', [p], ['"releaseStage": "production"']),
    ])


# -- a secret-scanner catalogue: vendor, value, conventional env name, documented command ----------
def asana() -> str:
    return f"2/{digits(16)}/{digits(16)}:{hexrun(32)}"


VENDORS: list[tuple[str, Callable[[], str], str, str]] = [
    ("Atlassian", lambda: "ATATT3xFfGF0" + run(171, B64URL) + "=" + run(8, "0123456789ABCDEF"), "ATLASSIAN_API_TOKEN", "curl -u jane@acme.io:{t} -H 'Accept: application/json' https://acme.atlassian.net/rest/api/3/myself"),
    ("Asana", asana, "ASANA_ACCESS_TOKEN", 'curl https://app.asana.com/api/1.0/users/me -H "Authorization: Bearer {t}"'),
    ("Bitbucket", lambda: "ATBB" + run(24) + run(8, "0123456789ABCDEF"), "BITBUCKET_APP_PASSWORD", "git clone https://jane:{t}@bitbucket.org/acme/shop.git"),
    ("Contentful", lambda: "CFPAT-" + run(43, B64URL), "CONTENTFUL_MANAGEMENT_TOKEN", "contentful login --management-token {t}"),
    ("Datadog", lambda: hexrun(32), "DD_API_KEY", 'curl -X GET "https://api.datadoghq.eu/api/v1/validate" -H "DD-API-KEY: {t}"'),
    ("Dropbox", lambda: "sl.u." + run(RNG.choice([135, 150]), B64URL), "DROPBOX_ACCESS_TOKEN", 'curl -X POST https://api.dropboxapi.com/2/users/get_current_account --header "Authorization: Bearer {t}"'),
    ("Duffel", lambda: RNG.choice(["duffel_live_", "duffel_test_"]) + run(43, B64URL), "DUFFEL_ACCESS_TOKEN", 'curl https://api.duffel.com/air/airlines -H "Duffel-Version: v2" -H "Authorization: Bearer {t}"'),
    ("EasyPost", lambda: RNG.choice(["EZAK", "EZTK"]) + run(54), "EASYPOST_API_KEY", "curl -X GET https://api.easypost.com/v2/addresses -u {t}:"),
    ("Figma", lambda: "figd_" + run(40, B64URL), "FIGMA_TOKEN", 'curl -H "X-Figma-Token: {t}" https://api.figma.com/v1/me'),
    ("Flutterwave", lambda: RNG.choice(["FLWSECK-", "FLWSECK_TEST-"]) + hexrun(32) + "-X", "FLW_SECRET_KEY", 'curl https://api.flutterwave.com/v3/transactions -H "Authorization: Bearer {t}"'),
    ("GoCardless", lambda: "live_" + run(40, B64URL), "GOCARDLESS_ACCESS_TOKEN", 'curl https://api.gocardless.com/customers -H "Authorization: Bearer {t}" -H "GoCardless-Version: 2015-07-06"'),
    ("Heroku", lambda: "HRKU-AA" + run(58, B64URL), "HEROKU_API_KEY", 'curl -n https://api.heroku.com/apps -H "Accept: application/vnd.heroku+json; version=3" -H "Authorization: Bearer {t}"'),
    ("Intercom", lambda: base64.b64encode(f"tok:{uid()}:1:0".encode()).decode(), "INTERCOM_ACCESS_TOKEN", "curl https://api.intercom.io/me -H 'Authorization: Bearer {t}' -H 'Intercom-Version: 2.11'"),
    ("Mailchimp", lambda: hexrun(32) + f"-us{RNG.randrange(1, 21)}", "MAILCHIMP_API_KEY", "curl --user 'anystring:{t}' https://us6.api.mailchimp.com/3.0/ping"),
    ("Okta", lambda: "00" + run(40, B64URL), "OKTA_API_TOKEN", 'curl -H "Authorization: SSWS {t}" https://acme.okta.com/api/v1/users?limit=25'),
    ("PlanetScale", lambda: RNG.choice(["pscale_tkn_", "pscale_pw_"]) + run(43, B64URL), "PLANETSCALE_SERVICE_TOKEN", "pscale database list --org acme --service-token-id ci-deploy --service-token {t}"),
    ("Pulumi", lambda: "pul-" + hexrun(40), "PULUMI_ACCESS_TOKEN", "pulumi login --non-interactive https://api.pulumi.com <<< {t}"),
    ("Shippo", lambda: RNG.choice(["shippo_live_", "shippo_test_"]) + hexrun(40), "SHIPPO_API_TOKEN", 'curl https://api.goshippo.com/addresses/ -H "Authorization: ShippoToken {t}"'),
    ("Square", lambda: "EAAA" + run(60, B64URL), "SQUARE_ACCESS_TOKEN", 'curl https://connect.squareup.com/v2/locations -H "Square-Version: 2024-11-20" -H "Authorization: Bearer {t}"'),
    ("Telegram", lambda: f"{digits(10)}:AA{run(33, B64URL)}", "TELEGRAM_BOT_TOKEN", "curl https://api.telegram.org/bot{t}/getMe"),
    ("Typeform", lambda: "tfp_" + run(44, B64URL) + "_" + run(14), "TYPEFORM_TOKEN", 'curl https://api.typeform.com/forms -H "Authorization: Bearer {t}"'),
    ("Vault batch", lambda: "hvb.AAAAAQ" + run(RNG.choice([132, 160]), B64URL), "VAULT_TOKEN", "VAULT_TOKEN={t} vault kv get -mount=secret payments/db"),
    ("age", lambda: "AGE-SECRET-KEY-1" + run(58, "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"), "SOPS_AGE_KEY", "echo {t} > ~/.config/sops/age/keys.txt"),
    ("Doppler", lambda: "dp.pt." + run(43), "DOPPLER_TOKEN", "doppler configure set token {t} --scope /"),
]

PROSE = ["here's the {v} token the vendor emailed, use it for the smoke test: {t}", "{v} keeps returning 401 for {t}, is it the wrong scope?",
         "the old {v} key was {t} (revoked yesterday, I think)", "can you wire up the {v} client? key is {t}",
         "Please store this {v} credential somewhere safe: {t}", "debug: {v} auth failed with token={t} retry=3"]


def s_vendor_prose(i: int) -> Item:
    v, make, _, _ = VENDORS[i % len(VENDORS)]
    t, template = make(), PROSE[i % len(PROSE)]
    literal = max((part.strip(" ,:=(") for part in template.replace("{v}", "{t}").split("{t}")), key=len)
    return template.format(v=v, t=t), [t], [v, literal]


def s_vendor_command(i: int) -> Item:
    v, make, _, command = VENDORS[i % len(VENDORS)]
    t = make()
    if v == "Mailchimp":  # the API host names the key's datacenter
        command = command.replace("us6", t.rsplit("-", 1)[1])
    text = command.format(t=t)
    words = text.split()
    url = next((w.strip("'\"") for w in words if "https://" in w and t not in w), "")
    first = next(w for w in words if t not in w and w not in t)
    return text, [t], [w for w in (first, url) if w]


def s_vendor_config(i: int) -> Item:
    _, make, env, _ = VENDORS[i % len(VENDORS)]
    t = make()
    shape = i % 4
    if shape == 0:
        return f"{env}={t}\nLOG_LEVEL=info", [t], [env, "LOG_LEVEL=info"]
    if shape == 1:
        return f"integrations:\n  {env.lower()}: \"{t}\"\n  timeout_s: 10", [t], [env.lower(), "timeout_s: 10"]
    if shape == 2:
        return f'{{\n  "{env}": "{t}",\n  "region": "eu"\n}}', [t], [env, '"region": "eu"']
    return f'[env]\n{env} = "{t}"\nRUST_LOG = "info"', [t], [env, 'RUST_LOG = "info"']


SECRET_FAMILIES: list[tuple[str, str, Callable[[int], Item], int]] = [
    ("ci", "gha-log", s_gha_log, 5), ("ci", "gha-workflow", s_gha_workflow, 5), ("ci", "gitlab-ci", s_gitlab, 6),
    ("ci", "jenkins", s_jenkins, 5), ("ci", "ci-env", s_ci_env, 6), ("ci", "xtrace", s_xtrace, 6),
    ("mobile", "firebase-config", s_firebase, 4), ("mobile", "android-signing", s_android, 6),
    ("mobile", "apple-signing", s_apple, 6), ("mobile", "electron-builder", s_electron, 4),
    ("ide", "ide-config", s_ide, 6), ("ide", "api-client", s_api_client, 6),
    ("platform", "heroku", s_heroku, 4), ("platform", "vercel-netlify", s_vercel_netlify, 4),
    ("platform", "fly-render-railway", s_fly_render, 4), ("platform", "iac-parameters", s_iac, 6),
    ("platform", "firebase-supabase-cloudflare", s_baas, 6),
    ("webhook", "webhook-url", s_webhook, 6), ("webhook", "signed-url", s_presigned, 5),
    ("secret-store", "password-manager", s_password_manager, 6), ("secret-store", "cloud-secret-store", s_secret_store, 7),
    ("oauth", "oauth-exchange", s_oauth, 6), ("oauth", "session-cookie", s_cookie, 5), ("oauth", "totp-recovery", s_totp, 5),
    ("shell", "db-session", s_db_session, 6), ("shell", "history-cron", s_history, 6),
    ("framework", "framework-debug", s_framework, 6), ("framework", "crash-report", s_crash, 4),
    ("vendor", "vendor-prose", s_vendor_prose, len(VENDORS)), ("vendor", "vendor-command", s_vendor_command, len(VENDORS)),
    ("vendor", "vendor-config", s_vendor_config, len(VENDORS)),
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
            out.append({"id": f"fs{len(out):03d}", "where": where, "family": family, "text": text, "secrets": secrets,
                        "keep": [k for k in keep if k and not any(k in s or s in k for s in secrets)]})
            made += 1
    family_split(out, "field-secrets")
    return out


# -- identities -------------------------------------------------------------------------------------
def org_proj() -> tuple[str, str]:
    return RNG.choice(ORGS), RNG.choice(PROJECTS)


def i_ci_run() -> list[Callable[[], str]]:
    o, p = org_proj()
    return [
        lambda: f"https://github.com/{o}/{p}/actions/runs/{digits(11)}/job/{digits(11)}",
        lambda: f"GITHUB_RUN_ID={digits(11)}\nGITHUB_RUN_NUMBER={RNG.randrange(1, 9000)}\nGITHUB_RUN_ATTEMPT=1",
        lambda: f"https://gitlab.com/{o}/{p}/-/jobs/{digits(10)}",
        lambda: f"CI_PIPELINE_ID={digits(10)} CI_JOB_ID={digits(10)} CI_PROJECT_ID={digits(8)}",
        lambda: f"https://jenkins.{o}.io/job/{p}/job/main/{RNG.randrange(1, 3000)}/console",
        lambda: f"https://buildkite.com/{o}/{p}/builds/{RNG.randrange(1, 30000)}#{uid()}",
        lambda: f"https://app.circleci.com/pipelines/github/{o}/{p}/{RNG.randrange(1, 9000)}/workflows/{uid()}",
        lambda: f"Started by GitHub push by {RNG.choice(USERS)}\nRunning on agent-{hexrun(8)} in /home/jenkins/workspace/{p}_main",
        lambda: f"https://dev.azure.com/{o}/{p}/_build/results?buildId={digits(6)}&view=logs&j={uid()}",
        lambda: f"CIRCLE_WORKFLOW_ID={uid()}\nCIRCLE_BUILD_NUM={RNG.randrange(1, 90000)}",
    ]


def i_ci_log() -> list[Callable[[], str]]:
    o, p = org_proj()
    return [
        lambda: logged([f"##[group]Run actions/checkout@{hexrun(40)}", "with:", f"  repository: {o}/{p}", "  token: ***", "##[endgroup]"]),
        lambda: logged([f"Current runner version: '2.32{RNG.randrange(0, 9)}.{RNG.randrange(0, 3)}'", f"Runner name: 'GitHub Actions {RNG.randrange(1, 200)}'", "Image: ubuntu-24.04", f"Version: 2024{RNG.randrange(10, 13)}{RNG.randrange(10, 29)}.1.0"]),
        lambda: logged([f"Download action repository 'actions/setup-node@v4' (SHA:{hexrun(40)})"]),
        lambda: logged([f"HEAD is now at {hexrun(7)} Merge {hexrun(40)} into {hexrun(40)}"]),
        lambda: logged([f"Cache restored from key: node-cache-Linux-x64-npm-{hexrun(64)}"]),
        lambda: f"Running with gitlab-runner 17.{RNG.randrange(0, 8)}.{RNG.randrange(0, 3)} (v17.{RNG.randrange(0, 8)}.0)\n  on docker-runner-0{RNG.randrange(1, 9)} {run(8, LOW)}, system ID: s_{hexrun(12)}",
        lambda: f"$ npm ci\nadded {RNG.randrange(300, 2000)} packages, and audited {RNG.randrange(300, 2000)} packages in {RNG.randrange(5, 90)}s",
        lambda: "[Pipeline] { (Deploy)\n[Pipeline] withCredentials\nMasking supported pattern matches of $DEPLOY_TOKEN\n[Pipeline] {",
        lambda: logged([f"Artifact dist.zip successfully finalized. Artifact ID {digits(10)}", f"Artifact download URL: https://github.com/{o}/{p}/actions/runs/{digits(11)}/artifacts/{digits(10)}"]),
        lambda: logged(["##[error]Process completed with exit code 1."]) + f"\nerror: tests/{p.replace('-', '_')}/test_login.py::test_refresh_token failed",
    ]


def i_masked() -> list[Callable[[], str]]:
    k = RNG.choice(KEYS)
    return [
        lambda: f"{k}: ***",
        lambda: f"{ts()} + curl -H 'Authorization: Bearer ***' https://api.{RNG.choice(ORGS)}.io/v1/deploy",
        lambda: f"Card: Visa ****{digits(4)} (expires 0{RNG.randrange(1, 9)}/2{RNG.randrange(7, 9)})",
        lambda: f"{k.lower()}: <redacted>",
        lambda: f"{k}=[MASKED]",
        lambda: '"headers": {"Authorization": "[Filtered]", "Cookie": "[Filtered]"}',
        lambda: f'"{RNG.choice(["spring.datasource.password", "spring.mail.password", "app.jwt.secret"])}": {{ "value": "******" }}',
        lambda: f"DATABASE_URL: postgres://app:********@db:5432/{RNG.choice(['app', 'shop', 'ledger'])}",
        lambda: f'Parameters: {{"email"=>"{RNG.choice(USERS)}@acme.io", "password"=>"[FILTERED]", "remember_me"=>"1"}}',
        lambda: f"      Name                    Value             Type    Location\n      ----                    -----             ----    --------\n   profile                <not set>             None    None\naccess_key     ****************{run(4, UP)} shared-credentials-file\nsecret_key     ****************{run(4, UP)} shared-credentials-file",
        lambda: f"'PASSWORD': '********************', 'PORT': '{RNG.choice([5432, 3306])}'",
        lambda: f"{k}  ••••••••  Production, Preview  {RNG.randrange(1, 90)}d ago",
    ]


def i_reference() -> list[Callable[[], str]]:
    k, p = RNG.choice(KEYS), RNG.choice(PROJECTS)
    return [
        lambda: f"password: ${{{{ secrets.{k} }}}}",
        lambda: f"withCredentials([string(credentialsId: '{p}-token', variable: '{k}')]) {{",
        lambda: f'{k}="op://Prod/{p}/{RNG.choice(["password", "credential", "api key"])}"',
        lambda: f"{{{{resolve:secretsmanager:prod/{p}/db:SecretString:password}}}}",
        lambda: f"DbPassword: '{{{{resolve:ssm-secure:/prod/{p}/db-password:1}}}}'",
        lambda: f"STRIPE_KEY: ${{ssm:/prod/{p}/stripe-key}}",
        lambda: 'db_password = config.require_secret("dbPassword")',
        lambda: "docker login -u gitlab-ci-token -p $CI_JOB_TOKEN $CI_REGISTRY",
        lambda: 'storePassword System.getenv("KEYSTORE_PASSWORD")',
        lambda: "apksigner sign --ks release.jks --ks-pass env:KS_PASS --key-pass file:/run/secrets/key_pass app.apk",
        lambda: 'xcrun notarytool submit build/App.zip --keychain-profile "AC_PASSWORD" --wait',
        lambda: f"vault:secret/data/{p}#password",
        lambda: f"TARGET: ${{{{ vars.{k.replace('PASSWORD', 'HOST')} }}}}",
        lambda: f"echo \"$KEYSTORE_B64\" | base64 -d > release.jks && ./gradlew bundleRelease -PstorePassword=\"${k}\"",
    ]


def i_ciphertext() -> list[Callable[[], str]]:
    def enc(n: int) -> str:
        return f"ENC[AES256_GCM,data:{b64bytes(n)},iv:{b64bytes(32)},tag:{b64bytes(16)},type:str]"
    return [
        lambda: f"password: {enc(RNG.randrange(12, 40))}",
        lambda: f"sops:\n    age:\n        - recipient: age1{run(58, 'qpzry9x8gf2tvdw0s3jn54khce6mua7l')}\n    lastmodified: \"2026-12-05T09:14:02Z\"\n    mac: {enc(32)}\n    version: 3.9.1",
        lambda: f"config:\n  {RNG.choice(PROJECTS)}:dbPassword:\n    secure: v1:{b64bytes(12)}:{b64bytes(RNG.randrange(30, 60))}",
        lambda: "$ANSIBLE_VAULT;1.1;AES256\n" + "\n".join(hexrun(80) for _ in range(RNG.randrange(3, 6))),
        lambda: f"  encryptedData:\n    password: AgB{b64bytes(RNG.randrange(500, 540))}",
        lambda: f'env:\n  global:\n    secure: "{b64bytes(256)}"',
        lambda: f"<password>{{AQAAABAAAAAQ{b64bytes(48)}}}</password>",
        lambda: f"$ cat config/credentials.yml.enc\n{b64bytes(RNG.randrange(200, 400))}--{b64bytes(12)}--{b64bytes(16)}",
        lambda: f'"db_password": "EJ[1:{b64bytes(32)}:{b64bytes(24)}:{b64bytes(RNG.randrange(24, 40))}]"',
        lambda: "-----BEGIN AGE ENCRYPTED FILE-----\n" + "\n".join(run(64, B64) for _ in range(4)) + "\n-----END AGE ENCRYPTED FILE-----",
    ]


def i_firebase_ids() -> list[Callable[[], str]]:
    num, proj = digits(12), f"{RNG.choice(PROJECTS)}-{digits(4)}"
    return [
        lambda: f'"mobilesdk_app_id": "1:{num}:android:{hexrun(16)}"',
        lambda: f"<key>GOOGLE_APP_ID</key>\n<string>1:{num}:ios:{hexrun(16)}</string>",
        lambda: f'appId: "1:{num}:web:{hexrun(22)}"',
        lambda: f'"project_id": "{proj}",\n"project_number": "{num}"',
        lambda: f'storageBucket: "{proj}.firebasestorage.app"',
        lambda: f'measurementId: "G-{run(10, UP)}"',
        lambda: f"<key>CLIENT_ID</key>\n<string>{google_client_id()}</string>",
        lambda: f"<key>REVERSED_CLIENT_ID</key>\n<string>com.googleusercontent.apps.{google_client_id().split('.apps')[0]}</string>",
        lambda: f"$ firebase use {proj}\nNow using project {proj}",
        lambda: f'databaseURL: "https://{proj}-default-rtdb.europe-west1.firebasedatabase.app"',
        lambda: f'messagingSenderId: "{num}"',
        lambda: f"Project Console: https://console.firebase.google.com/project/{proj}/overview",
    ]


def i_public_by_docs() -> list[Callable[[], str]]:
    def mapbox() -> str:
        head = base64.urlsafe_b64encode(json.dumps({"u": RNG.choice(USERS), "a": run(25, LOW)}, separators=(",", ":")).encode()).decode().rstrip("=")
        return f"pk.{head}.{run(22, B64URL)}"
    return [
        lambda: f"NEXT_PUBLIC_STRIPE_PUBLISHABLE_KEY=pk_live_{run(99)}",
        lambda: f"const stripe = Stripe('pk_test_{run(RNG.choice([24, 99]))}');",
        lambda: f"SENTRY_DSN=https://{hexrun(32)}@o{digits(6)}.ingest.sentry.io/{digits(7)}",
        lambda: f'Sentry.init({{ dsn: "https://{hexrun(32)}@o{digits(7)}.ingest.de.sentry.io/{digits(16)}", tracesSampleRate: 0.1 }});',
        lambda: f"NEXT_PUBLIC_SUPABASE_PUBLISHABLE_KEY=sb_publishable_{run(31, B64URL)}",
        lambda: f"mapboxgl.accessToken = '{mapbox()}';",
        lambda: f'<div class="g-recaptcha" data-sitekey="6L{run(38, B64URL)}"></div>',
        lambda: f"GOOGLE_CLIENT_ID={google_client_id()}",
        lambda: f"OKTA_CLIENT_ID=0oa{run(17)}\nOKTA_ISSUER=https://acme.okta.com/oauth2/default",
        lambda: f"posthog.init('phc_{run(43)}', {{ api_host: 'https://eu.i.posthog.com' }})",
        lambda: f"AUTH0_DOMAIN=acme.eu.auth0.com\nAUTH0_CLIENT_ID={run(32)}",
    ]


def colon(n: int) -> str:
    """A certificate fingerprint as keytool prints it (upper-case hex pairs and colons)."""
    return ":".join(run(2, "0123456789ABCDEF") for _ in range(n))


def i_mobile_ids() -> list[Callable[[], str]]:
    app, team = f"com.{RNG.choice(ORGS).replace('-', '')}.{RNG.choice(['payments', 'wallet', 'shop', 'app'])}", run(10, UP)
    return [
        lambda: f"PRODUCT_BUNDLE_IDENTIFIER = {app}",
        lambda: f'applicationId "{app}"\nversionCode {RNG.randrange(1, 900)}\nversionName "{semver()}"',
        lambda: f"<key>UUID</key>\n<string>{uid().upper()}</string>",
        lambda: f"PROVISIONING_PROFILE_SPECIFIER = match AppStore {app}",
        lambda: f"DEVELOPMENT_TEAM = {team}",
        lambda: f"keyAlias={RNG.choice(['upload', 'release', 'androiddebugkey'])}\nstoreFile=../{RNG.choice(['upload-keystore.jks', 'release.keystore'])}",
        lambda: f"Alias name: upload\nEntry type: PrivateKeyEntry\nCertificate fingerprints:\n\t SHA1: {colon(20)}\n\t SHA256: {colon(32)}",
        lambda: f"key_id: {run(10, UP)}\nissuer_id: {uid()}\nkey_filepath: ./AuthKey_{run(10, UP)}.p8",
        lambda: f"~/Library/MobileDevice/Provisioning Profiles/{uid()}.mobileprovision",
        lambda: f'Signing Identity:     "Apple Distribution: Acme Inc. ({team})"',
        lambda: f"Signer #1 certificate DN: CN=Acme, O=Acme Inc, C=DE\nSigner #1 certificate SHA-256 digest: {hexrun(64)}",
        lambda: f"CFBundleVersion: {RNG.randrange(1, 2000)}\nCFBundleShortVersionString: {semver()}",
    ]


def i_env_names() -> list[Callable[[], str]]:
    ks = RNG.sample(KEYS, 3)
    o, p = org_proj()
    return [
        lambda: "NAME" + " " * 18 + "UPDATED\n" + "\n".join(f"{k:<22}about {RNG.randrange(2, 11)} months ago" for k in ks),
        lambda: f"> Environment Variables found for {o}/{p} [{RNG.randrange(80, 900)}ms]\n\n name  value  environments  created\n {ks[0]}  Encrypted  Production, Preview  {RNG.randrange(1, 90)}d ago",
        lambda: "NAME\tDIGEST\tCREATED AT\n" + "\n".join(f"{k}\t{hexrun(16)}\t{RNG.randrange(1, 59)}m ago" for k in ks),
        lambda: "$ heroku config --shell | cut -d= -f1\n" + "\n".join(ks),
        lambda: "$ doppler secrets --only-names\n" + "\n".join(ks),
        lambda: "$ aws secretsmanager list-secrets --query 'SecretList[].Name'\n" + json.dumps([f"prod/{p}/{k.lower()}" for k in ks], indent=4),
        lambda: "$ kubectl get secret app-env -o jsonpath='{.data}' | jq -r 'keys[]'\n" + "\n".join(ks),
        lambda: "KEY               PROTECTED   MASKED   EXPANDED   SCOPE\n" + "\n".join(f"{k:<18}true        true     false      production" for k in ks),
        lambda: "$ printenv | cut -d= -f1 | grep -iE 'token|secret|pass'\n" + "\n".join(ks),
        lambda: f"env:\n  NODE_ENV: production\n  {ks[0]}: ${{{{ secrets.{ks[0]} }}}}",
    ]


def i_ide_config() -> list[Callable[[], str]]:
    p = RNG.choice(PROJECTS)
    return [
        lambda: '{\n  "type": "debugpy",\n  "request": "launch",\n  "name": "API",\n  "module": "uvicorn",\n  "args": ["app.main:app", "--reload"],\n  "envFile": "${workspaceFolder}/.env"\n}',
        lambda: f'"cwd": "${{workspaceFolder}}/services/{p}"',
        lambda: f'<data-source source="LOCAL" name="{RNG.choice(["app", "shop", "ledger"])}@localhost" uuid="{uid()}">\n  <driver-ref>postgresql</driver-ref>\n  <jdbc-url>jdbc:postgresql://localhost:5432/app</jdbc-url>\n</data-source>',
        lambda: f'<component name="ProjectId" id="{run(27)}" />',
        lambda: "GET {{host}}/v1/orders\nAuthorization: Bearer {{$dotenv API_TOKEN}}",
        lambda: f'"info": {{\n  "_postman_id": "{uid()}",\n  "name": "{p}",\n  "schema": "https://schema.getpostman.com/json/collection/v2.1.0/collection.json",\n  "_exporter_id": "{digits(8)}"\n}}',
        lambda: f'"_id": "req_{hexrun(32)}",\n"parentId": "wrk_{hexrun(32)}"',
        lambda: '"python.defaultInterpreterPath": "${workspaceFolder}/.venv/bin/python"',
        lambda: '"image": "mcr.microsoft.com/devcontainers/typescript-node:1-20-bookworm",\n"postCreateCommand": "npm ci"',
        lambda: '{"key": "apiKey", "value": "", "type": "secret", "enabled": true}',
        lambda: "vars:secret [\n  apiKey,\n  clientSecret\n]",
        lambda: f'<option name="RECENT_GIT_ROOT_PATH" value="$PROJECT_DIR$/{p}" />',
    ]


def i_unsigned_url() -> list[Callable[[], str]]:
    bucket = f"{RNG.choice(ORGS)}-{RNG.choice(['artifacts', 'releases', 'uploads'])}"
    key = f"{RNG.choice(['builds', 'media', 'exports'])}/{RNG.choice(PROJECTS)}-{semver()}.{RNG.choice(['zip', 'apk', 'tar.gz'])}"
    return [
        lambda: f"https://{bucket}.s3.{RNG.choice(['eu-west-1', 'us-east-2'])}.amazonaws.com/{key}",
        lambda: f"aws s3 presign s3://{bucket}/{key} --expires-in 3600",
        lambda: f"upload: dist/app.zip to s3://{bucket}/{key}",
        lambda: f"arn:aws:s3:::{bucket}/{key}",
        lambda: f"gs://{bucket}/{key}",
        lambda: f"https://storage.googleapis.com/{bucket}/{key}",
        lambda: f"https://d{run(13, LOW)}.cloudfront.net/{key}",
        lambda: f"gsutil signurl -d 10m ~/keys/signer.json gs://{bucket}/{key}",
        lambda: f"https://{bucket.replace('-', '')}.blob.core.windows.net/{RNG.choice(['backups', 'public'])}/{key}",
        lambda: "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=3600&X-Amz-SignedHeaders=host",
    ]


def i_request_ids() -> list[Callable[[], str]]:
    return [
        lambda: f"x-amz-request-id: {run(16, '0123456789ABCDEF')}\nx-amz-id-2: {b64bytes(57)}",
        lambda: f"X-Cloud-Trace-Context: {hexrun(32)}/{digits(19)};o=1",
        lambda: f"x-vercel-id: fra1::iad1::{run(5, LOW)}-{digits(13)}-{hexrun(12)}",
        lambda: f"Request-Id: req_{run(14)}",
        lambda: f'"customer": "cus_{run(14)}",\n"payment_intent": "pi_{run(24)}"',
        lambda: f"evt_1{run(23)}",
        lambda: f"Sentry event id: {hexrun(32)}",
        lambda: f"apigw-requestid: {run(15, B64URL)}=",
        lambda: f'{{"traceId":"{hexrun(32)}","spanId":"{hexrun(16)}","name":"GET /v1/orders"}}',
        lambda: f"START RequestId: {uid()} Version: $LATEST",
        lambda: f"X-GitHub-Delivery: {uid()}\nX-GitHub-Event: push\nX-GitHub-Hook-ID: {digits(9)}",
        lambda: f"x-ms-request-id: {uid()}\nx-ms-correlation-request-id: {uid()}",
    ]


def i_chat_ids() -> list[Callable[[], str]]:
    o = RNG.choice(ORGS)
    return [
        lambda: f"channel: C{run(10, UP)}",
        lambda: f"https://{o}.slack.com/archives/C{run(10, UP)}/p{digits(16)}",
        lambda: f'"user": "U{run(10, UP)}", "team": "T{run(10, UP)}", "ts": "{digits(10)}.{digits(6)}"',
        lambda: f"<@{digits(18)}> deployed {RNG.choice(PROJECTS)} to production",
        lambda: f"https://discord.com/channels/{digits(18)}/{digits(19)}",
        lambda: f"19:{hexrun(32)}@thread.tacv2",
        lambda: f"https://teams.microsoft.com/l/channel/19%3a{hexrun(32)}%40thread.tacv2/General?groupId={uid()}&tenantId={uid()}",
        lambda: f"SLACK_APP_ID=A{run(10, UP)}\nSLACK_CHANNEL_ID=C{run(10, UP)}",
        lambda: f"TELEGRAM_CHAT_ID=-100{digits(10)}",
        lambda: f"channel_id: {run(26, LOW)}",
    ]


def i_artifact_hashes() -> list[Callable[[], str]]:
    p = RNG.choice(PROJECTS)
    return [
        lambda: f"SHA256 digest of uploaded artifact zip is {hexrun(64)}",
        lambda: f"{hexrun(64)}  app-release.apk",
        lambda: f"SHA256 (App.ipa) = {hexrun(64)}",
        lambda: f"subject:\n  - name: {p}-linux-amd64\n    digest:\n      sha256: {hexrun(64)}",
        lambda: f"Build cache key for task ':app:compileReleaseKotlin' is {hexrun(32)}",
        lambda: f"Cache saved with key: Linux-gradle-{hexrun(64)}",
        lambda: f"SHA256 hash of dist\\setup.exe:\n{hexrun(64)}\nCertUtil: -hashfile command completed successfully.",
        lambda: f'ETag: "{hexrun(32)}-{RNG.randrange(2, 40)}"',
        lambda: f"files:\n  - url: {p}-{semver()}-arm64.dmg\n    sha512: {b64bytes(64)}\n    size: {RNG.randrange(10**7, 10**8)}",
        lambda: f"md5sum: {hexrun(32)}  {p}.tar.gz",
    ]


def i_versions() -> list[Callable[[], str]]:
    return [
        lambda: f"uses: actions/checkout@{hexrun(40)} # v4.{RNG.randrange(0, 3)}.{RNG.randrange(0, 3)}",
        lambda: f"Build #{RNG.randrange(1, 9000)} (Dec {RNG.randrange(1, 29)}, 2026, 9:{RNG.randrange(10, 59)}:02 AM)",
        lambda: f"fastlane 2.2{RNG.randrange(10, 30)}.{RNG.randrange(0, 3)}",
        lambda: f"Xcode 16.{RNG.randrange(0, 3)}\nBuild version 16C{RNG.randrange(5000, 5100)}a",
        lambda: f"CURRENT_PROJECT_VERSION = {RNG.randrange(1, 900)}\nMARKETING_VERSION = {semver()}",
        lambda: f"Gradle 8.{RNG.randrange(5, 12)}\nKotlin: 2.0.{RNG.randrange(0, 22)}\nGroovy: 3.0.22",
        lambda: f"  • electron-builder  version=25.{RNG.randrange(0, 2)}.{RNG.randrange(0, 9)} os=24.1.0",
        lambda: f"v3.{RNG.randrange(100, 150)}.0",
        lambda: f" ⛅️ wrangler 3.{RNG.randrange(50, 110)}.{RNG.randrange(0, 4)}",
        lambda: f"$ git describe --tags\nv{semver()}-{RNG.randrange(1, 40)}-g{hexrun(7)}",
        lambda: f"image: node:20.{RNG.randrange(10, 19)}.{RNG.randrange(0, 2)}-bookworm-slim",
        lambda: f"Firebase CLI 13.{RNG.randrange(10, 29)}.{RNG.randrange(0, 3)}",
    ]


def i_git_ci() -> list[Callable[[], str]]:
    o, p = org_proj()
    return [
        lambda: f"Checking out {hexrun(8)} as detached HEAD (ref is refs/merge-requests/{RNG.randrange(1, 900)}/head)...",
        lambda: f"GITHUB_REF=refs/pull/{RNG.randrange(1, 5000)}/merge\nGITHUB_SHA={hexrun(40)}",
        lambda: f"CI_COMMIT_SHORT_SHA={hexrun(8)}\nCI_COMMIT_REF_SLUG=feature-{RNG.choice(['token-refresh', 'keystore-rotation'])}",
        lambda: f"Checking out Revision {hexrun(40)} (refs/remotes/origin/main)\nCommit message: \"Merge pull request #{RNG.randrange(1, 900)} from {o}/fix/signing\"",
        lambda: f"BUILDKITE_COMMIT={hexrun(40)}\nBUILDKITE_BRANCH=feature/{RNG.choice(['oauth', 'secrets', 'keystore'])}-rotation",
        lambda: f"From https://github.com/{o}/{p}\n * branch            {hexrun(40)} -> FETCH_HEAD",
        lambda: f"$ git log -1 --format=%H\n{hexrun(40)}",
        lambda: f"CIRCLE_SHA1={hexrun(40)}\nCIRCLE_BRANCH=release/{semver()}",
    ]


def i_generated_files() -> list[Callable[[], str]]:
    app = RNG.choice(["Acme", "Wallet", "ShopApp"])
    return [
        lambda: f"~/Library/Developer/Xcode/DerivedData/{app}-{run(28, string.ascii_lowercase)}/Build/Products/Debug-iphonesimulator",
        lambda: f"\t\t{run(24, '0123456789ABCDEF')} /* AppDelegate.swift in Sources */ = {{isa = PBXBuildFile; fileRef = {run(24, '0123456789ABCDEF')} /* AppDelegate.swift */; }};",
        lambda: f"/tmp/tmp.{run(10)}/{RNG.choice(PROJECTS)}.tar.gz",
        lambda: f"~/.claude/projects/-Users-{RNG.choice(USERS)}-src-{RNG.choice(PROJECTS)}/{uid()}.jsonl",
        lambda: f"Crash report written to /tmp/electron-crashes/completed/{uid()}.dmp",
        lambda: f"coverage/.nyc_output/{uid()}.json",
        lambda: f"~/.gradle/caches/modules-2/files-2.1/com.squareup.okhttp3/okhttp/4.12.0/{hexrun(40)}/okhttp-4.12.0.jar",
        lambda: f".next/cache/fetch-cache/{hexrun(64)}",
        lambda: f"/var/folders/{run(2, LOW)}/{run(26, LOW + '_')}0000gn/T/{uid()}",
        lambda: f"~/.pulumi/stacks/{RNG.choice(PROJECTS)}/prod.json.{digits(19)}.bak",
    ]


def i_store_safe() -> list[Callable[[], str]]:
    item, p = run(26, LOW), RNG.choice(PROJECTS)
    return [
        lambda: f"ID:          {item}\nTitle:       Stripe\nVault:       Prod ({run(26, LOW)})\nFields:\n  credential:    [use 'op item get {item} --reveal' to reveal]",
        lambda: "$ bw list items --search github | jq -r '.[].id'\n" + "\n".join(uid() for _ in range(3)),
        lambda: f"======= Metadata =======\nKey                Value\n---                -----\ncreated_time       2026-11-0{RNG.randrange(1, 9)}T10:22:03.118Z\ncurrent_version    {RNG.randrange(1, 9)}\nmax_versions       0",
        lambda: f'{{\n    "ARN": "arn:aws:secretsmanager:eu-west-1:{digits(12)}:secret:prod/{p}-{run(6)}",\n    "Name": "prod/{p}",\n    "RotationEnabled": true,\n    "VersionIdsToStages": {{ "{uid()}": ["AWSCURRENT"] }}\n}}',
        lambda: f'"id": "https://kv-acme.vault.azure.net/secrets/{p}-db/{hexrun(32)}"',
        lambda: f"Name:         db-credentials\nNamespace:    prod\nType:  Opaque\n\nData\n====\npassword:  {RNG.randrange(12, 40)} bytes\nusername:  3 bytes",
        lambda: "Password Store\n└── infra\n    ├── db\n    │   └── prod\n    └── ci\n        └── deploy-key",
        lambda: f"NAME            CREATED              REPLICATION_POLICY  LOCATIONS\n{p}-stripe  2026-10-{RNG.randrange(10, 29)}T08:11:02  automatic           -",
        lambda: "[PGP]	 INFO[0000] Data key recovered successfully\n[SOPS]	 INFO[0000] File written successfully",
        lambda: "op read --out-file ./deploy_key 'op://Prod/ssh/private key'",
        lambda: f"$ vault kv put secret/{p} password=-\nSuccess! Data written to: secret/data/{p}",
    ]


def i_framework_safe() -> list[Callable[[], str]]:
    return [
        lambda: "SECRET_KEY\t'********************'",
        lambda: f"Application Name ............ Laravel\nLaravel Version ............. 11.{RNG.randrange(10, 40)}.{RNG.randrange(0, 4)}\nDebug Mode .................. OFF",
        lambda: f" * Serving Flask app 'app'\n * Debug mode: off\n * Running on http://127.0.0.1:{RNG.choice([5000, 8000])}",
        lambda: f"  ▲ Next.js 15.{RNG.randrange(0, 5)}.{RNG.randrange(0, 9)}\n  - Local:        http://localhost:3000\n  - Environments: .env.local",
        lambda: "DATABASES = {'default': env.db('DATABASE_URL')}",
        lambda: "spring.datasource.password=${DB_PASSWORD}",
        lambda: f'{{"activeProfiles": ["prod"], "propertySources": [{{"name": "server.ports", "properties": {{"local.server.port": {{"value": {RNG.choice([8080, 8081])}}}}}}}]}}',
        lambda: f"Started {RNG.choice(['Api', 'Billing', 'Gateway'])}Application in {RNG.randrange(2, 20)}.{RNG.randrange(100, 999)} seconds (process running for {RNG.randrange(3, 25)}.1)",
        lambda: "config.filter_parameters += [:passw, :email, :secret, :token, :_key, :crypt, :salt, :certificate, :otp, :ssn, :cvv, :cvc]",
        lambda: f"Processing by SessionsController#create as HTML\n  Parameters: {{\"authenticity_token\"=>\"[FILTERED]\", \"user\"=>{{\"email\"=>\"{RNG.choice(USERS)}@acme.io\", \"password\"=>\"[FILTERED]\"}}}}",
    ]


def i_db_shell_safe() -> list[Callable[[], str]]:
    u = RNG.choice(USERS)
    return [
        lambda: f'You are connected to database "app" as user "{u}" on host "localhost" (address "127.0.0.1") at port "5432".',
        lambda: f'app=# \\password {u}\nEnter new password for user "{u}": \nEnter it again: \napp=#',
        lambda: f'$ mysql_config_editor print --all\n[client]\nuser = "{u}"\npassword = *****\nhost = "localhost"',
        lambda: '127.0.0.1:6379> CONFIG GET maxmemory-policy\n1) "maxmemory-policy"\n2) "allkeys-lru"',
        lambda: 'read -s -p "DB password: " DB_PASSWORD; echo',
        lambda: f"                                   List of roles\n Role name |                         Attributes\n-----------+------------------------------------------------------------\n {u:<9} | Create DB\n postgres  | Superuser, Create role, Create DB, Replication, Bypass RLS",
        lambda: "*/15 * * * * /usr/local/bin/backup.sh >> /var/log/backup.log 2>&1\n0 4 * * 0 /usr/bin/certbot renew --quiet",
        lambda: 'expect "Password:"\nsend "$env(SSH_PASS)\\r"',
        lambda: f' 1201  git pull --rebase\n 1202  make test\n 1203  history | grep {RNG.choice(["docker", "ssh", "psql"])}',
        lambda: f'mongosh "mongodb+srv://cluster0.{run(5, LOW)}.mongodb.net/" --apiVersion 1 --username {u}',
        lambda: "redis-cli -h cache.internal --askpass",
        lambda: f"mysql> SELECT user, host, plugin FROM mysql.user WHERE user = '{u}';\n| {u} | % | caching_sha2_password |",
    ]


def i_oauth_public() -> list[Callable[[], str]]:
    return [
        lambda: f"https://accounts.google.com/o/oauth2/v2/auth?client_id={google_client_id()}&redirect_uri=http%3A%2F%2Flocalhost%3A8080%2Fcallback&response_type=code&scope=openid%20email&code_challenge={run(43, B64URL)}&code_challenge_method=S256",
        lambda: '"token_type": "Bearer",\n"expires_in": 3600,\n"scope": "openid email profile"',
        lambda: '"issuer": "https://accounts.google.com",\n"jwks_uri": "https://www.googleapis.com/oauth2/v3/certs"',
        lambda: f'{{"kid": "{hexrun(40)}", "alg": "RS256", "use": "sig", "kty": "RSA", "e": "AQAB"}}',
        lambda: f"GITHUB_CLIENT_ID=Iv23li{run(14)}",
        lambda: f'"aud": "{google_client_id()}",\n"azp": "{google_client_id()}"',
        lambda: '{"error": "invalid_grant", "error_description": "Token has been expired or revoked."}',
        lambda: f"nonce={uid()}&response_mode=form_post",
        lambda: "token_endpoint_auth_methods_supported: [client_secret_basic, private_key_jwt]",
        lambda: f"https://acme.okta.com/oauth2/default/v1/authorize?client_id=0oa{run(17)}&response_type=code&scope=openid&redirect_uri=https%3A%2F%2Fapp.acme.io%2Fcallback",
    ]


IDENTITY_FAMILIES: list[tuple[str, Callable[[], list[Callable[[], str]]], int]] = [
    ("ci-run", i_ci_run, 15), ("ci-log", i_ci_log, 15), ("masked", i_masked, 16), ("reference", i_reference, 16),
    ("ciphertext", i_ciphertext, 14), ("firebase-id", i_firebase_ids, 14), ("public-by-docs", i_public_by_docs, 16),
    ("mobile-id", i_mobile_ids, 14), ("env-names", i_env_names, 14), ("ide-config", i_ide_config, 14),
    ("unsigned-url", i_unsigned_url, 14), ("request-id", i_request_ids, 14), ("chat-id", i_chat_ids, 14),
    ("artifact-hash", i_artifact_hashes, 14), ("version-build", i_versions, 14), ("git-ci", i_git_ci, 12),
    ("generated-file", i_generated_files, 14), ("store-safe", i_store_safe, 14), ("framework-safe", i_framework_safe, 14),
    ("db-shell-safe", i_db_shell_safe, 14), ("oauth-public", i_oauth_public, 14),
]


def identity_rows() -> list[dict[str, object]]:
    return identity_rows_of(IDENTITY_FAMILIES, "fi", 4, "field-identities")


def main() -> None:
    write_sets({"field_secrets.jsonl": secret_rows(), "field_identities.jsonl": identity_rows()})


if __name__ == "__main__":
    main()
