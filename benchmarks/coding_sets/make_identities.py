"""Generate the identity regression set (``identities.jsonl``): what names a project and its
work -- roots, file paths, branches, test ids, commit hashes, image digests, UUIDs in paths --
and must pass secret redaction unchanged.

A seeded generator combines varied vocabularies (user names, folder habits, repository names in
every case style, languages' source layouts, ticket prefixes, test frameworks' id grammars) for
macOS, Linux and Windows; ``HAND`` adds cases written by hand, including shapes that look random
(CamelCase with digits, long hyphenated slugs, base32-ish build ids inside paths). Each row
carries a ``split`` (``dev`` or ``test``) fixed by a hash of its id, written before any rule.

    python benchmarks/coding_sets/make_identities.py   # rewrites identities.jsonl
"""

# ruff: noqa: E501, E702  (a data table: one row per line reads best)

from __future__ import annotations

import hashlib
import json
import random
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
RNG = random.Random(44)

USERS = ["jane", "JSmith", "alice", "bob", "dev", "mkowalski", "Priya.Raman", "chen_wei",
         "o.adeyemi", "LucasM", "sara-lindqvist", "tanaka", "runner", "vscode", "ubuntu", "ec2-user",
         "gitpod", "codespace", "jdoe2", "AhmedK", "marie-claire", "nguyenvan", "Fernanda",
         "kwame.mensah", "RBrown01", "ivanov_ap", "build", "ci", "jenkins", "admin"]
HOMES_MAC = ["Developer", "code", "src", "Projects", "repos", "work", "GitHub", "Sites",
             "Documents/Code", "dev", "workspace", "Code/Work", "git"]
HOMES_LINUX = ["code", "src", "projects", "repos", "work", "GitHub", "git", "dev", "ws",
               "workspace", "Documents/projects", "go/src/github.com/acme"]
HOMES_WIN = ["source/repos", "Documents/GitHub", "Projects", "dev", "code", "src", "repos"]
ORGS = ["acme", "AcmeCorp", "initech", "globex", "umbrella-labs", "hooli", "WayneEnterprises",
        "octo-org", "nimbus-io", "blue-harbor", "Kestrel42", "fintrack"]
WORDS = ["api", "web", "app", "blog", "shop", "ledger", "gateway", "billing", "auth", "payments",
         "inventory", "search", "notify", "portal", "admin", "mobile", "core", "worker", "infra",
         "platform", "analytics", "crm", "booking", "chat", "media", "reports", "sync", "orders",
         "catalog", "checkout", "identity", "scheduler", "pipeline", "ingest", "metrics",
         "geo", "pricing", "ledgerly", "quote", "claims", "onboarding", "fulfillment"]
SUFFIX = ["", "", "", "2", "v2", "v3", "-service", "-svc", "-api", "-web", "-ui", "-ios",
          "-android", "-backend", "-frontend", "-core", "-lib", "-sdk", "-cli", "Kit", "Hub",
          "-monorepo", "-infra", "-e2e", "_legacy", "-next", "-2024", "-poc"]


def case(words: list[str]) -> str:
    style = RNG.randrange(6)
    if style == 0:
        return "".join(w.capitalize() for w in words)
    if style == 1:
        return "-".join(words)
    if style == 2:
        return "_".join(words)
    if style == 3:
        return words[0] + "".join(w.capitalize() for w in words[1:])
    if style == 4:
        return ".".join(w.capitalize() for w in words)
    return "".join(words)


def repo_name() -> str:
    words = RNG.sample(WORDS, RNG.choice([1, 1, 2, 2, 3]))
    name = case(words) + RNG.choice(SUFFIX)
    if RNG.random() < 0.15:
        name = RNG.choice(ORGS) + RNG.choice(["-", ".", "_", ""]) + name
    return name


