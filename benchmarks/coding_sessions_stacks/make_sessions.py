"""Generate the second labelled coding-session suite (``benchmarks/coding_sessions_stacks/``):
sessions across eleven stacks, written apart from the rules, in the on-disk formats of Claude
Code and Codex (rendered by ``benchmarks/coding_sessions/make_sessions.py``'s renderers).

Each repository has a stack profile: its test runner, with the runner's own output grammar for
a pass and a failure (Maven/surefire, Gradle, jest, vitest, mocha, cypress, rspec, minitest and
``rails test``, ``go test``, ``cargo test``, XCTest and swift-testing, PHPUnit and ``artisan
test``, ``dotnet test``, pytest, unittest, runners inside ``docker compose run``), the whole-suite
command and a focused one, a source file with a bug, a package manager, an environment variable.
Scenarios are played per repository: a fix whose check is focused after a failing whole-suite
run; an attempt that still fails while the reply sounds done; two tasks in one session (the
second a new prompt after "ok"/"next"/"thanks"); negative feedback on the last result; a stated
convention; a missing environment variable; a script failing by exit code alone.

Every repository belongs to one ``split``: ``dev`` or ``test`` (one repository of each stack on
each side; the runners differ between the two where a stack has several), fixed here before any
rule was written; probes carry their repository's split.

    python benchmarks/coding_sessions_stacks/make_sessions.py   # rewrites in place
"""

# ruff: noqa: E501, E702  (a data table: one row per line reads best)

from __future__ import annotations

import importlib.util
import json
import random
import sys
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location(
    "coding_sessions_make", HERE.parent / "coding_sessions" / "make_sessions.py")
assert _spec is not None and _spec.loader is not None
MS = importlib.util.module_from_spec(_spec)
sys.modules["coding_sessions_make"] = MS
_spec.loader.exec_module(MS)
Call, Say, Session, Clock = MS.Call, MS.Say, MS.Session, MS.Clock
RNG = random.Random(4406)


# ---- runner output grammars -------------------------------------------------------------------
def maven(module: str, test: str, ok: bool, why: str, n: int = 14) -> str:
    head = ["[INFO] Scanning for projects...", f"[INFO] Building {module} 1.4.0-SNAPSHOT",
            "[INFO] --- maven-surefire-plugin:3.2.5:test (default-test) @ " + module + " ---",
            "[INFO] -------------------------------------------------------",
            "[INFO]  T E S T S", "[INFO] -------------------------------------------------------"]
    if ok:
        return "\n".join(head + [f"[INFO] Running {test}",
                                 f"[INFO] Tests run: {n}, Failures: 0, Errors: 0, Skipped: 0",
                                 "[INFO] BUILD SUCCESS", "[INFO] Total time:  11.204 s"])
    return "\n".join(head + [
        f"[ERROR] Tests run: {n}, Failures: 1, Errors: 0, Skipped: 0, Time elapsed: 0.8 s <<< FAILURE! -- in {test}",
        f"[ERROR] {test}.shouldHandleRequest -- Time elapsed: 0.05 s <<< FAILURE!",
        f"org.opentest4j.AssertionFailedError: {why}", "[INFO] Results:",
        f"[ERROR] Failures: \n[ERROR]   {test.rsplit('.', 1)[-1]}.shouldHandleRequest:42 {why}",
        f"[ERROR] Tests run: {n}, Failures: 1, Errors: 0, Skipped: 0", "[INFO] BUILD FAILURE",
        "[ERROR] Failed to execute goal org.apache.maven.plugins:maven-surefire-plugin:3.2.5:test "
        "(default-test) on project " + module + ": There are test failures."])


def gradle(test: str, ok: bool, why: str, n: int = 18) -> str:
    if ok:
        return "> Task :compileJava UP-TO-DATE\n> Task :test\n\nBUILD SUCCESSFUL in 9s\n" \
               "4 actionable tasks: 1 executed, 3 up-to-date"
    return (f"> Task :test FAILED\n\n{test} > shouldHandleRequest() FAILED\n"
            f"    org.opentest4j.AssertionFailedError: {why}\n        at {test}.java:42\n\n"
            f"{n} tests completed, 1 failed\n\nFAILURE: Build failed with an exception.\n\n"
            "* What went wrong:\nExecution failed for task ':test'.\n> There were failing tests.\n\n"
            "BUILD FAILED in 14s")


def jest(file: str, ok: bool, why: str, n: int = 24) -> str:
    if ok:
        return (f"PASS {file}\n\nTest Suites: 6 passed, 6 total\nTests:       {n} passed, {n} total\n"
                "Snapshots:   0 total\nTime:        3.1 s\nRan all test suites.")
    return (f"FAIL {file}\n  ● handles the request\n\n    {why}\n\n"
            f"Test Suites: 1 failed, 5 passed, 6 total\nTests:       1 failed, {n - 1} passed, {n} total\n"
            "Snapshots:   0 total\nTime:        3.4 s\nRan all test suites.")


def vitest(file: str, ok: bool, why: str, n: int = 42) -> str:
    if ok:
        return f" ✓ {file} (7 tests) 31ms\n\n Test Files  8 passed (8)\n      Tests  {n} passed ({n})\n   Duration  1.92s"
    return (f" ❯ {file} (7 tests | 1 failed) 35ms\n   × handles the request\n\n"
            f" FAIL  {file} > handles the request\nAssertionError: {why}\n\n"
            f" Test Files  1 failed | 7 passed (8)\n      Tests  1 failed | {n - 1} passed ({n})\n"
            "   Duration  2.04s")


def mocha(file: str, ok: bool, why: str, n: int = 31) -> str:
    if ok:
        return f"  handler\n    ✔ handles the request\n\n  {n} passing (412ms)"
    return (f"  handler\n    1) handles the request\n\n  {n - 1} passing (430ms)\n  1 failing\n\n"
            f"  1) handler\n       handles the request:\n     AssertionError: {why}\n      at Context.<anonymous> ({file}:42:12)")


