"""Distillers keep what an operator acts on and drop the rest, for each kind of paste."""

from __future__ import annotations

from cairn.core.tokens import count_tokens
from cairn.memory.context.distill import detect, distill, log_template
from cairn.memory.context.pastes import render_text

PYTEST = """\
============================= test session starts ==============================
platform linux -- Python 3.12.3, pytest-8.3.3, pluggy-1.5.0
rootdir: /srv/payments
collected 212 items

tests/test_api.py ........F.....                                         [  6%]
tests/test_auth.py ...F..                                                [  9%]
tests/test_ledger.py ........................................................ [ 40%]

=================================== FAILURES ===================================
______________________________ test_login_expired ______________________________

    def test_login_expired(client):
        resp = client.post("/login", json={"token": EXPIRED})
>       assert resp.status_code == 401
E       assert 500 == 401
E        +  where 500 = <Response [500]>.status_code

tests/test_auth.py:44: AssertionError
_______________________________ test_rate_limit ________________________________

    def test_rate_limit(client):
>       assert hit(client, 101).status_code == 429
E       AssertionError: expected 429

tests/test_api.py:88: AssertionError
=========================== short test summary info ============================
FAILED tests/test_api.py::test_rate_limit - AssertionError: expected 429
FAILED tests/test_auth.py::test_login_expired - assert 500 == 401
=================== 2 failed, 210 passed, 3 warnings in 12.34s ===================
"""

GO_TEST = """\
=== RUN   TestCharge
--- PASS: TestCharge (0.00s)
=== RUN   TestRefundTwice
    refund_test.go:41: expected 409, got 201
--- FAIL: TestRefundTwice (0.01s)
FAIL
FAIL\tgithub.com/acme/payments/refund\t0.214s
ok  \tgithub.com/acme/payments/charge\t0.102s
"""

CARGO = """\
running 3 tests
test ledger::tests::posts_entry ... ok
test ledger::tests::rejects_negative ... FAILED
test ledger::tests::balances ... ok

failures:

---- ledger::tests::rejects_negative stdout ----
thread 'ledger::tests::rejects_negative' panicked at src/ledger.rs:88:9:
assertion failed: result.is_err()

test result: FAILED. 2 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out
"""

MYPY = """\
cairn/a.py:12: error: Incompatible return value type (got "int", expected "str")  [return-value]
cairn/a.py:40: error: Incompatible return value type (got "int", expected "str")  [return-value]
cairn/a.py:41: error: Incompatible return value type (got "int", expected "str")  [return-value]
cairn/b.py:3: error: Module "x" has no attribute "y"  [attr-defined]
cairn/b.py:9: note: See https://mypy.rtfd.io/en/stable/_refs.html#code-attr-defined
Found 4 errors in 2 files (checked 40 source files)
"""

TSC = """\
src/app.ts(12,5): error TS2322: Type 'string' is not assignable to type 'number'.
src/app.ts(30,5): error TS2322: Type 'string' is not assignable to type 'number'.
src/db.ts(7,1): error TS2304: Cannot find name 'pool'.
"""

GCC = """\
main.c: In function 'main':
main.c:5:12: error: 'count' undeclared (first use in this function)
main.c:9:3: warning: implicit declaration of function 'frob' [-Wimplicit-function-declaration]
main.c:14:12: error: 'count' undeclared (first use in this function)
"""

RUSTC = """\
error[E0308]: mismatched types
 --> src/main.rs:4:18
  |
4 |     let x: i32 = "five";
  |            ---   ^^^^^^ expected `i32`, found `&str`

error: aborting due to 1 previous error
"""

TRACEBACK = """\
Traceback (most recent call last):
  File "/app/server.py", line 88, in handle
    return self.pool.get()
  File "/app/pool.py", line 21, in get
    raise PoolExhausted(self.size)
pool.PoolExhausted: pool of 20 connections exhausted
"""

JAVA = """\
Exception in thread "main" java.lang.IllegalStateException: ledger closed
\tat com.acme.Ledger.post(Ledger.java:120)
\tat com.acme.Billing.run(Billing.java:44)
\tat com.acme.Main.main(Main.java:9)
Caused by: java.io.IOException: disk full
\tat com.acme.Store.write(Store.java:77)
"""

DIFF = """\
diff --git a/payments/client.py b/payments/client.py
index 3f2a9c1..8b7d0e4 100644
--- a/payments/client.py
+++ b/payments/client.py
@@ -10,7 +10,9 @@ class Client:
-    retries = 3
+    retries = 5
+    backoff = 0.5
diff --git a/payments/pool.py b/payments/pool.py
new file mode 100644
--- /dev/null
+++ b/payments/pool.py
@@ -0,0 +1,2 @@
+SIZE = 60
+TIMEOUT = 30
"""


def _grep() -> str:
    lines = [f"svc/pool.py:{n}:    POOL_SIZE = settings.get('POOL_SIZE', 20)" for n in range(1, 4)]
    lines += ["svc/pool.py:1:    POOL_SIZE = settings.get('POOL_SIZE', 20)"] * 5  # duplicates
    lines += [f"svc/client{n}.py:{n}:    size = POOL_SIZE * 2" for n in range(30)]
    return "\n".join(lines)