def root(os_: str) -> str:
    user = RNG.choice(USERS)
    name = repo_name()
    if os_ == "mac":
        return f"/Users/{user}/{RNG.choice(HOMES_MAC)}/{name}"
    if os_ == "win":
        sep = RNG.choice(["\\", "/"])
        drive = RNG.choice(["C:", "D:", "c:"])
        return sep.join([drive, "Users", user, *RNG.choice(HOMES_WIN).split("/"), name])
    base = RNG.choice([f"/home/{user}/{RNG.choice(HOMES_LINUX)}", "/workspaces", "/srv/app",
                       f"/home/{user}", "/opt/build/repo", "/var/lib/jenkins/workspace",
                       f"/builds/{RNG.choice(ORGS)}", "/github/workspace", f"/tmp/pytest-of-{user}"])
    return f"{base}/{name}"


LAYOUTS = {
    "python": ["src/{p}/{m}.py", "tests/test_{m}.py", "{p}/{m}/models.py", "{p}/settings/base.py",
               "tests/integration/test_{m}_{n}.py", "migrations/versions/{h8}_{m}_add_{w}.py",
               "alembic/versions/{h12}_{w}.py", "{p}/api/v2/{m}_views.py"],
    "js": ["src/components/{C}/{C}.tsx", "src/components/{C}/{C}.test.tsx", "src/hooks/use{C}.ts",
           "packages/{p}/src/index.ts", "apps/web/src/pages/{m}/[id].tsx",
           "src/__tests__/{C}.spec.js", "cypress/e2e/{m}.cy.ts", "src/app/({m})/page.tsx",
           "src/store/{m}Slice.ts", "src/utils/format{C}.js"],
    "jvm": ["src/main/java/com/{o}/{p}/{C}Service.java",
            "src/test/java/com/{o}/{p}/{C}ServiceTest.java",
            "src/main/kotlin/com/{o}/{p}/{C}Controller.kt",
            "{p}-core/src/main/java/io/{o}/{p}/{C}Repository.java",
            "src/main/resources/db/migration/V{n}__add_{w}.sql", "build.gradle.kts",
            "src/test/kotlin/{C}IT.kt"],
    "go": ["internal/{m}/{m}.go", "internal/{m}/{m}_test.go", "cmd/{p}/main.go", "pkg/{m}/v2/{w}.go",
           "api/proto/{m}/v1/{m}.pb.go"],
    "rust": ["src/{m}.rs", "src/{m}/mod.rs", "crates/{p}-{m}/src/lib.rs", "tests/{m}_it.rs",
             "benches/{m}_bench.rs"],
    "ruby": ["app/models/{m}.rb", "app/controllers/api/v1/{m}s_controller.rb",
             "spec/models/{m}_spec.rb", "spec/requests/{m}s_spec.rb",
             "db/migrate/{ts}_add_{w}_to_{m}s.rb", "test/models/{m}_test.rb"],
    "swift": ["Sources/{C}/{C}View.swift", "Tests/{C}Tests/{C}Tests.swift",
              "{C}/{C}App.swift", "{C}.xcodeproj/project.pbxproj", "Packages/{C}Kit/Package.swift"],
    "php": ["app/Http/Controllers/{C}Controller.php", "tests/Feature/{C}Test.php",
            "database/migrations/{d}_create_{m}s_table.php", "src/{C}/{C}Service.php",
            "resources/views/{m}/index.blade.php"],
    "dotnet": ["src/{C}.Api/Controllers/{C}Controller.cs", "tests/{C}.Tests/{C}ServiceTests.cs",
               "src/{C}.Domain/{C}.Domain.csproj", "{C}.sln", "src/{C}.Infrastructure/Migrations/"
               "{ts}_Add{C}.cs"],
    "infra": ["deploy/k8s/{m}/deployment.yaml", "charts/{p}/templates/{m}-configmap.yaml",
              "terraform/envs/prod/{m}.tf", ".github/workflows/{m}-ci.yml", "docker/{m}/Dockerfile",
              "ansible/roles/{m}/tasks/main.yml"],
}