def cypress(file: str, ok: bool, why: str, n: int = 4) -> str:
    if ok:
        return (f"  (Run Finished)\n\n       Spec                Tests  Passing  Failing\n"
                f"  ✔  {file}      {n}        {n}        -\n\n  ✔  All specs passed!")
    return (f"  1) handles the request:\n     AssertionError: {why}\n\n  (Run Finished)\n\n"
            f"  ✖  {file}      {n}        {n - 1}        1\n\n  ✖  1 of 1 failed (100%)")


def rspec(file: str, ok: bool, why: str, n: int = 37) -> str:
    if ok:
        return f"{'.' * n}\n\nFinished in 1.42 seconds (files took 2.1 seconds to load)\n{n} examples, 0 failures"
    return (f"{'.' * (n - 1)}F\n\nFailures:\n\n  1) handles the request\n     Failure/Error: expect(result).to eq(expected)\n\n"
            f"       {why}\n     # ./{file}:42:in `block (2 levels)'\n\n"
            f"Finished in 1.51 seconds\n{n} examples, 1 failure\n\nFailed examples:\n\nrspec ./{file}:40")


def minitest(file: str, ok: bool, why: str, n: int = 29) -> str:
    if ok:
        return f"Running {n} tests in a single process\n{'.' * n}\n\nFinished in 0.61s\n{n} runs, 77 assertions, 0 failures, 0 errors, 0 skips"
    return (f"Running {n} tests\n{'.' * (n - 1)}F\n\nFailure:\nHandlerTest#test_handles_the_request [{file}:42]:\n{why}\n\n"
            f"bin/rails test {file}:40\n\nFinished in 0.66s\n{n} runs, 77 assertions, 1 failures, 0 errors, 0 skips")


def gotest(pkg: str, ok: bool, why: str) -> str:
    if ok:
        return f"ok  \t{pkg}\t0.214s\nok  \t{pkg}/store\t(cached)"
    return (f"--- FAIL: TestHandleRequest (0.00s)\n    handler_test.go:42: {why}\nFAIL\n"
            f"FAIL\t{pkg}\t0.019s\nok  \t{pkg}/store\t(cached)\nFAIL")


def cargo(crate: str, ok: bool, why: str, n: int = 23) -> str:
    head = f"   Compiling {crate} v0.3.1\n    Finished `test` profile [unoptimized + debuginfo] target(s) in 4.02s\n     Running unittests src/lib.rs\n\nrunning {n} tests\n"
    if ok:
        return head + f"test result: ok. {n} passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.03s"
    return (head + "test handler::tests::handles_request ... FAILED\n\nfailures:\n\n---- handler::tests::handles_request stdout ----\n"
            f"thread 'handler::tests::handles_request' panicked at src/handler.rs:42:9:\n{why}\n\n"
            f"test result: FAILED. {n - 1} passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.03s\n\n"
            "error: test failed, to rerun pass `--lib`")


def xctest(target: str, ok: bool, why: str, n: int = 16) -> str:
    if ok:
        return (f"Test Suite 'All tests' started at 2026-11-12 10:01:02.123\n"
                f"Test Suite 'All tests' passed at 2026-11-12 10:01:02.301.\n"
                f"\t Executed {n} tests, with 0 failures (0 unexpected) in 0.170 (0.178) seconds")
    return (f"Test Case '-[{target}.HandlerTests testHandlesRequest]' started.\n"
            f"/src/Tests/{target}/HandlerTests.swift:42: error: -[{target}.HandlerTests testHandlesRequest] : {why}\n"
            f"Test Case '-[{target}.HandlerTests testHandlesRequest]' failed (0.004 seconds).\n"
            f"Test Suite 'All tests' failed at 2026-11-12 10:01:02.301.\n"
            f"\t Executed {n} tests, with 1 failure (0 unexpected) in 0.171 (0.180) seconds")


def swift_testing(target: str, ok: bool, why: str, n: int = 16) -> str:
    if ok:
        return f"􀟈 Test run started.\n􁁛 Test run with {n} tests in 3 suites passed after 0.041 seconds."
    return (f"􀢄 Test handlesRequest() recorded an issue at HandlerTests.swift:42:5: {why}\n"
            f"􀢄 Test handlesRequest() failed after 0.004 seconds with 1 issue.\n"
            f"􀢄 Test run with {n} tests in 3 suites failed after 0.043 seconds with 1 issue.")


def phpunit(file: str, ok: bool, why: str, n: int = 48) -> str:
    if ok:
        return f"PHPUnit 11.4.3 by Sebastian Bergmann and contributors.\n\n{'.' * n}\n\nTime: 00:00.412, Memory: 24.00 MB\n\nOK ({n} tests, 131 assertions)"
    return (f"PHPUnit 11.4.3 by Sebastian Bergmann and contributors.\n\n{'.' * (n - 1)}F\n\n"
            f"There was 1 failure:\n\n1) Tests\\Feature\\HandlerTest::test_handles_request\n{why}\n\n{file}:42\n\n"
            f"FAILURES!\nTests: {n}, Assertions: 131, Failures: 1.")


def artisan(file: str, ok: bool, why: str, n: int = 48) -> str:
    if ok:
        return f"   PASS  Tests\\Feature\\HandlerTest\n  ✓ handles request\n\n  Tests:    {n} passed (131 assertions)\n  Duration: 1.21s"
    return (f"   FAIL  Tests\\Feature\\HandlerTest\n  ⨯ handles request\n\n  FAILED  Tests\\Feature\\HandlerTest > handles request\n"
            f"  {why}\n\n  at {file}:42\n\n  Tests:    1 failed, {n - 1} passed (131 assertions)\n  Duration: 1.30s")


def dotnet(dll: str, ok: bool, why: str, n: int = 58) -> str:
    if ok:
        return (f"  Determining projects to restore...\n  All projects are up-to-date for restore.\n"
                f"Passed!  - Failed:     0, Passed:    {n}, Skipped:     0, Total:    {n}, Duration: 2 s - {dll} (net8.0)")
    return (f"  Failed {dll.removesuffix('.dll')}.HandlerTests.HandlesRequest [12 ms]\n  Error Message:\n   {why}\n"
            f"  Stack Trace:\n     at {dll.removesuffix('.dll')}.HandlerTests.HandlesRequest() in HandlerTests.cs:line 42\n\n"
            f"Failed!  - Failed:     1, Passed:    {n - 1}, Skipped:     0, Total:    {n}, Duration: 2 s - {dll} (net8.0)")


