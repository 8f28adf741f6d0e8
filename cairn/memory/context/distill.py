"""Distillers: long tool output and pasted text reduced to a short card that keeps what matters.

Each distiller is deterministic and keeps the information an operator acts on: the files and
hunks of a diff, the failing tests (passes only counted), each distinct compiler error once,
the top distinct search hits, the exception and its innermost frames, and for anything else
the log's templates with counts plus its head and tail. The full text goes to the artifact
store; the card names it so the agent can retrieve it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Distilled", "detect", "distill"]

_MAX_LINE = 240


@dataclass(frozen=True, slots=True)
class Distilled:
    """What a distiller kept: a kind, a one-line title, the card body, and the signals found.

    ``errors`` are signatures of failures (failing tests, compiler errors, exceptions) the
    checkpoint tracks as open until they are seen fixed; ``passed`` are tests seen passing;
    ``files`` are paths the text names.
    """

    kind: str
    title: str
    body: str
    errors: tuple[str, ...] = ()
    passed: tuple[str, ...] = ()
    files: tuple[str, ...] = ()


def _clip(line: str, width: int = _MAX_LINE) -> str:
    line = line.rstrip()
    return line if len(line) <= width else line[: width - 1] + "…"


# --- detection ---------------------------------------------------------------------------

_DIFF_FILE = re.compile(r"^diff --git a/(\S+) b/(\S+)", re.M)
_TEST_MARKERS = re.compile(
    r"=+ (?:test session starts|FAILURES|short test summary info) =+|"
    r"^(?:FAILED|PASSED|ERROR) \S+::|^--- (?:FAIL|PASS): |^(?:ok|FAIL)\s+\S+\s+[\d.]+s|"
    r"^Tests:\s+.*(?:passed|failed)|^test result: |^Ran \d+ tests? in ",
    re.M,
)
_COMPILER = re.compile(
    r"^(?P<file>[\w./\\-]+\.\w+)(?::(?P<line>\d+))?(?::(?P<col>\d+))?:\s*"
    r"(?P<sev>error|warning|fatal error)(?:\[(?P<code1>\w+)\])?:\s*(?P<msg>.+?)"
    r"(?:\s+\[(?P<code2>[\w-]+)\])?$|"
    r"^(?P<file2>[\w./\\-]+\.\w+)\((?P<line2>\d+),(?P<col2>\d+)\):\s*"
    r"(?P<sev2>error|warning)\s+(?P<code3>TS\d+):\s*(?P<msg2>.+)$",
    re.M,
)
_RUST_ERROR = re.compile(r"^(?P<sev>error|warning)(?:\[(?P<code>E\d+)\])?: (?P<msg>.+)$", re.M)
_RUST_AT = re.compile(r"^\s*--> (?P<file>[\w./\\-]+):(?P<line>\d+):(?P<col>\d+)", re.M)
_TRACE_START = re.compile(
    r"^Traceback \(most recent call last\):|^Exception in thread |^panic: |"
    r"^\s+at [\w.$<>]+\([\w.]+:\d+\)|^goroutine \d+ \[",
    re.M,
)
_SEARCH_HIT = re.compile(r"^(?P<file>[\w./\\-]+\.\w+):(?P<line>\d+):(?:\d+:)?(?P<text>.*)$")


def detect(text: str) -> str:
    """The kind of ``text``: diff, tests, trace, compiler, search or log."""
    if _DIFF_FILE.search(text) or re.search(r"^--- \S+.*\n\+\+\+ \S+.*\n@@ ", text, re.M):
        return "diff"
    if _TEST_MARKERS.search(text):
        return "tests"
    if _TRACE_START.search(text):
        return "trace"
    lines = [ln for ln in text.splitlines() if ln.strip()]
    compiler = len(_COMPILER.findall(text)) + len(_RUST_ERROR.findall(text))
    if compiler and compiler >= max(1, len(lines) // 20):
        return "compiler"
    hits = sum(1 for ln in lines if _SEARCH_HIT.match(ln))
    if lines and hits >= max(2, int(len(lines) * 0.6)):
        return "search"
    return "log"


def distill(text: str, kind: str | None = None) -> Distilled:
    """Distil ``text`` with the distiller of its kind (detected when not given)."""
    chosen = kind or detect(text)
    return _DISTILLERS.get(chosen, distill_log)(text)


# --- unified diffs -----------------------------------------------------------------------


def distill_diff(text: str) -> Distilled:
    """Files changed with their added / removed line counts, and the hunk headers."""
    files: dict[str, list[int]] = {}
    hunks: list[str] = []
    current = ""
    for line in text.splitlines():
        if line.startswith("diff --git "):
            match = _DIFF_FILE.match(line)
            current = match.group(2) if match else line[11:]
            files.setdefault(current, [0, 0])
        elif line.startswith("+++ "):
            path = line[4:].strip().removeprefix("b/")
            if path != "/dev/null":
                current = path
                files.setdefault(current, [0, 0])
        elif line.startswith("--- "):
            continue
        elif line.startswith("@@"):
            hunks.append(f"{current} {_clip(line, 120)}")
        elif line.startswith("+") and current:
            files.setdefault(current, [0, 0])[0] += 1
        elif line.startswith("-") and current:
            files.setdefault(current, [0, 0])[1] += 1
    added = sum(a for a, _ in files.values())
    removed = sum(r for _, r in files.values())
    title = f"diff: {len(files)} file(s), +{added} -{removed}"
    body = [f"- {path} (+{a} -{r})" for path, (a, r) in list(files.items())[:20]]
    if len(files) > 20:
        body.append(f"- ... and {len(files) - 20} more files")
    if hunks:
        body.append("hunks:")
        body += [f"  {h}" for h in hunks[:12]]
        if len(hunks) > 12:
            body.append(f"  ... {len(hunks) - 12} more hunks")
    return Distilled("diff", title, "\n".join(body), files=tuple(files))


# --- test runners ------------------------------------------------------------------------

_PYTEST_FAILED = re.compile(r"^(?:FAILED|ERROR) (?P<id>\S+::\S+|\S+\.py)(?: - (?P<why>.*))?$", re.M)
_PYTEST_PASSED = re.compile(r"^(?:PASSED )?(?P<id>\S+::\S+)(?: PASSED| <- .*)?$", re.M)
_PYTEST_VERBOSE = re.compile(r"^(?P<id>\S+::\S+) (?P<st>PASSED|FAILED|ERROR|SKIPPED)", re.M)
_PYTEST_SUMMARY = re.compile(r"^=+ (?P<s>.*\b(?:passed|failed|error|errors)\b.*) =+$", re.M)
_PYTEST_SECTION = re.compile(r"^_{3,} (?P<name>\S.*?) _{3,}$", re.M)
_GO_FAIL = re.compile(r"^\s*--- FAIL: (?P<id>\S+)", re.M)
_GO_PASS = re.compile(r"^\s*--- PASS: (?P<id>\S+)", re.M)
_JEST_FAIL = re.compile(r"^\s*(?:\u2715|\u00d7) (?P<id>.+?)(?: \(\d+ ?ms\))?$", re.M)
_JEST_SUMMARY = re.compile(r"^Tests:\s+(?P<s>.+)$", re.M)
_CARGO_FAIL = re.compile(r"^test (?P<id>\S+) \.\.\. FAILED$", re.M)
_CARGO_SUMMARY = re.compile(r"^test result: (?P<s>.+)$", re.M)
_UNITTEST_FAIL = re.compile(r"^(?:FAIL|ERROR): (?P<id>\S+ \([\w.]+\))$", re.M)
_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|warnings?)")


def distill_tests(text: str) -> Distilled:
    """Failures kept (test id and the assertion lines), passes only counted."""
    failed: dict[str, str] = {}
    for match in _PYTEST_FAILED.finditer(text):
        failed.setdefault(match.group("id"), _clip(match.group("why") or "", 200))
    for pattern in (_GO_FAIL, _CARGO_FAIL, _UNITTEST_FAIL, _JEST_FAIL):
        for match in pattern.finditer(text):
            failed.setdefault(match.group("id").strip(), "")
    passed = {m.group("id") for m in _PYTEST_VERBOSE.finditer(text) if m.group("st") == "PASSED"}
    passed |= {m.group("id") for m in _GO_PASS.finditer(text)}
    # pytest's failure sections hold the assertion ("E   ...") lines worth keeping.
    reasons = _pytest_reasons(text)
    for test_id in failed:
        short = test_id.split("::")[-1]
        if not failed[test_id] and short in reasons:
            failed[test_id] = reasons[short]
    summary = ""
    for pattern in (_PYTEST_SUMMARY, _JEST_SUMMARY, _CARGO_SUMMARY):
        found = pattern.findall(text)
        if found:
            summary = _clip(found[-1], 200)
            break
    counts = Counter({k: int(n) for n, k in _COUNT.findall(summary)})
    if not summary:
        go_ok = len(re.findall(r"^ok\s+\S+", text, re.M))
        summary = f"{len(failed)} failed, {len(passed) or go_ok} passed"
    title = f"test run: {summary}"
    body = [f"- FAILED {test_id}" + (f": {why}" if why else "") for test_id, why in failed.items()]
    if len(body) > 25:
        body = [*body[:25], f"- ... and {len(body) - 25} more failures"]
    if not failed:
        body.append(f"- no failures ({counts.get('passed', len(passed))} passed)")
    return Distilled(
        "tests",
        title,
        "\n".join(body),
        errors=tuple(f"FAILED {t}" for t in failed),
        passed=tuple(sorted(passed)),
        files=tuple(dict.fromkeys(t.split("::")[0] for t in failed if "::" in t)),
    )


def _pytest_reasons(text: str) -> dict[str, str]:
    reasons: dict[str, str] = {}
    sections = list(_PYTEST_SECTION.finditer(text))
    for i, section in enumerate(sections):
        end = sections[i + 1].start() if i + 1 < len(sections) else len(text)
        chunk = text[section.end() : end]
        lines = [ln[1:].strip() for ln in chunk.splitlines() if ln.startswith("E ")]
        if lines:
            name = section.group("name").split("::")[-1].split(".")[-1]
            reasons[name] = _clip(" / ".join(lines[:3]), 200)
    return reasons


# --- compilers and type checkers ---------------------------------------------------------


def distill_compiler(text: str) -> Distilled:
    """Each distinct error once, with how often and where it occurred."""
    seen: dict[tuple[str, str], list[str]] = {}
    severities: Counter[str] = Counter()
    for match in _COMPILER.finditer(text):
        if match.group("file"):
            file, line, sev = match.group("file"), match.group("line") or "?", match.group("sev")
            code = match.group("code1") or match.group("code2") or ""
            msg = match.group("msg")
        else:
            file, line, sev = match.group("file2"), match.group("line2"), match.group("sev2")
            code, msg = match.group("code3"), match.group("msg2")
        severities[sev] += 1
        seen.setdefault((f"{sev} {code}".strip(), _clip(msg, 160)), []).append(f"{file}:{line}")
    rust_at = list(_RUST_AT.finditer(text))
    for match in _RUST_ERROR.finditer(text):
        where = next((f"{a['file']}:{a['line']}" for a in rust_at if a.start() > match.end()), "?")
        severities[match.group("sev")] += 1
        key = (f"{match.group('sev')} {match.group('code') or ''}".strip(), match.group("msg"))
        seen.setdefault(key, []).append(where)
    errors = sum(n for sev, n in severities.items() if "error" in sev)
    title = f"compiler: {errors} error(s), {severities['warning']} warning(s), {len(seen)} distinct"
    body: list[str] = []
    for (head, msg), places in list(seen.items())[:25]:
        more = f" (+{len(places) - 3} more)" if len(places) > 3 else ""
        body.append(f"- {head}: {msg} [x{len(places)} at {', '.join(places[:3])}{more}]")
    files = tuple(dict.fromkeys(p.rsplit(":", 1)[0] for ps in seen.values() for p in ps))
    signatures = tuple(f"{h}: {m}" for (h, m) in seen if h.startswith(("error", "fatal")))
    return Distilled("compiler", title, "\n".join(body), errors=signatures, files=files[:30])


# --- search results ----------------------------------------------------------------------


def distill_search(text: str, k: int = 12) -> Distilled:
    """Distinct hits (a line of a file once), the first ``k`` kept, and counts per file."""
    hits: dict[tuple[str, str], str] = {}
    per_file: Counter[str] = Counter()
    for line in text.splitlines():
        match = _SEARCH_HIT.match(line)
        if not match:
            continue
        file, snippet = match.group("file"), match.group("text").strip()
        per_file[file] += 1
        hits.setdefault((file, snippet), f"{file}:{match.group('line')}")
    title = f"search: {sum(per_file.values())} hits, {len(hits)} distinct, {len(per_file)} files"
    body = [f"- {where}: {_clip(snippet, 160)}" for (_, snippet), where in list(hits.items())[:k]]
    if len(hits) > k:
        body.append(f"- ... {len(hits) - k} more distinct hits")
    body.append("files: " + ", ".join(f"{f} ({n})" for f, n in per_file.most_common(8)))
    return Distilled("search", title, "\n".join(body), files=tuple(per_file))


# --- stack traces ------------------------------------------------------------------------

_PY_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>\S+)', re.M)
_JAVA_FRAME = re.compile(r"^\s+at (?P<fn>[\w.$<>]+)\((?P<file>[\w.]+):(?P<line>\d+)\)", re.M)
_JAVA_HEAD = re.compile(r"^Exception in thread \"[^\"]+\" (?P<exc>[\w.$]+(?::.*)?)$")


def distill_trace(text: str) -> Distilled:
    """The exception(s), with the outermost frame and the innermost frames kept."""
    exceptions: list[str] = []
    in_python = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("Traceback (most recent call last)"):
            in_python = True
        elif in_python and line and not line[0].isspace():
            # The first unindented line after a Python traceback's frames is the exception.
            exceptions.append(_clip(stripped, 200))
            in_python = False
        elif stripped.startswith(("panic: ", "Caused by: ")) or _JAVA_HEAD.match(stripped):
            exceptions.append(_clip(stripped.removeprefix("Caused by: "), 200))
    frames = [f"{m['file']}:{m['line']} in {m['fn']}" for m in _PY_FRAME.finditer(text)]
    frames += [f"{m['file']}:{m['line']} in {m['fn']}" for m in _JAVA_FRAME.finditer(text)]
    first_java = _JAVA_FRAME.search(text)
    if not exceptions and first_java:
        # A logged Java exception without the "Exception in thread" header: the line above
        # the first frame names it.
        above = text[: first_java.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
        if above:
            exceptions.append(_clip(above, 200))
    exceptions = list(dict.fromkeys(exceptions))
    last = exceptions[-1] if exceptions else "stack trace"
    title = f"trace: {last}"
    body = [f"- exception: {e}" for e in exceptions[:4]]
    if frames:
        body.append(f"- {len(frames)} frames; outermost: {frames[0]}")
        body += [f"  at {f}" for f in frames[-5:]]
    files = tuple(dict.fromkeys(f.split(":")[0] for f in frames))
    signature = last.split(" (")[0][:160]
    return Distilled("trace", title, "\n".join(body), errors=(signature,), files=files[:20])


# --- anything else: log-template mining --------------------------------------------------

_VARIABLE = re.compile(
    r"\b\d{4}-\d{2}-\d{2}[T ][\d:.,]+(?:Z|[+-]\d{2}:?\d{2})?\b|"  # timestamps
    r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b|"  # uuids
    r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b|"  # IPv4 (and port)
    r"\b0x[0-9a-f]+\b|\b[0-9a-f]{12,}\b|"  # hex ids
    r"\b\d+(?:\.\d+)?(?:ms|s|kb|mb|gb|%)?\b|"  # numbers and measures
    r"\"[^\"]*\"|'[^']*'",  # quoted values
    re.I,
)
_SEVERE = re.compile(r"\b(?:ERROR|FATAL|CRITICAL|PANIC|Exception|Traceback|failed|refused)\b", re.I)
_WARN = re.compile(r"\bWARN(?:ING)?\b")


def log_template(line: str) -> str:
    """The template of a log line: its variable parts (times, ids, numbers...) masked as <*>."""
    return _VARIABLE.sub("<*>", line.strip())


def distill_log(text: str, *, head: int = 5, tail: int = 5, top: int = 12) -> Distilled:
    """Log-template mining: distinct templates with counts (errors first), head and tail."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    templates: Counter[str] = Counter()
    example: dict[str, str] = {}
    for line in lines:
        template = log_template(line)
        templates[template] += 1
        example.setdefault(template, line)
    severe = [t for t in templates if _SEVERE.search(t)]
    warned = sum(n for t, n in templates.items() if _WARN.search(t))
    title = (
        f"log: {len(lines)} lines, {len(templates)} templates, "
        f"{sum(templates[t] for t in severe)} error lines, {warned} warnings"
    )
    body: list[str] = []
    if len(lines) <= head + tail:
        body += [f"  {_clip(ln)}" for ln in lines]
    else:
        body.append("head:")
        body += [f"  {_clip(ln)}" for ln in lines[:head]]
        ranked = sorted(templates, key=lambda t: (t not in severe, -templates[t]))
        body.append("templates (count, example):")
        body += [f"  x{templates[t]} {_clip(example[t], 200)}" for t in ranked[:top]]
        if len(templates) > top:
            body.append(f"  ... {len(templates) - top} more templates")
        body.append("tail:")
        body += [f"  {_clip(ln)}" for ln in lines[-tail:]]
    signatures = tuple(_clip(log_template(example[t]), 160) for t in severe[:5])
    return Distilled("log", title, "\n".join(body), errors=signatures)


_DISTILLERS: dict[str, Callable[[str], Distilled]] = {
    "diff": distill_diff,
    "tests": distill_tests,
    "compiler": distill_compiler,
    "search": distill_search,
    "trace": distill_trace,
    "log": distill_log,
}