def _log(lines: int = 600) -> str:
    out = []
    for i in range(lines):
        ts = f"2026-11-29T10:{i // 60 % 60:02d}:{i % 60:02d}.{i % 1000:03d}Z"
        if i % 10 == 0:
            out.append(f"{ts} ERROR upstream timed out after {i}ms host=10.0.0.{i % 9}")
        elif i % 7 == 0:
            out.append(f"{ts} WARN slow query took {i * 3}ms on pool {i % 4}")
        else:
            out.append(f"{ts} INFO GET /api/v1/items/{i} 200 {i % 90}ms")
    return "\n".join(out)


def test_each_kind_of_paste_is_recognised() -> None:
    samples = {
        "tests": [PYTEST, GO_TEST, CARGO],
        "compiler": [MYPY, TSC, GCC, RUSTC],
        "trace": [TRACEBACK, JAVA],
        "diff": [DIFF],
        "search": [_grep()],
        "log": [_log()],
    }
    for kind, texts in samples.items():
        for text in texts:
            assert detect(text) == kind, text[:80]


def test_pytest_failures_are_kept_with_their_reason_and_passes_only_counted() -> None:
    d = distill(PYTEST)
    assert d.title == "test run: 2 failed, 210 passed, 3 warnings in 12.34s"
    assert "FAILED tests/test_auth.py::test_login_expired: assert 500 == 401" in d.body
    assert "FAILED tests/test_api.py::test_rate_limit: AssertionError: expected 429" in d.body
    assert "test_ledger" not in d.body  # passing files are counted, not listed
    assert d.errors == (
        "FAILED tests/test_api.py::test_rate_limit",
        "FAILED tests/test_auth.py::test_login_expired",
    )


def test_go_and_cargo_failures_are_kept() -> None:
    go = distill(GO_TEST)
    assert go.errors == ("FAILED TestRefundTwice",)
    assert "TestCharge" in go.passed
    cargo = distill(CARGO)
    assert cargo.errors == ("FAILED ledger::tests::rejects_negative",)
    assert "2 passed; 1 failed" in cargo.title


def test_compiler_errors_are_deduplicated_with_counts_and_places() -> None:
    d = distill(MYPY)
    assert "3 distinct" not in d.title
    assert "2 distinct" in d.title
    assert "[x3 at cairn/a.py:12, cairn/a.py:40, cairn/a.py:41]" in d.body
    tsc = distill(TSC)
    assert "error TS2322" in tsc.body
    assert "[x2 at src/app.ts:12, src/app.ts:30]" in tsc.body
    gcc = distill(GCC)
    assert "'count' undeclared (first use in this function) [x2" in gcc.body
    assert "1 warning(s)" in gcc.title
    rust = distill(RUSTC)
    assert "error E0308: mismatched types" in rust.body
    assert "src/main.rs:4" in rust.body


def test_search_results_are_deduplicated_and_cut_to_top_k() -> None:
    d = distill(_grep())
    assert d.body.count("svc/pool.py:1:") == 1
    assert "more distinct hits" in d.body
    assert d.title.startswith("search: 38 hits, 31 distinct, 31 files")


def test_stack_traces_keep_the_exception_and_innermost_frames() -> None:
    py = distill(TRACEBACK)
    assert py.title == "trace: pool.PoolExhausted: pool of 20 connections exhausted"
    assert "/app/pool.py:21 in get" in py.body
    java = distill(JAVA)
    assert "java.lang.IllegalStateException: ledger closed" in java.body
    assert "java.io.IOException: disk full" in java.title
    assert "Ledger.java:120 in com.acme.Ledger.post" in java.body
    logged = distill("12:00:01 ERROR job failed\n" + JAVA.split("\n", 1)[1].replace(
        "Caused by: java.io.IOException: disk full\n", ""))  # fmt: skip
    assert logged.title == "trace: 12:00:01 ERROR job failed"


def test_a_diff_is_reduced_to_files_counts_and_hunks() -> None:
    d = distill(DIFF)
    assert d.title == "diff: 2 file(s), +4 -1"
    assert "- payments/client.py (+2 -1)" in d.body
    assert "- payments/pool.py (+2 -0)" in d.body
    assert "@@ -10,7 +10,9 @@ class Client:" in d.body


def test_logs_are_mined_into_templates_errors_first_with_head_and_tail() -> None:
    text = _log()
    d = distill(text)
    assert d.title.startswith("log: 600 lines, 3 templates, 60 error lines")
    templates = d.body.split("templates (count, example):")[1]
    assert templates.strip().startswith("x60 ")  # the error template leads
    assert "head:" in d.body
    assert "tail:" in d.body
    assert text.splitlines()[-1] in d.body
    assert count_tokens(d.body) < count_tokens(text) / 20


def test_log_templates_mask_variable_parts() -> None:
    assert log_template("2026-11-29T10:00:01Z GET /x/12 200 35ms from 10.1.2.3:443") == (
        "<*> GET /x/<*> <*> <*> from <*>"
    )


def test_a_pasted_log_keeps_its_introduction_and_becomes_a_card() -> None:
    rendered = render_text("here is the log from api-3 after the deploy:\n" + _log(), 1500)
    [card] = rendered.cards
    assert rendered.prose == "here is the log from api-3 after the deploy:"
    assert f'retrieve_artifact("{card.short}")' in rendered.text
    assert card.content == _log()
    assert count_tokens(rendered.text) < 800


def test_short_messages_and_fenced_snippets_stay_verbatim() -> None:
    text = "restart it?\n```\nsystemctl restart api\n```"
    assert render_text(text, 1500).text == text
    assert render_text("x" * 100, 50).cards == ()  # one long line of prose is not a paste