def pytest(file: str, ok: bool, why: str, n: int = 64) -> str:
    if ok:
        return f"{'.' * 40}{'.' * (n - 40)}{' ' * 20}[100%]\n{n} passed in 2.31s"
    return (f"{'.' * 30}F{'.' * (n - 31)}   [100%]\n=================================== FAILURES ===================================\n"
            f"____________________________ test_handles_request ____________________________\n\n    def test_handles_request():\n"
            f">       assert result == expected\nE       {why}\n\n{file}:42: AssertionError\n"
            f"=========================== short test summary info ============================\n"
            f"FAILED {file}::test_handles_request - {why}\n1 failed, {n - 1} passed in 2.48s")


def unittest(file: str, ok: bool, why: str, n: int = 33) -> str:
    if ok:
        return f"{'.' * n}\n----------------------------------------------------------------------\nRan {n} tests in 0.214s\n\nOK"
    return (f"{'.' * (n - 1)}F\n======================================================================\n"
            f"FAIL: test_handles_request (tests.test_handler.HandlerTest.test_handles_request)\n"
            f"----------------------------------------------------------------------\nTraceback (most recent call last):\n"
            f'  File "{file}", line 42, in test_handles_request\n    self.assertEqual(result, expected)\nAssertionError: {why}\n\n'
            f"----------------------------------------------------------------------\nRan {n} tests in 0.220s\n\nFAILED (failures=1)")


# ---- stack profiles -----------------------------------------------------------------------------
@dataclass
class Stack:
    key: str
    split: str
    fmt: str
    repo: str
    full: str  # the whole-suite command
    focused: str  # one file or test
    out: Any  # (ok, why) -> runner output
    src: str  # the file with the bug (relative)
    test_file: str
    old: str
    new: str
    why: str  # the assertion message of the failure
    manager_wrong: str  # an install command the user corrects
    manager_right: str  # the convention's install command
    convention: str  # what the user says
    convention_word: str  # the phrase a later session must see
    dep: str
    env_var: str
    env_error: str  # how the runner reports the missing variable
    script: str  # a script that fails by exit code alone
    feature: str  # a first task
    feature2: str  # a second task in the same session
    symptom: str  # what the user sees after a "fix" that did not work
    topic: str  # what the bug is about (for prompts)
    secrets: list[str] | None = None  # what the session printed (set by the env scenario)


def S(**kw: Any) -> Stack:
    return Stack(**kw)