def fill(template: str, project: str) -> str:
    m = RNG.choice(WORDS).replace("-", "_")
    c = "".join(w.capitalize() for w in RNG.sample(WORDS, RNG.choice([1, 2])))
    c = c + RNG.choice(["", "", "V2", "2", "Dto", "Impl", "Factory", "Handler"])
    o = RNG.choice(ORGS).lower().replace("-", "").replace(".", "")
    p = project.lower().replace("-", "").replace(".", "").replace("_", "")[:20] or "app"
    return template.format(p=p, m=m, C=c, o=o, n=RNG.randrange(1, 400), w=RNG.choice(WORDS),
                           h8=RNG.randbytes(4).hex(), h12=RNG.randbytes(6).hex(),
                           ts=f"2025{RNG.randrange(1, 13):02d}{RNG.randrange(1, 29):02d}"
                              f"{RNG.randrange(0, 240000):06d}",
                           d=f"2024_{RNG.randrange(1, 13):02d}_{RNG.randrange(1, 29):02d}_"
                             f"{RNG.randrange(0, 240000):06d}")


def file_path() -> str:
    os_ = RNG.choice(["mac", "linux", "linux", "win"])
    r = root(os_)
    rel = fill(RNG.choice(RNG.choice(list(LAYOUTS.values()))), r.replace("\\", "/").rsplit("/", 1)[-1])
    if os_ == "win" and "\\" in r:
        rel = rel.replace("/", "\\")
    if RNG.random() < 0.3:
        return rel
    return r + ("\\" if os_ == "win" and "\\" in r else "/") + rel


TICKETS = ["JIRA", "PROJ", "ABC", "CORE", "WEB", "OPS", "PAY", "DEV", "SEC", "MOB", "BE", "FE"]
TOPICS = ["addOAuth2Login", "fix-null-pointer-in-checkout", "UpgradeSpringBoot3", "refactorAuthFlow",
          "add_s3_presigned_urls", "bump-deps-2025-11", "remove-legacy-v1-api", "K8sHelmChartV2",
          "fixFlakyE2ETests", "migrate-to-vite5", "add-i18n-de-DE", "dark-mode", "GraphQLSchemaV3",
          "perf/n+1-queries", "hotfix-rate-limit-429", "iOS17Support", "arm64-builds",
          "Add2FABackupCodes", "sso-saml2", "use-pnpm-workspaces", "drop_py38", "JWTRefreshRotation"]


def branch() -> str:
    kind = RNG.choice(["feature", "feat", "bugfix", "fix", "hotfix", "release", "chore", "users",
                       "dependabot/npm_and_yarn", "renovate", "wip", "exp"])
    if kind == "release":
        return f"release/{RNG.randrange(1, 9)}.{RNG.randrange(0, 40)}.{RNG.randrange(0, 12)}"
    if kind.startswith("dependabot"):
        pkg = RNG.choice(["axios", "next", "@types/node", "eslint-plugin-react-hooks", "webpack"])
        return f"{kind}/{pkg}-{RNG.randrange(1, 20)}.{RNG.randrange(0, 30)}.{RNG.randrange(0, 9)}"
    if kind == "users":
        return f"users/{RNG.choice(USERS)}/{RNG.choice(TOPICS)}"
    ticket = f"{RNG.choice(TICKETS)}-{RNG.randrange(1, 99999)}"
    topic = RNG.choice(TOPICS)
    form = RNG.randrange(4)
    if form == 0:
        return f"{kind}/{ticket}-{topic}"
    if form == 1:
        return f"{kind}/{ticket}_{topic}"
    if form == 2:
        return f"{kind}/{topic}"
    return f"{ticket.lower()}-{topic}"


def test_id() -> str:
    kind = RNG.randrange(7)
    c = "".join(w.capitalize() for w in RNG.sample(WORDS, 2)) + RNG.choice(["", "2", "V2", "Impl"])
    m = RNG.choice(WORDS).replace("-", "_")
    if kind == 0:  # pytest node id, parametrised
        params = RNG.choice(["", "[True]", f"[case{RNG.randrange(1, 40)}]", "[utf-8-de_DE]",
                             "[postgresql+psycopg2]", f"[{RNG.randrange(0, 99)}-EUR]"])
        return f"tests/test_{m}.py::Test{c}::test_{m}_{RNG.choice(WORDS)}{params}"
    if kind == 1:  # JUnit
        return f"com.{RNG.choice(ORGS).lower().replace('-', '')}.{m}.{c}Test#should{c}When{c}"
    if kind == 2:  # Go
        return f"Test{c}/{RNG.choice(['Test', 'case_', ''])}{c}With{RNG.choice(['Props', 'Nil', 'EmptyBody', '429'])}"
    if kind == 3:  # jest/vitest full name
        return f"src/components/{c}/{c}.test.tsx > {c} > renders header with props"
    if kind == 4:  # rspec
        return f"./spec/models/{m}_spec.rb:{RNG.randrange(3, 400)}"
    if kind == 5:  # .NET
        return f"{c}.Tests.{c}ServiceTests.Get{c}_Returns{c}_When{c}Exists"
    return f"{c}Tests/test{c}{RNG.choice(['Loads', 'Throws', 'Decodes'])}()"  # XCTest


