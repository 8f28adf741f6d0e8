"""Facts that change: which thing a memory gives a value for, read by rule, without a model.

"The on-call for payments is Alice", a week later "Bob is now the payments on-call": both give
a value for the same thing (the payments on-call), so the newer supersedes the older (see
:mod:`cairn.memory.supersession`). :func:`claim_of` reads the common shapes of ops facts into a
:class:`Claim`, a normalised *subject* (what the value is of, with the kind of relation) and a
*value*:

- identity: "X is Y", "X is now Y", "X: Y", "X = Y", "X was changed to Y", "the X for Z is Y",
  and the role inverted, "Alice is the on-call for payments";
- ownership: "Alice owns X", "X is owned by Bob", "the owner of X is Alice", "Bob took over X";
- versions: "payments runs v2.3", "payments was bumped to 2.4", "the payments version is 2.5";
- places and hosts: "X runs on db-3", "X moved to db-4", "the X host is db-5";
- dates and times: "the freeze starts on Friday", "the freeze moved to Monday";
- policies: "production deploys require two approvals", "Friday deploys are not allowed".

A false supersession hides a true fact, so the rules are conservative: a text of more than one
sentence, a question, a pronoun or a bare name as the subject ("Alice is on vacation"), an
indefinite or clausal value ("X is a service that...", "the problem is that...") give no claim,
and a generic "X is Y" needs a subject that names an attribute (owner, on-call, version, host,
policy...) or a value that looks like one (a name, a number, a version, a host, a date).
Whatever is not read stays a plain memory, as before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cairn.memory.terms import terms

__all__ = ["SUPERSEDING_KINDS", "Claim", "asks_about", "claim_of", "same_subject"]

# The kinds whose memories assert a current state of things. Episodes (turns of a
# conversation) are records of what was said, and patterns and mistakes are lessons: none of
# them is made stale by a newer value.
SUPERSEDING_KINDS = frozenset({"fact", "decision", "constraint", "preference"})

MAX_SUBJECT_CHARS = 200


@dataclass(frozen=True, slots=True)
class Claim:
    """What a memory gives a value for (``subject``: relation and normalised terms, such as
    ``"is:call payment"``), and the value (normalised: lower case, no article, no "v" before a
    version)."""

    subject: str
    value: str
    relation: str


# --- vocabulary ----------------------------------------------------------------------------

_PRONOUNS = frozenset(
    """i me we us you he him she her they them it this that these those there here what who
    which everything everyone nothing nobody something
    someone anything anyone all one""".split()  # noqa: SIM905
)
# Words that make a subject an attribute of something, whose value can change over time.
_ATTRIBUTES = frozenset(
    """owner owners ownership on-call oncall lead leads manager contact contacts poc dri
    approver approvers reviewer reviewers maintainer maintainers captain commander escalation
    version versions release host hostname hosts server servers address url endpoint ip port
    region zone cluster location date day deadline time schedule window freeze cutoff
    policy policies rule rules limit limits quota budget timeout threshold retention ttl sla
    slo channel status state default branch runbook rotation primary secondary backup tier
    vendor provider price cost rate size capacity mode level priority frequency interval
    cadence database db engine runtime image tag target destination""".split()  # noqa: SIM905
)
# Values that are a policy's setting rather than a description.
_POLICY_VALUES = frozenset(
    """allowed permitted forbidden banned prohibited required optional mandatory enabled
    disabled on off blocked frozen unfrozen
    open closed paused active inactive""".split()  # noqa: SIM905
)
# Words of a subject that name its relation, not the thing: dropped from the subject terms
# (after stemming) so that "the payments version is 2.4" and "payments runs v2.3" agree.
_OWNER_WORDS = frozenset({"owner", "ownership", "own", "owned", "owns"})
_RELATION_WORDS = {
    "version": frozenset({"version", "release", "current", "latest", "running"}),
    # "the code freeze" is "the freeze"
    "when": frozenset({"date", "day", "time", "schedule", "start", "starting", "code"}),
    "end": frozenset({"end", "ending", "date", "day", "time", "code"}),
    "where": frozenset({"host", "hostname", "server", "address", "location", "url", "endpoint"}),
}
# Spellings of one word, after stemming: "the payments DB" is "the payments database".
_SYNONYMS = {"db": "database", "oncall": "call", "prod": "production"}
# Nouns that say nothing about which thing: "the payments service" is "payments".
_FILLER = frozenset(
    {"service", "app", "application", "system", "current", "new", "currently", "policy"}
)
_WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday".split()  # noqa: SIM905
_MONTHS = (  # noqa: SIM905
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec"
).split()
_DATE_WORDS = frozenset(
    [*_WEEKDAYS, *_MONTHS, "today", "tomorrow", "tonight", "noon", "midnight", "eod"]
)
_DATE_FILLER = frozenset(
    "on at the of next this from until by in utc am pm st nd rd th".split()  # noqa: SIM905
)

# Words of a question that ask for a relation's value (as terms: folded and stemmed).
_HINTS = {
    relation: frozenset(terms(words))
    for relation, words in {
        "owner": "own owns owned owner owners ownership responsible maintains maintainer",
        "version": "version versions release releases running runs run deployed",
        "where": "where host hosted server live lives living database runs machine",
        "when": "when day date start starts starting begin begins planned scheduled",
        "end": "when day date end ends ending until",
        "requires": "require requires required need needs needed take takes approval approvals",
        "limit": "limit limits limited cap capped max maximum",
    }.items()
}

# --- patterns ------------------------------------------------------------------------------

_CHANGE_VERBS = (
    r"changed|updated|set|switched|bumped|upgraded|downgraded|moved|migrated|pushed|postponed|"
    r"rescheduled|reassigned|handed over|pointed|repointed|raised|lowered|increased|reduced|"
    r"extended|shortened|rolled out|rolled back|reverted"
)
_LEADING = re.compile(
    r"^(?:(?:fyi|heads up|update|note|reminder|psa|important)\s*[:,!-]\s*|"
    r"(?:as of|starting|effective|from)\s+[^,]{1,40},\s*|from now on,?\s*)",
    re.I,
)
_TRAILING = re.compile(
    r"(?:\s*,)?\s+(?:from now on|for now|until further notice|going forward|again|instead|"
    r"effective (?:immediately|today|\w+)|as of [\w\s-]{1,30}|since [\w\s-]{1,30}|"
    r"starting [\w\s-]{1,30}|this (?:week|month|quarter|sprint)|"
    r"(?:from )?(?:today|tomorrow) on|now)$",
    re.I,
)
_PAREN = re.compile(r"\s*\([^)]*\)")
_NOW = re.compile(r"\b(?:now|currently)\b,?\s*", re.I)

_OWNER_PASSIVE = re.compile(
    r"^(?P<x>.+?) (?:is|are) (?:owned|maintained|run|managed) by (?P<v>.+)$", re.I
)
_OWNER_ACTIVE = re.compile(
    r"^(?P<v>.+?) (?:owns|own|maintains|maintain|has taken over|have taken over|took over|"
    r"takes over|take over|is taking over)(?: ownership of| as)? (?P<x>.+)$",
    re.I,
)
_INVERTED = re.compile(r"^(?P<v>.+?) (?:is|are) (?P<x>(?:the|our) .+)$", re.I)
_CHANGED = re.compile(
    rf"^(?P<x>.+?) (?:was |were |has been |have been |is being |got |is |are )?"
    rf"(?:{_CHANGE_VERBS})(?: back)? (?:to|at|for) (?P<v>.+)$",
    re.I,
)
# "We upgraded payments to v2.4": who did it is not what changed.
_DONE_TO = re.compile(
    rf"^(?:we|they|i|someone|ops|sre)(?: have| just| finally)? (?:{_CHANGE_VERBS}) "
    rf"(?P<x>.+?) (?:back )?(?:to|for) (?P<v>.+)$",
    re.I,
)
_STARTS = re.compile(
    r"^(?P<x>.+?) (?:starts|start|begins|begin|kicks off|will start|will begin|"
    r"is scheduled for|are scheduled for|is planned for|is due|are due|happens|takes place)"
    r"(?: on| at| for)? (?P<v>.+)$",
    re.I,
)
_ENDS = re.compile(
    r"^(?P<x>.+?) (?:ends|end|finishes|will end|lasts until|runs until|is until|is over)"
    r"(?: on| at)? (?P<v>.+)$",
    re.I,
)
_PLACED = re.compile(
    r"^(?P<x>.+?) (?:runs|run|is running|are running|lives|live|is hosted|are hosted|"
    r"is deployed|are deployed|sits|resides|is|are) (?:on|at|in) (?P<v>.+)$",
    re.I,
)
_POINTS = re.compile(r"^(?P<x>.+?) (?:points|point|resolves|resolve) to (?P<v>.+)$", re.I)
_RUNS_VERSION = re.compile(
    r"^(?P<x>.+?) (?:runs|run|is running|are running|uses|use|is at|are at|ships|is on|"
    r"are on) (?P<v>v?\d+(?:\.\d+)*\S*)$",
    re.I,
)
_REQUIRES = re.compile(r"^(?P<x>.+?) (?:requires|require|needs|need|must have) (?P<v>.+)$", re.I)
_LIMITED = re.compile(
    r"^(?P<x>.+?) (?:is|are) (?:limited|capped|restricted) (?:to|at) (?P<v>.+)$", re.I
)
_COPULA = re.compile(r"^(?P<x>.+?) (?:is|are) (?P<v>.+)$", re.I)
# "X: Y" wants a space after the colon, so that a time ("10:00") is not read as one.
_KEY_VALUE = re.compile(r"^(?P<x>[^:=]{2,60}?)\s*(?::\s+|=\s*|->\s*)(?P<v>[^:=]+)$")

_VERSION = re.compile(
    r"^(?:version |release |v)?(?P<n>\d+(?:\.\d+){1,3}(?:[-+][\w.]+)?|\d+)$", re.I
)
_VERSION_V = re.compile(r"^v\d+(?:\.\d+)*(?:[-+][\w.]+)?$", re.I)
_HOST = re.compile(
    r"^(?:(?:the )?(?:host|server|node|machine|cluster|box|instance) )?"
    r"(?P<h>(?:https?://)?[a-z0-9][\w-]*(?:\.[\w-]+)+(?::\d+)?(?:/\S*)?|"
    r"[a-z][\w]*-[\w-]*\d[\w-]*|[a-z]+\d+[\w-]*)$",
    re.I,
)
_TIME = re.compile(r"^\d{1,2}(?::\d\d)?(?:am|pm)?$|^\d{4}-\d\d-\d\d$|^\d{1,2}(?:st|nd|rd|th)?$")
_NUMBER_WORDS = frozenset(
    "zero one two three four five six seven eight nine ten twelve twenty".split()  # noqa: SIM905
)
# A value that is a clause or a description, not a value: "that ...", "a service that ...".
_NOT_A_VALUE = frozenset(
    """that because when if why how a an very too so really quite still also being going
    to not no never just about like more less getting done""".split()  # noqa: SIM905
)
_PREPOSITIONS = frozenset({"for", "in", "on", "at", "by", "to", "with", "from", "into", "as"})
_VERBISH = re.compile(r"\b(?:is|are|was|were|will|would|should|can|has|have|had)\b", re.I)


def claim_of(text: str, kind: str = "fact") -> Claim | None:
    """The claim ``text`` (a memory of ``kind``) makes about a value of something, or None.

    Only kinds in :data:`SUPERSEDING_KINDS` make claims. Never raises.
    """
    if kind not in SUPERSEDING_KINDS:
        return None
    sentence = _one_sentence(text)
    if sentence is None:
        return None
    for reader in _READERS:
        found = reader(sentence)
        if found is not None:
            return found
    return None


def same_subject(a: Claim, b: Claim) -> bool:
    """Whether two claims are about the same thing (then differing values mean a change)."""
    return a.subject == b.subject


def asks_about(subject: str, asked: frozenset[str] | set[str]) -> bool:
    """Whether a query whose terms are ``asked`` names the thing of ``subject``: every term of
    the thing, and a word of its relation ("who owns payments?" for ``owner:payment``, "what
    version is payments running?" for ``version:payment``). Recall prefers such facts: they
    answer exactly what is asked, where a remark that merely mentions the thing does not."""
    relation, _, thing = subject.partition(":")
    named = thing.split()
    asked = {_SYNONYMS.get(t, t) for t in asked}
    if not named or not asked.issuperset(named):
        return False
    hints = _HINTS.get(relation)
    return hints is None or bool(hints & asked)


# --- reading -------------------------------------------------------------------------------


def _one_sentence(text: str) -> str | None:
    """``text`` as one plain sentence with its lead-in and trailing qualifiers taken off; None
    for a question, several sentences or a long text (too much to read safely)."""
    text = " ".join(text.split()).strip()
    if not text or text.endswith("?") or "\n" in text:
        return None
    text = text.rstrip(".! ")
    # Several sentences: a dot, "!" or "?" followed by a space and a capital or a digit.
    if re.search(r"[.!?;]\s+\S", text):
        return None
    text = _PAREN.sub("", text)
    text = _LEADING.sub("", text)
    previous = None
    while previous != text:
        previous = text
        text = _TRAILING.sub("", text).strip()
    if len(text.split()) > 20 or len(text) < 5:
        return None
    return text


def _owner(sentence: str) -> Claim | None:
    m = _OWNER_PASSIVE.match(_NOW.sub("", sentence))
    if m is not None:
        return _made("owner", m["x"], m["v"], name_value=True)
    m = _OWNER_ACTIVE.match(_NOW.sub("", sentence))
    if m is None:
        return None
    # "Bob took over the on-call for payments": a role, not ownership.
    if _has_attribute(m["x"]) and not _words(m["x"]) & _OWNER_WORDS:
        return _made("is", m["x"], m["v"], name_value=True)
    return _made("owner", m["x"], m["v"], name_value=True)


def _inverted(sentence: str) -> Claim | None:
    """ "Alice is the on-call for payments": the role is the subject, the person the value."""
    m = _INVERTED.match(_NOW.sub("", sentence))
    if m is None or not _has_attribute(m["x"]) or len(m["v"].split()) > 4:
        return None
    if _has_attribute(m["v"]) or m["v"].casefold().startswith(("the ", "our ")):
        return None  # "the on-call for payments is the platform team": the plain reading
    x = re.sub(r"^(?:the|our) (?:new |current )?", "", m["x"], flags=re.I)
    if re.search(r"\b(?:who|that|which|whom)\b", x, re.I):
        return None
    return _made("is", x, m["v"], name_value=True)


def _changed(sentence: str) -> Claim | None:
    sentence = _NOW.sub("", sentence)
    m = _DONE_TO.match(sentence) or _CHANGED.match(sentence)
    if m is None:
        return None
    value = m["v"]
    if _is_version(value):
        return _made("version", m["x"], value)
    if _is_date(value):
        return _made("when", m["x"], value)
    if _is_host(value):
        return _made("where", m["x"], value)
    if re.search(r"\b(?:moved|migrated|repointed|pointed)\b", m[0], re.I):
        # "Alice moved to the infra team", then "Alice moved to Berlin": not one thing.
        return _made("where", m["x"], value, strict=True)
    return _made("is", m["x"], value, generic=True)


def _scheduled(sentence: str) -> Claim | None:
    sentence = _NOW.sub("", sentence)
    for pattern, relation in ((_STARTS, "when"), (_ENDS, "end")):
        m = pattern.match(sentence)
        if m is not None and _is_date(m["v"]):
            return _made(relation, m["x"], m["v"])
    return None


def _placed(sentence: str) -> Claim | None:
    sentence = _NOW.sub("", sentence)
    m = _RUNS_VERSION.match(sentence)
    if m is not None and _is_version(m["v"]):
        return _made("version", m["x"], m["v"])
    m = _PLACED.match(sentence) or _POINTS.match(sentence)
    if m is None:
        return None
    value = m["v"]
    if _is_version(value):
        return _made("version", m["x"], value)
    if _is_date(value):
        return _made("when", m["x"], value)
    if _is_host(value):
        return _made("where", m["x"], value)
    return None  # "Alice is on vacation", "the deploy is in progress": states, not values


def _policy(sentence: str) -> Claim | None:
    sentence = _NOW.sub("", sentence)
    m = _LIMITED.match(sentence)
    if m is not None:
        return _made("limit", m["x"], m["v"], policy=True)
    m = _REQUIRES.match(sentence)
    if m is not None:
        return _made("requires", m["x"], m["v"], policy=True)
    return None


def _copula(sentence: str) -> Claim | None:
    m = _KEY_VALUE.match(sentence)
    if m is not None:
        found = _valued(m["x"], m["v"], key_value=True)
        if found is not None:
            return found
    m = _COPULA.match(_NOW.sub("", sentence))
    return None if m is None else _valued(m["x"], m["v"], key_value=False)


def _valued(x: str, value: str, *, key_value: bool) -> Claim | None:
    """The claim of "X is Y" or "X: Y", its relation read from the kind of value."""
    if _is_version(value):
        return _made("version", x, value)
    if _is_date(value):
        ends = _words(x) & {"end", "ends", "ending", "until"}
        return _made("end" if ends else "when", x, value)
    if _is_host(value) and _words(x) & _RELATION_WORDS["where"]:
        return _made("where", x, value)
    return _made("is", x, value, generic=True, key_value=key_value)


_READERS = (_owner, _inverted, _changed, _scheduled, _policy, _placed, _copula)


# --- building a claim ----------------------------------------------------------------------


def _made(
    relation: str,
    x: str,
    value: str,
    *,
    name_value: bool = False,
    generic: bool = False,
    key_value: bool = False,
    policy: bool = False,
    strict: bool = False,
) -> Claim | None:
    """The claim of ``relation`` between subject phrase ``x`` and ``value``, or None when either
    fails the checks that keep the reading conservative."""
    x, value = x.strip(" ,:-"), value.strip(" ,:-\"'`")
    if not _good_subject(x, strict=(generic and not key_value) or policy or strict):
        return None
    norm = _value(value)
    if norm is None:
        return None
    if name_value and not _looks_like_name(value):
        return None
    if policy and len(value.split()) > 5:
        return None
    if generic and not _concrete(value):
        # "the API is slow", "the on-call is reachable on the pager": a description, which a
        # newer one need not replace.
        return None
    subject_terms = _subject_terms(x)
    if relation in ("is", "where") and subject_terms & _OWNER_WORDS:
        relation = "owner"
    if relation == "owner":
        subject_terms -= _OWNER_WORDS
    subject_terms -= _RELATION_WORDS.get(relation, frozenset())
    subject_terms -= _FILLER
    if not subject_terms:
        return None
    subject = f"{relation}:{' '.join(sorted(subject_terms))}"[:MAX_SUBJECT_CHARS]
    if relation == "version":
        m = _VERSION.match(norm)
        norm = m["n"] if m else norm.removeprefix("v")
    return Claim(subject=subject, value=norm, relation=relation)


def _words(text: str) -> set[str]:
    return set(re.findall(r"[\w-]+", text.casefold()))


def _has_attribute(x: str, words: frozenset[str] = _ATTRIBUTES) -> bool:
    found = _words(x)
    # "on-call" is split by the term reader; look for it whole too.
    return bool(found & words) or ("on" in found and "call" in found and words is _ATTRIBUTES)


def _subject_terms(x: str) -> set[str]:
    x = re.sub(r"'s?\b", "", x)
    return {_SYNONYMS.get(t, t) for t in terms(x) if len(t) > 1 or t.isdigit()}


def _good_subject(x: str, *, strict: bool) -> bool:
    """A phrase that names one thing: no pronoun or bare name, a few words, no verb."""
    words = x.split()
    if not words or len(words) > 8 or _VERBISH.search(x):
        return False
    first = words[0].casefold()
    if first in _PRONOUNS or first in {"there", "it's", "that's", "what's"}:
        return False
    if any(w.casefold() in {"i", "we", "you", "they", "he", "she"} for w in words):
        return False
    if not strict:
        return True
    # A generic "X is Y": a definite or attribute subject, or one of two or more words.
    # A lone capitalised name ("Alice is ...") is about a person's state, not a value.
    definite = first in {"the", "our", "my", "your", "their", "its"} or "'" in words[0]
    return definite or _has_attribute(x) or len(_subject_terms(x)) >= 2


def _value(value: str) -> str | None:
    """``value`` normalised, or None when it reads as a clause or a description."""
    value = value.strip()
    words = value.split()
    if not words or len(words) > 6:
        return None
    lowered = [w.casefold() for w in words]
    if lowered[0] in _NOT_A_VALUE and " ".join(lowered[:2]) not in {"not allowed", "no longer"}:
        return None
    if lowered[0] in _PRONOUNS and lowered[0] not in {"one", "all"}:
        return None
    predicate = lowered[0].endswith(("ed", "ing")) or (
        len(lowered) > 1 and lowered[1] in _PREPOSITIONS
    )
    if words[0].islower() and predicate and lowered[0] not in _POLICY_VALUES:
        # "logs are kept for 90 days", then "logs are kept in S3": a predicate, whose object
        # may be of another thing (how long, where); not a value.
        return None
    if _VERBISH.search(value) or "," in value:
        return None
    norm = " ".join(lowered)
    norm = re.sub(r"^(?:the|our|@)\s*", "", norm)
    return norm.strip(" .\"'`") or None


def _looks_like_name(value: str) -> bool:
    """A person or a team: up to four words, none a pronoun."""
    words = value.split()
    return 0 < len(words) <= 4 and not any(w.casefold() in _PRONOUNS for w in words)


def _is_version(value: str) -> bool:
    v = value.strip()
    return bool(_VERSION_V.match(v) or re.match(r"^(?:version|release) \S+$", v, re.I)) or bool(
        re.match(r"^\d+\.\d+(?:\.\d+)*$", v)
    )


def _is_host(value: str) -> bool:
    return bool(_HOST.match(value.strip()))


def _is_date(value: str) -> bool:
    tokens = re.findall(r"[\w:-]+", value.casefold())
    if not tokens or len(tokens) > 6:
        return False
    anchored = False
    for token in tokens:
        if token in _DATE_WORDS or _TIME.match(token) or re.match(r"^\d{4}$", token):
            anchored = anchored or token in _DATE_WORDS or ":" in token or "-" in token
            anchored = anchored or bool(re.match(r"^\d{1,2}(?:am|pm)$", token))
            continue
        if token in _DATE_FILLER or token.rstrip("s") in _DATE_WORDS:
            continue
        return False
    return anchored


def _concrete(value: str) -> bool:
    """A value that names something: a capitalised name, a number, a version, a host, a date,
    a quoted string or a policy's setting."""
    words = value.split()
    low = value.casefold()
    return (
        any(w[:1].isupper() for w in words if w.casefold() not in {"the", "our"})
        or any(ch.isdigit() for ch in value)
        or bool(words and words[0].casefold() in _NUMBER_WORDS)
        or value[:1] in "\"'`@"
        or low.startswith(("the ", "our "))
        or low in _POLICY_VALUES
        or low.removeprefix("not ") in _POLICY_VALUES
        or _is_host(value)
        or _is_date(value)
    )