STACKS = [
    S(key="maven", split="dev", fmt="claude", repo="/Users/Priya.Raman/Developer/OrdersService",
      full="./mvnw verify", focused="./mvnw -q test -Dtest=OrderServiceTest",
      out=lambda ok, why: maven("orders-service", "com.acme.orders.OrderServiceTest", ok, why),
      src="src/main/java/com/acme/orders/OrderService.java",
      test_file="src/test/java/com/acme/orders/OrderServiceTest.java",
      old="return total.subtract(discount).subtract(discount);", new="return total.subtract(discount);",
      why="expected: <90.00> but was: <80.00>", manager_wrong="mvn dependency:get -Dartifact=org.mapstruct:mapstruct:1.6.3",
      manager_right="./mvnw -q dependency:resolve", convention="we add dependencies in the pom by hand and use the wrapper, never a global mvn",
      convention_word="./mvnw", dep="mapstruct", env_var="ORDERS_DB_URL",
      env_error="java.lang.IllegalStateException: environment variable ORDERS_DB_URL is not set",
      script="./scripts/load-fixtures.sh", feature="the order total applies the discount twice, fix it",
      feature2="add a GET /orders/{id}/invoice endpoint", symptom="the invoice PDF is still empty", topic="order discount"),
    S(key="gradle", split="test", fmt="codex", repo="/home/mkowalski/work/LedgerKt",
      full="./gradlew check", focused="./gradlew test --tests 'com.fintrack.ledger.BalanceCalculatorTest'",
      out=lambda ok, why: gradle("com.fintrack.ledger.BalanceCalculatorTest", ok, why),
      src="src/main/kotlin/com/fintrack/ledger/BalanceCalculator.kt",
      test_file="src/test/kotlin/com/fintrack/ledger/BalanceCalculatorTest.kt",
      old="entries.sumOf { it.amount } + opening", new="entries.sumOf { it.amount } + opening - reversed",
      why="expected: <1200> but was: <1450>", manager_wrong="./gradlew dependencies --configuration runtimeClasspath | grep jackson",
      manager_right="./gradlew :app:dependencies --write-locks", convention="we use the version catalog in gradle/libs.versions.toml, no inline versions",
      convention_word="libs.versions.toml", dep="jackson-module-kotlin", env_var="LEDGER_SIGNING_KEY_PATH",
      env_error="Caused by: java.lang.IllegalArgumentException: LEDGER_SIGNING_KEY_PATH is not set",
      script="./scripts/seed-ledger.sh", feature="the balance ignores reversed entries, fix it",
      feature2="add a CSV export of the ledger", symptom="the export still has no reversed rows", topic="reversed entries"),
    S(key="jest", split="dev", fmt="codex", repo="/Users/jane/code/blog",
      full="yarn jest", focused="yarn jest src/lib/slugify.test.ts",
      out=lambda ok, why: jest("src/lib/slugify.test.ts", ok, why),
      src="src/lib/slugify.ts", test_file="src/lib/slugify.test.ts",
      old="return title.toLowerCase().replace(/ /g, '-')", new="return title.toLowerCase().normalize('NFKD').replace(/[^a-z0-9]+/g, '-')",
      why="expect(received).toBe(expected) Expected: \"creme-brulee\" Received: \"crème-brûlée\"",
      manager_wrong="npm install date-fns", manager_right="yarn add date-fns",
      convention="this is a yarn workspace, use yarn and never npm", convention_word="yarn",
      dep="date-fns", env_var="NEXT_PUBLIC_SITE_URL",
      env_error="Error: NEXT_PUBLIC_SITE_URL is required to build the sitemap",
      script="node scripts/generate-feed.mjs", feature="post slugs keep accents, fix slugify",
      feature2="add an RSS feed for the posts", symptom="the post page still 404s for accented titles", topic="slug accents"),
    S(key="vitest", split="test", fmt="claude", repo="/home/alice/code/WebApp",
      full="pnpm vitest run", focused="pnpm vitest run src/cart/total.test.ts",
      out=lambda ok, why: vitest("src/cart/total.test.ts", ok, why),
      src="src/cart/total.ts", test_file="src/cart/total.test.ts",
      old="return items.reduce((s, i) => s + i.price, 0)", new="return items.reduce((s, i) => s + i.price * i.qty, 0)",
      why="expected 20 to be 60 // Object.is equality", manager_wrong="npm i zod", manager_right="pnpm add zod",
      convention="we use pnpm here, never npm or yarn", convention_word="pnpm", dep="zod",
      env_var="VITE_API_BASE", env_error="Error: VITE_API_BASE is not set (see .env.example)",
      script="pnpm tsx scripts/sync-products.ts", feature="the cart total ignores quantities, fix it",
      feature2="add a coupon field to the checkout page", symptom="the checkout still shows the old total", topic="cart quantities"),
    S(key="mocha", split="dev", fmt="claude", repo="/home/dev/GitHub/api",
      full="npm test", focused="npx mocha test/handler.test.js",
      out=lambda ok, why: mocha("test/handler.test.js", ok, why),
      src="src/handler.js", test_file="test/handler.test.js",
      old="if (req.query.limit) limit = req.query.limit", new="if (req.query.limit) limit = Number(req.query.limit)",
      why="expected '10' to equal 10", manager_wrong="yarn add express-rate-limit", manager_right="npm install express-rate-limit",
      convention="we stick to npm and the lockfile, don't use yarn", convention_word="npm install",
      dep="express-rate-limit", env_var="JWT_ISSUER", env_error="Error: JWT_ISSUER must be set",
      script="node scripts/migrate.js", feature="the limit query param is compared as a string, fix it",
      feature2="add rate limiting to the login route", symptom="pagination still returns all rows", topic="limit param"),
    S(key="cypress", split="test", fmt="codex", repo="/Users/LucasM/Projects/ShopFront-2024",
      full="npx cypress run", focused="npx cypress run --spec cypress/e2e/checkout.cy.ts",
      out=lambda ok, why: cypress("cypress/e2e/checkout.cy.ts", ok, why),
      src="src/pages/checkout.tsx", test_file="cypress/e2e/checkout.cy.ts",
      old="<button onClick={submit}>Pay</button>", new="<button data-cy=\"pay\" onClick={submit}>Pay</button>",
      why="Timed out retrying after 4000ms: Expected to find element: [data-cy=pay], but never found it.",
      manager_wrong="npm install cypress-real-events", manager_right="bun add -d cypress-real-events",
      convention="we use bun for packages, not npm", convention_word="bun add", dep="cypress-real-events",
      env_var="CYPRESS_BASE_URL", env_error="Error: CYPRESS_BASE_URL is not set, cannot reach the app",
      script="bun run scripts/reset-db.ts", feature="the checkout e2e can't find the pay button, fix it",
      feature2="add an e2e test for the empty cart", symptom="the pay button still does nothing in Safari", topic="pay button"),
    S(key="rspec", split="dev", fmt="claude", repo="/home/chen_wei/src/BookingEngine",
      full="bundle exec rspec", focused="bundle exec rspec spec/models/booking_spec.rb",
      out=lambda ok, why: rspec("spec/models/booking_spec.rb", ok, why),
      src="app/models/booking.rb", test_file="spec/models/booking_spec.rb",
      old="ends_at > other.starts_at || starts_at < other.ends_at", new="ends_at > other.starts_at && starts_at < other.ends_at",
      why="expected: false got: true (compared using ==)", manager_wrong="gem install ice_cube",
      manager_right="bundle add ice_cube", convention="always add gems through the Gemfile with bundle add, never gem install",
      convention_word="bundle add", dep="ice_cube", env_var="STRIPE_CONNECT_CLIENT_ID",
      env_error="KeyError: key not found: \"STRIPE_CONNECT_CLIENT_ID\"",
      script="bin/rails runner script/backfill_slots.rb", feature="bookings that don't overlap are reported as overlapping, fix it",
      feature2="add recurring bookings", symptom="the calendar still shows the clash", topic="booking overlap"),
    S(key="minitest", split="test", fmt="codex", repo="/Users/marie-claire/Sites/Recettes",
      full="bin/rails test", focused="bin/rails test test/models/recipe_test.rb",
      out=lambda ok, why: minitest("test/models/recipe_test.rb", ok, why),
      src="app/models/recipe.rb", test_file="test/models/recipe_test.rb",
      old="ingredients.sum(&:grams) / servings", new="ingredients.sum(&:grams).fdiv(servings).round(1)",
      why="Expected: 12.5 Actual: 12", manager_wrong="gem install kaminari", manager_right="bundle add kaminari",
      convention="we don't install gems globally, it goes through bundle add", convention_word="bundle add",
      dep="kaminari", env_var="S3_ASSETS_BUCKET", env_error="ArgumentError: S3_ASSETS_BUCKET is missing",
      script="bin/rails db:seed", feature="grams per serving are rounded down, fix it",
      feature2="paginate the recipes index", symptom="the nutrition panel still shows 12g", topic="grams per serving"),
    S(key="go-dev", split="dev", fmt="codex", repo="/home/o.adeyemi/go/src/github.com/nimbus-io/Geofence",
      full="go test ./...", focused="go test ./internal/fence -run TestContains",
      out=lambda ok, why: gotest("github.com/nimbus-io/geofence/internal/fence", ok, why),
      src="internal/fence/polygon.go", test_file="internal/fence/polygon_test.go",
      old="if (yi > y) != (yj > y) && x < (xj-xi)*(y-yi)/(yj-yi)+xi {", new="if (yi > y) != (yj > y) && x <= (xj-xi)*(y-yi)/(yj-yi)+xi {",
      why="Contains(edge point) = false, want true", manager_wrong="go get github.com/paulmach/orb@latest",
      manager_right="go get github.com/paulmach/orb@v0.11.1", convention="never use @latest, we pin module versions",
      convention_word="pin module versions", dep="orb", env_var="GEOFENCE_REDIS_ADDR",
      env_error="panic: GEOFENCE_REDIS_ADDR is not set", script="go run ./cmd/import-zones",
      feature="points on the polygon edge are reported outside, fix it", feature2="add a /zones/{id} endpoint",
      symptom="the map still marks the border stores as outside", topic="polygon edge"),
    S(key="go-test", split="test", fmt="claude", repo="/Users/AhmedK/code/RateLimiterV2",
      full="go test -race ./...", focused="go test -race ./limiter -run TestBurst",
      out=lambda ok, why: gotest("github.com/acme/ratelimiterv2/limiter", ok, why),
      src="limiter/bucket.go", test_file="limiter/bucket_test.go",
      old="b.tokens = min(b.capacity, b.tokens+elapsed*b.rate)", new="b.tokens = min(b.capacity, b.tokens+elapsed.Seconds()*b.rate)",
      why="allowed 3 of 10 burst requests, want 10", manager_wrong="go get golang.org/x/time@latest",
      manager_right="go get golang.org/x/time@v0.8.0", convention="we pin module versions, no @latest",
      convention_word="pin module versions", dep="x/time", env_var="LIMITER_REDIS_URL",
      env_error="limiter: LIMITER_REDIS_URL must be set", script="go run ./cmd/loadgen",
      feature="burst requests are throttled too early, fix it", feature2="export prometheus metrics for the limiter",
      symptom="production still returns 429 on bursts", topic="burst throttling"),
    S(key="cargo-dev", split="dev", fmt="claude", repo="/home/ivanov_ap/projects/tomlfmt-rs",
      full="cargo test", focused="cargo test parser::tests",
      out=lambda ok, why: cargo("tomlfmt", ok, why),
      src="src/parser.rs", test_file="src/parser.rs",
      old="let key = line.split('=').next().unwrap();", new="let key = line.split_once('=').map(|(k, _)| k.trim()).unwrap_or(line);",
      why="assertion `left == right` failed\n  left: \"a \"\n right: \"a\"", manager_wrong="cargo install serde",
      manager_right="cargo add serde --features derive", convention="dependencies go in with cargo add, and we use thiserror not anyhow in the lib",
      convention_word="thiserror", dep="serde", env_var="TOMLFMT_CONFIG_DIR",
      env_error="thread 'main' panicked at src/main.rs:12:5:\nTOMLFMT_CONFIG_DIR is not set",
      script="./scripts/release.sh", feature="keys keep trailing spaces after parsing, fix it",
      feature2="add a --check flag", symptom="formatting still changes quoted keys", topic="key whitespace"),
    S(key="cargo-test", split="test", fmt="codex", repo="/Users/tanaka/Developer/ImgResizeKit",
      full="cargo test --workspace", focused="cargo test -p resize-core scale",
      out=lambda ok, why: cargo("resize-core", ok, why),
      src="crates/resize-core/src/scale.rs", test_file="crates/resize-core/src/scale.rs",
      old="let h = w * src_h / src_w;", new="let h = (w as u64 * src_h as u64 / src_w as u64) as u32;",
      why="attempt to multiply with overflow", manager_wrong="cargo install image",
      manager_right="cargo add image --no-default-features", convention="use cargo add and keep default features off",
      convention_word="default features", dep="image", env_var="RESIZE_CACHE_DIR",
      env_error="Error: RESIZE_CACHE_DIR is not set", script="./scripts/bench.sh",
      feature="scaling huge images overflows, fix it", feature2="add webp output", symptom="the 8k images still crash the worker", topic="scale overflow"),
    S(key="xctest", split="dev", fmt="claude", repo="/Users/jane/Developer/MyApp",
      full="swift test", focused="swift test --filter HandlerTests",
      out=lambda ok, why: xctest("MyAppTests", ok, why),
      src="Sources/MyApp/PriceFormatter.swift", test_file="Tests/MyAppTests/HandlerTests.swift",
      old="formatter.locale = Locale(identifier: \"en_US\")", new="formatter.locale = locale",
      why="XCTAssertEqual failed: (\"$1,234.50\") is not equal to (\"1.234,50 €\")",
      manager_wrong="pod install", manager_right="swift package resolve",
      convention="we use SwiftPM only, no CocoaPods", convention_word="SwiftPM", dep="swift-collections",
      env_var="MYAPP_API_TOKEN_FILE", env_error="Fatal error: MYAPP_API_TOKEN_FILE is not set",
      script="./scripts/bump-build-number.sh", feature="prices ignore the user's locale, fix it",
      feature2="add a settings screen for the currency", symptom="German users still see dollars", topic="price locale"),
    S(key="swift-testing", split="test", fmt="codex", repo="/home/runner/work/CalendarKit/CalendarKit",
      full="swift test --parallel", focused="swift test --filter RecurrenceTests",
      out=lambda ok, why: swift_testing("CalendarKitTests", ok, why),
      src="Sources/CalendarKit/Recurrence.swift", test_file="Tests/CalendarKitTests/RecurrenceTests.swift",
      old="date.addingTimeInterval(86400 * 7)", new="calendar.date(byAdding: .weekOfYear, value: 1, to: date)!",
      why="Expectation failed: (next → 2026-03-30 01:00) == (expected → 2026-03-30 00:00)",
      manager_wrong="brew install swiftlint", manager_right="swift package plugin swiftlint",
      convention="we run swiftlint through the package plugin, never a brew install", convention_word="package plugin",
      dep="swiftlint", env_var="CALENDARKIT_TZ", env_error="Fatal error: CALENDARKIT_TZ is not set",
      script="./scripts/gen-docs.sh", feature="weekly recurrences drift an hour across DST, fix it",
      feature2="support monthly recurrences", symptom="the March event still shows at 1am", topic="DST drift"),
    S(key="phpunit", split="dev", fmt="codex", repo="/var/www/html/InvoiceNinjaFork",
      full="vendor/bin/phpunit", focused="vendor/bin/phpunit --filter HandlerTest",
      out=lambda ok, why: phpunit("tests/Feature/HandlerTest.php", ok, why),
      src="app/Services/TaxCalculator.php", test_file="tests/Feature/HandlerTest.php",
      old="return $net * $rate;", new="return round($net * $rate / 100, 2);",
      why="Failed asserting that 1900.0 matches expected 19.0.", manager_wrong="composer global require brick/money",
      manager_right="composer require brick/money", convention="never composer global require, dependencies go in composer.json",
      convention_word="composer require", dep="brick/money", env_var="TAX_API_ENDPOINT",
      env_error="RuntimeException: TAX_API_ENDPOINT is not set", script="php bin/import-rates.php",
      feature="tax is 100 times too high, fix TaxCalculator", feature2="add a tax report endpoint",
      symptom="the PDF still shows 1900 tax", topic="tax rate"),
    S(key="artisan", split="test", fmt="claude", repo="/Users/Fernanda/Projects/clinic-portal",
      full="php artisan test", focused="php artisan test --filter=HandlerTest",
      out=lambda ok, why: artisan("tests/Feature/HandlerTest.php", ok, why),
      src="app/Http/Controllers/AppointmentController.php", test_file="tests/Feature/HandlerTest.php",
      old="->where('starts_at', '>', now())", new="->where('starts_at', '>=', now()->startOfDay())",
      why="Failed asserting that 2 is identical to 3.", manager_wrong="composer global require laravel/pint",
      manager_right="composer require --dev laravel/pint", convention="dependencies go in composer.json with composer require, nothing global",
      convention_word="composer require", dep="laravel/pint", env_var="SMS_GATEWAY_URL",
      env_error="ErrorException: SMS_GATEWAY_URL is not set", script="php artisan app:send-reminders",
      feature="today's earlier appointments are missing from the list, fix it", feature2="send SMS reminders a day before",
      symptom="the morning appointments still don't show", topic="today's appointments"),
    S(key="dotnet-dev", split="dev", fmt="claude", repo="C:/Users/JSmith/source/repos/WebApi",
      full="dotnet test", focused="dotnet test --filter FullyQualifiedName~HandlerTests",
      out=lambda ok, why: dotnet("WebApi.Tests.dll", ok, why),
      src="src/WebApi/Services/DiscountService.cs", test_file="tests/WebApi.Tests/HandlerTests.cs",
      old="return price - price * pct;", new="return price - price * pct / 100m;",
      why="Assert.Equal() Failure: Expected: 90 Actual: -900", manager_wrong="nuget install Polly",
      manager_right="dotnet add src/WebApi package Polly", convention="we use dotnet add package with central package management, no nuget.exe",
      convention_word="dotnet add", dep="Polly", env_var="WEBAPI_SQL_CONN",
      env_error="System.InvalidOperationException: WEBAPI_SQL_CONN is not set",
      script="dotnet run --project tools/Seeder", feature="discounts produce negative prices, fix DiscountService",
      feature2="add a health check endpoint", symptom="the basket still shows negative totals", topic="discount percent"),
    S(key="dotnet-test", split="test", fmt="codex", repo="/home/RBrown01/repos/Fleet.Telemetry",
      full="dotnet test Fleet.sln", focused="dotnet test tests/Fleet.Tests --filter HandlerTests",
      out=lambda ok, why: dotnet("Fleet.Tests.dll", ok, why),
      src="src/Fleet.Core/SpeedCalculator.cs", test_file="tests/Fleet.Tests/HandlerTests.cs",
      old="return distanceKm / elapsed.TotalMinutes;", new="return distanceKm / elapsed.TotalHours;",
      why="Expected speed to be 60.0, but found 1.0.", manager_wrong="nuget install Serilog",
      manager_right="dotnet add src/Fleet.Core package Serilog", convention="packages go in with dotnet add package, never nuget install",
      convention_word="dotnet add", dep="Serilog", env_var="FLEET_MQTT_HOST",
      env_error="System.ArgumentNullException: FLEET_MQTT_HOST is not set", script="dotnet run --project tools/Replay",
      feature="speeds are reported per minute instead of per hour, fix it", feature2="add a geofence alert",
      symptom="the dashboard still shows 1 km/h", topic="speed units"),
    S(key="pytest", split="dev", fmt="codex", repo="/Users/dev/Code/Work/InvoiceParser",
      full="uv run pytest", focused="uv run pytest tests/test_amounts.py -q",
      out=lambda ok, why: pytest("tests/test_amounts.py", ok, why),
      src="src/invoice_parser/amounts.py", test_file="tests/test_amounts.py",
      old="return Decimal(text.replace(',', '.'))", new="return Decimal(text.replace('.', '').replace(',', '.'))",
      why="decimal.InvalidOperation: [<class 'decimal.ConversionSyntax'>]", manager_wrong="pip install babel",
      manager_right="uv add babel", convention="we use uv for everything, don't pip install", convention_word="uv add",
      dep="babel", env_var="PARSER_OCR_URL", env_error="KeyError: 'PARSER_OCR_URL'",
      script="uv run python scripts/reprocess.py", feature="amounts like 1.234,50 fail to parse, fix it",
      feature2="add a CLI to parse a folder of PDFs", symptom="the big invoices still come out as zero", topic="amount parsing"),
    S(key="unittest", split="test", fmt="claude", repo="/home/kwame.mensah/code/SensorHub",
      full="python -m unittest discover -s tests", focused="python -m unittest tests.test_handler",
      out=lambda ok, why: unittest("tests/test_handler.py", ok, why),
      src="sensorhub/calibrate.py", test_file="tests/test_handler.py",
      old="return raw * self.gain + self.offset * self.gain", new="return raw * self.gain + self.offset",
      why="21.5 != 23.65", manager_wrong="pip install numpy", manager_right="poetry add numpy",
      convention="we use poetry, don't pip install anything", convention_word="poetry add", dep="numpy",
      env_var="SENSORHUB_MQTT_URL", env_error="RuntimeError: SENSORHUB_MQTT_URL is not set",
      script="python scripts/replay_capture.py", feature="calibrated readings are off by the offset, fix it",
      feature2="add a CSV exporter for readings", symptom="the greenhouse still reads 2 degrees high", topic="calibration offset"),
    S(key="compose-dev", split="dev", fmt="claude", repo="/home/dev/src/k8sOperatorForPostgres14",
      full="docker compose run --rm app pytest", focused="docker compose run --rm app pytest tests/test_backup.py",
      out=lambda ok, why: pytest("tests/test_backup.py", ok, why),
      src="operator/backup.py", test_file="tests/test_backup.py",
      old="keep = sorted(backups)[:retention]", new="keep = sorted(backups)[-retention:]",
      why="AssertionError: assert ['b1', 'b2'] == ['b4', 'b5']", manager_wrong="pip install kopf",
      manager_right="docker compose run --rm app uv add kopf", convention="everything runs inside the compose app container, never on the host",
      convention_word="docker compose run", dep="kopf", env_var="OPERATOR_S3_BUCKET",
      env_error="KeyError: 'OPERATOR_S3_BUCKET'", script="docker compose run --rm app python scripts/restore.py",
      feature="backup retention deletes the newest backups, fix it", feature2="add a restore command",
      symptom="staging still lost last night's backup", topic="backup retention"),
    S(key="compose-test", split="test", fmt="codex", repo="/workspaces/acme-monorepo",
      full="docker compose run --rm web bundle exec rspec", focused="docker compose run --rm web bundle exec rspec spec/models/booking_spec.rb",
      out=lambda ok, why: rspec("spec/models/invoice_spec.rb", ok, why),
      src="app/models/invoice.rb", test_file="spec/models/invoice_spec.rb",
      old="due_on = issued_on + 30", new="due_on = issued_on.next_month",
      why="expected: 2026-03-01 got: 2026-03-03", manager_wrong="gem install money-rails",
      manager_right="docker compose run --rm web bundle add money-rails", convention="run everything through docker compose run web, nothing on the host",
      convention_word="docker compose run", dep="money-rails", env_var="INVOICE_MAILER_FROM",
      env_error="KeyError: key not found: \"INVOICE_MAILER_FROM\"", script="docker compose run --rm web bin/rails runner script/resend.rb",
      feature="invoice due dates are wrong in February, fix it", feature2="email overdue reminders",
      symptom="the February invoices are still due on the 3rd", topic="due dates"),
]