def digest() -> str:
    kind = RNG.randrange(7)
    if kind == 0:
        return RNG.randbytes(20).hex()
    if kind == 1:
        return RNG.randbytes(20).hex()[:RNG.choice([7, 8, 10, 12])]
    if kind == 2:
        reg = RNG.choice(["ghcr.io/acme/api", "registry.gitlab.com/globex/web", "docker.io/library/"
                          "postgres", "123456789012.dkr.ecr.eu-west-1.amazonaws.com/orders",
                          "mcr.microsoft.com/dotnet/aspnet"])
        return f"{reg}@sha256:{RNG.randbytes(32).hex()}"
    if kind == 3:
        return f"sha256:{RNG.randbytes(32).hex()}"
    if kind == 4:
        return f"/var/lib/docker/overlay2/{RNG.randbytes(32).hex()}/merged"
    if kind == 5:
        return f"{RNG.choice(['/tmp/build', 'artifacts', '.cache/uploads'])}/{uuid.UUID(bytes=RNG.randbytes(16))}/report.xml"
    return f"HEAD is now at {RNG.randbytes(20).hex()[:7]} Merge pull request #{RNG.randrange(1, 9000)}"


HAND = [
    ("root", "/Users/jane/Developer/MyApp"), ("root", "/Users/jane/code/blog"),
    ("root", "/home/dev/GitHub/api"), ("root", "/home/alice/code/WebApp"),
    ("root", "C:/Users/JSmith/source/repos/WebApi"), ("root", r"C:\Users\JSmith\source\repos\WebApi"),
    ("root", "/Users/Priya.Raman/Projects/PaymentsGatewayV2"),
    ("root", "/home/runner/work/deltamem/deltamem"), ("root", "/workspaces/acme-monorepo"),
    ("root", "/Users/jane/Developer/MyApp/.claude/worktrees/feat-x"),
    ("root", "/home/dev/src/k8sOperatorForPostgres14"),
    ("root", "/Users/LucasM/Code/Work/iOS17WidgetsDemoApp"),
    ("path", "/Users/jane/Developer/MyApp/Sources/MyApp/ContentViewModel.swift"),
    ("path", "src/main/java/com/acme/billing/InvoicePdfRenderer2Service.java"),
    ("path", "apps/web/src/app/(dashboard)/settings/[teamId]/page.tsx"),
    ("path", "node_modules/.pnpm/@babel+core@7.26.0/node_modules/@babel/core/lib/index.js"),
    ("path", "/home/dev/.cache/pypoetry/virtualenvs/ledger-Xq3fTz9A-py3.12/bin/python"),
    ("path", "/home/dev/.cargo/registry/src/index.crates.io-6f17d22bba15001f/tokio-1.41.0/src/lib.rs"),
    ("path", "/Users/jane/Library/Developer/Xcode/DerivedData/MyApp-gkzqyrbvdcfhjbaxpwqhtmlnzsox/Build"),
    ("path", "/home/dev/go/pkg/mod/github.com/aws/aws-sdk-go-v2@v1.32.2/config/config.go"),
    ("path", "bin/Debug/net8.0/WebApi.Tests.dll"),
    ("path", "target/surefire-reports/TEST-com.acme.orders.OrderServiceTest.xml"),
    ("branch", "feature/JIRA-1234-addOAuth2Login"), ("branch", "users/JSmith/Add2FABackupCodes"),
    ("branch", "dependabot/npm_and_yarn/axios-1.7.9"), ("branch", "renovate/major-spring-boot"),
    ("test", "MyComponentTest2/TestRenderHeaderWithProps"),
    ("test", "tests/test_api.py::TestOAuth2Login::test_refresh_rotates_token[PKCE-S256]"),
    ("test", "com.acme.orders.OrderServiceTest#shouldRejectOrderWhenStockIs0"),
    ("test", "TestRateLimiter/Allow_burst_of_10_then_429"),
    ("digest", "ghcr.io/acme/api@sha256:9b2f1c4e8d7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c"),
    ("digest", "commit 3f9a1c2b7d8e4f5a6b7c8d9e0f1a2b3c4d5e6f7a"),
    ("digest", "integrity sha512-Vx8yI3T2Q1d1XG2o5l9t8cxq3xY5l1k3qv8G1QkZ7v4p0rU5QyH3vZ7rT2m1n0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d=="),
    ("uuid", "/tmp/pytest-of-dev/pytest-12/test_upload0/3fa85f64-5717-4562-b3fc-2c963f66afa6.json"),
    ("text", "Compiling ledger-core v0.4.1 (/Users/jane/Developer/LedgerCore/crates/ledger-core)"),
    ("text", "error[E0308]: mismatched types --> src/handlers/OrderHandlerV2.rs:42:17"),
    ("text", "To github.com:AcmeCorp/PaymentsGatewayV2.git\n   3f9a1c2..8e4d7b1  feature/PAY-8812-retryIdempotencyKeys -> feature/PAY-8812-retryIdempotencyKeys"),
    ("text", "Successfully built 8e4d7b1a9c2f\nSuccessfully tagged acme/orders-api:2025.11.3-rc2"),
    ("text", "Run ./gradlew :orders-service:test --tests 'com.acme.orders.OrderServiceTest'"),
    ("text", "docker compose run --rm web bundle exec rspec spec/requests/orders_spec.rb:42"),
    ("text", "session_id=0b7e9a2c-4d1f-4e8b-9a3c-5f6e7d8c9b0a cwd=/Users/jane/code/blog"),
    ("text", "Xcode build: MyApp.xcodeproj scheme MyAppUITests destination 'platform=iOS Simulator,name=iPhone 15'"),
    ("text", "def test_Base64EncodeDecodeRoundTripsUnicode(self): ..."),
    ("text", "export PATH=/Users/jane/.nvm/versions/node/v20.11.1/bin:$PATH"),
    ("text", "npm error path /Users/JSmith/Projects/WebShop2024/node_modules/esbuild"),
    ("text", "Finished `test` profile [unoptimized + debuginfo] target(s) in 12.34s\n     Running unittests src/lib.rs (target/debug/deps/ledger_core-8f3a2b1c9d4e5f6a)"),
]


def rows() -> list[dict[str, str]]:
    out: list[tuple[str, str]] = list(HAND)
    makers = [("root", lambda: root(RNG.choice(["mac", "linux", "win"]))), ("path", file_path),
              ("branch", branch), ("test", test_id), ("digest", digest)]
    counts = {"root": 300, "path": 350, "branch": 160, "test": 160, "digest": 120}
    for kind, make in makers:
        seen = {t for k, t in out if k == kind}
        while sum(1 for k, _ in out if k == kind) < counts[kind]:
            text = make()
            if text not in seen:
                seen.add(text)
                out.append((kind, text))
    result = []
    for i, (kind, text) in enumerate(out):
        rid = f"id{i:04d}"
        result.append({"id": rid, "kind": kind, "text": text, "split": split_of(rid)})
    return result


def split_of(key: str) -> str:
    """``dev`` or ``test``, half and half, fixed by a hash of ``key``."""
    return "test" if hashlib.sha256(key.encode()).digest()[0] % 2 else "dev"


def main() -> None:
    data = rows()
    (HERE / "identities.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in data), encoding="utf-8")
    print(f"{len(data)} identities -> {HERE / 'identities.jsonl'}")


if __name__ == "__main__":
    main()