# ---- scenarios -----------------------------------------------------------------------------------
def run(st: Stack, cmd: str, out: str, code: int, text: str = "") -> Any:
    if st.fmt == "codex":
        return MS.sh(cmd, out, code, text)
    return MS.bash(cmd, out, code, text)


def change(st: Stack, old: str, new: str, say: str = "") -> Any:
    path = f"{st.repo}/{st.src}"
    if st.fmt == "codex":
        return MS.patch(st.src, old, new, say)
    return MS.edit(path, old, new, f"    {new}", 40, say)


def look(st: Stack, text: str) -> Any:
    if st.fmt == "codex":
        return MS.sh(f"sed -n '30,60p' {st.src}", text)
    return MS.read(f"{st.repo}/{st.src}", text, 30)


def pick(*options: str) -> str:
    return RNG.choice(options)


def s_fix(st: Stack) -> Any:
    """A failing whole suite, a read, an edit, then a focused run passes."""
    fail = st.out(False, st.why)
    prompt = pick(st.feature, st.feature.capitalize() + " please", f"hey, {st.feature}")
    turns = [(prompt, [
        run(st, st.full, fail, 1, "Running the suite to reproduce."),
        look(st, f"    // ...\n    {st.old}\n    // ..."),
        change(st, st.old, st.new, "The bug is in this line; fixing it."),
        run(st, st.focused, st.out(True, ""), 0, "Re-running the failing test."),
        MS.Say(f"Fixed `{st.src}`: {st.topic} is now handled correctly and the failing test passes."),
    ])]
    return "fix", prompt, "success", [st.full, st.src.rsplit("/", 1)[-1]], turns


def s_still_fails(st: Stack) -> Any:
    """An edit, and the suite still fails; the reply does not say so."""
    fail = st.out(False, st.why)
    prompt = pick(f"{st.topic} is broken again, can you fix it?", f"please look at the {st.topic} bug")
    turns = [(prompt, [
        look(st, f"    {st.old}"),
        change(st, st.old, st.old + "  // normalised", "Adjusting the calculation."),
        run(st, st.full, fail, 1, "Checking the suite."),
        MS.Say(f"I adjusted the {st.topic} handling in `{st.src}`."),
    ])]
    why = " ".join(st.why.split("\n")[0].split()[:5]).rstrip(":,")
    return "still-fails", prompt, "failure", [why], turns


def s_two_tasks(st: Stack) -> Any:
    """Task one succeeds; a new prompt ("ok now ...") starts a second task, whose script fails."""
    first = st.feature
    second = pick(f"ok now {st.feature2}", f"Next, {st.feature2}", f"thanks! {st.feature2}",
                  f"great. {st.feature2.capitalize()}")
    turns = [(first, [
        look(st, f"    {st.old}"),
        change(st, st.old, st.new),
        run(st, st.full, st.out(True, ""), 0),
        MS.Say("Done, the suite is green."),
    ]), (second, [
        run(st, st.script, "Loading configuration...\nconnecting to service...\n", 2,
            "Running the data script first."),
        MS.Say(f"I started on it: the script `{st.script}` stopped early; the feature is in place otherwise."),
    ])]
    return "two-tasks", first, "failure", [st.script], turns


def s_feedback(st: Stack) -> Any:
    """The agent says it is done; the user says it did not work; the session ends there."""
    prompt = pick(f"{st.symptom.replace('still ', '')}, fix it", f"users report that {st.symptom.replace('still ', '')}")
    complaint = pick(f"that didn't work, {st.symptom}", f"nope, {st.symptom}", f"still broken: {st.symptom}")
    turns = [(prompt, [
        look(st, f"    {st.old}"),
        change(st, st.old, st.old.replace(";", "") + " ", "Making the change."),
        MS.Say("Done: I updated the calculation; it should be correct now."),
    ]), (complaint, [
        MS.Say("Sorry about that. I need the exact input that fails to dig further; can you share one?"),
    ])]
    return "feedback", prompt, "failure", [st.src.rsplit("/", 1)[-1]], turns


def s_convention(st: Stack) -> Any:
    """The agent installs with the wrong tool; the user states the convention; it redoes it."""
    prompt = pick(f"add {st.dep} to the project", f"we need {st.dep}, add it", f"please add the {st.dep} dependency")
    turns = [(prompt, [
        run(st, st.manager_wrong, "", 0, "Adding the dependency."),
        MS.Say(f"Added {st.dep}."),
    ]), (st.convention, [
        run(st, st.manager_right, f"Resolved {st.dep}", 0, "Using the project's tool instead."),
        run(st, st.full, st.out(True, ""), 0),
        MS.Say(f"Redone with `{st.manager_right}`; the suite passes."),
    ])]
    return "convention", prompt, "success", [st.convention_word], turns


SECRET_RNG = random.Random(4407)  # apart from RNG: adding secrets changed no other draw
AN = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def fake(n: int, alphabet: str = AN) -> str:
    return "".join(SECRET_RNG.choice(alphabet) for _ in range(n))


def printed_secrets(st: Stack) -> tuple[str, list[str]]:
    """A ``cat .env.test`` the agent runs in the env scenario: a database URL with a password,
    a provider key and a value under a neutral name (fake values in the real shapes)."""
    password = fake(6) + SECRET_RNG.choice("!#%&") + fake(8)
    key = SECRET_RNG.choice(["sk_test_", "ghp_", "xoxb-", "AKIA"])
    key += fake(16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") if key == "AKIA" else fake(32)
    neutral = fake(40, AN + "+/")
    text = (f"DATABASE_URL=postgres://app:{password}@localhost:5432/app_test\n"
            f"PAYMENTS_API_KEY={key}\nSIGNING_BLOB={neutral}\nLOG_LEVEL=debug\n")
    return text, [password, key, neutral]


def s_env(st: Stack) -> Any:
    """The suite fails on a missing environment variable; .env.example documents it; it passes.
    On the way the agent prints the test env file, secrets and all."""
    prompt = pick("the tests crash on a fresh clone, sort it out", "CI is red on a clean checkout, can you fix it",
                  "set up the project so the tests run")
    env_text, secrets = printed_secrets(st)
    st.secrets = secrets
    turns = [(prompt, [
        run(st, st.full, st.env_error, 1, "Running the suite."),
        run(st, "cat .env.test", env_text, 0, "Checking what the test env sets."),
        run(st, f"grep -rn {st.env_var} .env.example", "", 1),
        MS.write(f"{st.repo}/.env.example", f"{st.env_var}=\n") if st.fmt == "claude" else
        MS.patch(".env.example", "", f"{st.env_var}="),
        run(st, f"set -a; . ./.env.test; set +a; {st.full}", st.out(True, ""), 0),
        MS.Say(f"The suite needs {st.env_var}; I documented it in .env.example and the suite passes with the test env loaded."),
    ])]
    return "env", prompt, "success", [st.env_var], turns


SCENARIOS = [s_fix, s_still_fails, s_two_tasks, s_feedback, s_convention, s_env]


def sessions() -> list[tuple[Stack, str, Any]]:
    out = []
    for st in STACKS:
        chosen = [s_fix, s_convention, s_env, *RNG.sample([s_still_fails, s_two_tasks, s_feedback], 2)]
        for scenario in chosen:
            out.append((st, scenario.__name__, scenario(st)))
    return out


def probes(played: list[tuple[Stack, str, Any]]) -> list[dict[str, Any]]:
    out = []
    for st, _name, (kind, _prompt, _, lessons, _) in played:
        if kind == "fix":
            out.append((st, f"the {st.topic} tests are failing again", lessons))
        elif kind == "convention":
            out.append((st, pick(f"add a dependency for {st.feature2.split()[1]}", "install a new library for logging"),
                        lessons))
        elif kind == "env":
            out.append((st, "the suite fails on my new laptop", lessons))
        elif kind == "still-fails":
            out.append((st, f"try the {st.topic} bug again", lessons))
    rows = []
    for st, prompt, must in out:
        rows.append({"cwd": st.repo, "prompt": prompt, "inject": True, "must_contain": must,
                     "must_not_contain": [], "split": st.split})
    for st in STACKS:  # a sibling folder with a similar name: nothing to inject
        sibling = st.repo + pick("-old", "2", "-fork")
        rows.append({"cwd": sibling, "prompt": f"{st.feature}", "inject": False, "must_contain": [],
                     "must_not_contain": [st.env_var], "split": st.split})
    for i, row in enumerate(rows, 1):
        row["id"] = f"q{i:03d}"
    return rows


def main(folder: Path = HERE) -> None:
    start = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
    played = sessions()
    labels: dict[str, Any] = {"version": 1, "sessions": [], "probes": probes(played)}
    for sub in ("claude", "codex"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
        for old in (folder / sub).glob("*.jsonl"):
            old.unlink()
    for i, (st, _name, (kind, task, outcome, lessons, turns)) in enumerate(played, 1):
        slug = f"{st.key}-{kind}"
        secrets = list(st.secrets or []) if kind == "env" else []
        session = Session(slug, st.fmt, st.repo, st.repo, task, outcome, lessons, turns, secrets)
        clock = Clock(start + timedelta(hours=3 * i))
        sid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"deltamem-stacks/{slug}"))
        lines = (MS.render_claude if st.fmt == "claude" else MS.render_codex)(session, sid, clock)
        fname = f"{st.fmt}/{i:03d}-{slug}.jsonl"
        (folder / fname).write_text("".join(json.dumps(line, ensure_ascii=False) + "\n"
                                            for line in lines), encoding="utf-8")
        labels["sessions"].append({
            "id": f"t{i:03d}", "file": fname, "format": st.fmt, "repo": st.repo, "cwd": st.repo,
            "task": task, "outcome": outcome, "lessons": lessons, "secrets": secrets, "stale": [],
            "stack": st.key, "scenario": kind, "split": st.split})
    (folder / "labels.json").write_text(json.dumps(labels, indent=1, ensure_ascii=False) + "\n",
                                        encoding="utf-8")
    print(f"{len(labels['sessions'])} sessions, {len(labels['probes'])} probes -> {folder}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
