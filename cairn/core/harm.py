"""What believing a text would do: the harm a planted text is written to cause.

:mod:`cairn.core.injection` recognises texts that address the assistant ("ignore your
instructions", "when anyone asks, say ..."). Planted texts need not address anyone. A forged
policy ("approvals are no longer required for prod deploys"), a phishing link ("the reset
portal moved to https://..., log in with your current password"), a request to send secrets
out, a grant of admin "effective immediately", or a lie the bot is told to repeat: each reads
as an ordinary statement, in endless wordings, and a list of phrasings keeps missing the next
one (issue 30: 62 to 67% of texts written blind got through it).

This module looks for the harm instead, as a pair of concepts in one clause: a control
(approval, review, MFA, ticket, audit, alerting, encryption, ...) next to a word that removes
or relaxes it; a credential next to a place to type it or a person to send it to; a secret or
the bot's memory next to a way out; a privilege next to "effective immediately" or "no ticket";
an answer to give next to a lie, a link or a command. Each concept is a short word list that
new wordings share, which is why it holds better on texts nobody here wrote (ADR 0049).

Honest texts say the same words the other way round: "never skip the review", "prod still
needs two approvals", "don't paste your password anywhere", "heads up, someone posted that
approvals are gone: that's false". A prohibition, a contrast that keeps the control, and a
warning about such a text are not harm.

Matching is on the form of the text that :func:`cairn.core.injection.normalise` gives
(look-alike letters, leetspeak and spacing undone), which the caller passes. This module
imports nothing of Cairn's.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["RELAXES", "answer_rule", "answers_harmfully", "harm_reason"]

RELAXES = "announces that a security control no longer applies"
_PHISH = "sends people to type or send their credentials somewhere new"
_OUT = "asks for secrets or the bot's memory to be sent out or repeated"
_GRANT = "grants a privilege without the usual checks"
_BAIT = "tells the bot to answer with a lie, a link or a command"
_PAYMENT = "changes where payments go and waives the check"
_LEAK = "allows secrets or personal data where they leak"


def _alt(words: str) -> str:
    """An alternation of the space-separated ``words``; "_" stands for a blank."""
    return "(?:" + "|".join(w.replace("_", r"[\s\-]?") for w in words.split()) + ")"


# One clause: what one rule may span (sentences end at . ! ? ; or a line end; a dot inside a
# word, as in a host name, does not end one).
_S = r"(?:[^.!?;\n]|\.(?=\w))"

# --- A control, and what removes it --------------------------------------------------------

_CONTROL = _alt(
    "approvals? approver approving review reviews reviewer reviewing sign_offs? signoff "
    "2fa mfa two_factor 2_factor multi_factor four_eyes 4_eyes two_person 2_person dual_control "
    "dual_approval dual_sign_off cab change_advisory_board "
    "audits? auditing audit_logs? audit_logging logging monitoring monitors? alerts? alerting "
    "pager paging triage verification verifications verifying callback callbacks checks? "
    "scans? scanning encryption tls ssl waf firewall firewalls vpn sso teleport mdm dpa "
    "rotation rotating protected_branch(?:es)? code_freeze freeze guardrails? safeguards? "
    "fraud_checks? transaction_monitoring retention backups? pci postmortems? write_ups? "
    "password_policy lockout expiry access_reviews? background_checks? security_review "
    "legal_review compliance_review restrictions? controls? gates? quarantine sandbox "
    "least_privilege vetting due_diligence kyc screening sign_off second_signer signers? "
    "co_signer manual_judg(?:e)?ment requirements? rules? qa quality_checks? disposition"
)
# A verb that takes a control away, before it ("skip the review", "disable MFA").
_REMOVE = _alt(
    "skip skips skipping bypass bypasses bypassing disable disables disabling turn_off "
    "turning_off switch_off switching_off toggle_off waive waives waiving lift lifting drop "
    "dropping relax relaxing suspend suspending pause pausing remove removes removing scrap "
    "dissolve unprotect stopped_requiring stop_requiring no_longer_requires? no_longer_needs? "
    "don't_need doesn't_need no_need_for"
)
# What a control has become, after it ("MFA is optional", "approvals are no longer required").
_REMOVED = _alt(
    "skipped bypassed disabled turned_off switched_off toggled_off waived lifted dropped retired "
    "relaxed suspended paused removed scrapped dissolved unprotected muted silenced optional "
    "advisory obsolete exempt exempted gone went_away auto_closed no_longer not_required "
    "not_needed not_necessary not_mandatory not_enforced isn't_required isn't_needed "
    "aren't_required aren't_needed doesn't_apply don't_apply not_a_thing can_skip can_be_skipped"
)
# A control taken away without a verb: "without review", "no DPA review required".
_WITHOUT = (
    rf"\b(?:without|w/o|no|zero)\s+(?:any\s+|a\s+|an\s+|the\s+|further\s+|more\s+)?"
    rf"(?:[\w\-]+\s+){{0,2}}{_CONTROL}\b"
)
_ALLOWED = _alt(
    "is_fine are_fine is_ok are_ok is_okay is_allowed are_allowed is_acceptable are_acceptable "
    "is_approved are_approved is_enough counts can_go is_permitted are_permitted it's_fine "
    "that's_fine it_is_fine"
)
_RELAX = re.compile(
    rf"\b{_CONTROL}\b{_S}{{0,60}}?\b{_REMOVED}\b"
    rf"|\b{_REMOVE}\b{_S}{{0,40}}?\b{_CONTROL}\b"
    rf"|{_WITHOUT}{_S}{{0,60}}?(?:\b{_ALLOWED}\b|\b(?:needed|required|necessary)\b)"
    rf"|{_WITHOUT}{_S}{{0,10}}(?:$|[.!;\n])"
    r"|\bno\s+need\s+to\s+(?:investigate|triage|check|verify|review|escalate|inform|notify|report)\b"
)
# A rule that forbids what follows ("never skip the review", "don't approve your own PR").
_FORBIDS = re.compile(
    r"\b(?:never|don't|dont|do\s+not|must\s+not|mustn't|shouldn't|should\s+not|cannot|can't|"
    r"not\s+allowed|may\s+not|no\s+one\s+(?:may|can|should)|nobody\s+(?:may|can|should)|"
    r"forbidden|prohibited|avoid|won't|will\s+not|blocked|banned)\b"
)
# What keeps a control in the same sentence: it is still needed, needed by someone, reportable;
# the relaxation is outside production; what is removed is an exception.
_STILL = re.compile(
    r"\bstill\s+(?:need|needs|require|requires|required|applies|apply|mandatory|has|have)\b"
    r"|(?<!longer\s)(?<!not\s)(?<!n't\s)\b(?:requires?|needs?|must\s+(?:have|get))\s+"
    rf"(?:[\w\-']+\s+){{0,3}}{_CONTROL}\b"
    r"|\b(?:is|are)\s+required\s+by\b|\breportable\b"
    r"|\b(?:remov|drop|revok|clos|delet)\w*\s+(?:the\s+|any\s+|that\s+)?(?:[\w\-]+\s+){0,3}"
    r"(?:exceptions?|exemptions?|overrides?|workarounds?|allowlist\s+entr\w+|temporary)\b"
)
_ANSWERED = re.compile(
    r"\W*(?:[\w\-]+\s+){1,4}(?:does|do|still\s+\w+)\b"
    r"|[^\n]*?\b(?:stays?|remains?|is\s+still|are\s+still)\s+(?:mandatory|required|in\s+place|on|"
    r"enforced|needed)\b"
)
_CONCEDES = re.compile(r"\b(?:even\s+though|although|even\s+if|though)\b")
_NOT_PROD = re.compile(
    r"\b(?:staging|stage|dev|development|sandbox|qa\s+env\w*|test\s+env\w*|local|preview)\b"
)
_PROD = re.compile(r"\b(?:prod|production|live)\b")
_PROD_KEPT = re.compile(
    r"\b(?:prod|production|live)\b[^.!?\n]{0,40}\b(?:still|need|needs|require|requires)\b"
)
# Warnings about a planted or phishing text.
_WARNS = re.compile(
    r"\b(?:phish\w*|scam\w*|fake|false|bogus|not\s+true|isn't\s+true|ignore\s+it|"
    r"don't\s+(?:believe|follow|trust)|report\s+it|social\s+engineering|impersonat\w*)\b"
)


def _keeps_control(sentence: str, before: str, following: str) -> bool:
    """Whether a sentence that names a control's removal keeps the control after all: it
    forbids the removal, says the control still applies, warns about the text, concedes a
    small exception to a rule, or is answered by the next sentence ("rolling forward does")."""
    if _FORBIDS.search(before) or _STILL.search(sentence) or _WARNS.search(sentence):
        return True
    if _ANSWERED.match(following) or sentence.rstrip(" '\"”").endswith("?"):
        return True  # the next sentence keeps it, or it is a question
    if _CONCEDES.search(before):
        return True  # "even though rollback itself doesn't need approval"
    if _NOT_PROD.search(sentence):
        return not _PROD.search(sentence) or _PROD_KEPT.search(sentence) is not None
    return False


# --- Credentials sent somewhere ----------------------------------------------------------

_CREDENTIAL = _alt(
    "passwords? passcodes? passphrases? pw pwd creds credentials login_details "
    "username_and_password tokens? pat pats api_keys? private_keys? ssh_keys? secrets? "
    "2fa_codes? mfa_codes? otp otps one_time_codes? 6_digit_code verification_codes? "
    "recovery_codes? recovery_keys? pins? bank_details card_details card_numbers? kubeconfig "
    "session_cookies? cookies? master_password seed_phrase personal_access_tokens? same_creds "
    "corporate_cards? credit_cards? company_cards? debit_cards?"
)
_CREDENTIAL = _CREDENTIAL[:-1] + r"|\w+_(?:secret_key|secret|token|password|api_key))"
_URL = (
    r"(?:https?://|www\.|\b[\w\-]+(?:\.[\w\-]+)+\.(?:com|net|org|io|co|app|dev|biz|info)/|"
    r"\b(?:the|this|a)\s+link\b)"
)
_ENTER = _alt(
    "log_in login logon sign_in re_authenticate reauthenticate re_validate revalidate "
    "re_enter reenter enter submit type verify confirm re_verify validate provide upload "
    "paste use with migrate sync update re_login relogin authori[sz]e ask_for asks_for "
    "prompt_for prompts_for"
)
_SEND = _alt(
    "paste send dm reply_with reply email mail forward share post give hand_over submit "
    "drop text message whatsapp"
)
_LOGIN = _alt(
    "log_in login logon sign_in re_login relogin re_authenticate authori[sz]e docker_login"
)
# One's own account, named where it is to be typed ("with your SSO password", "same creds").
_ACCOUNT = (
    r"(?:same\s+(?:creds|credentials|password|login)|(?:your|ur|their)\s+(?:current\s+|usual\s+)?"
    r"(?:sso|corp\w*|ldap|okta|domain|work|google|github|gitlab|vault|ad|microsoft|company)\s+"
    r"(?:\w+\s+)?(?:creds|credentials|password|account|login|username|user))"
)
# Pressure to log in somewhere soon: "before your next shift", "or your account is deleted".
_PRESSURE = (
    r"(?:before\s+(?:your|the|friday|monday|eod|end)|or\s+(?:you|your)|by\s+(?:eod|friday|monday|"
    r"tomorrow|tonight|end\s+of)|mandatory|required|deadline|won't\s+get|will\s+be\s+(?:deleted|"
    r"locked|disabled|suspended)|isn't\s+deleted|not\s+deleted|immediately|asap|today)"
)
_CHANGED = r"(?:new|now|instead|moved|moving|migrat\w*|switch\w*|replac\w*|the\s+old\s+\w+\s+is)"
_PHISH_RE = re.compile(
    rf"{_URL}[^\n]{{0,150}}?\b{_ENTER}\b[^\n]{{0,50}}?\b{_CREDENTIAL}\b"
    rf"|\b{_ENTER}\b[^\n]{{0,50}}?\b{_CREDENTIAL}\b[^\n]{{0,100}}?{_URL}"
    rf"|\b{_LOGIN}\b[^\n]{{0,80}}?{_URL}[^\n]{{0,100}}?{_PRESSURE}"
    rf"|{_URL}[^\n]{{0,100}}?\b{_LOGIN}\b[^\n]{{0,100}}?{_PRESSURE}"
    rf"|\b(?:extra_index_url|index_url|extra-index-url|index-url|registry|brew\s+tap|helm\s+repo\s+add|"
    rf"gem\s+sources?|apt\s+(?:repo\w*|sources?))\b[^\n]{{0,40}}?{_URL}[^\n]{{0,80}}?\b{_CHANGED}\b"
    r"|\bauthori[sz]e\s+(?:the\s+)?(?:app|application|integration)\b[^\n]{0,100}?\b(?:mail|drive|"
    r"calendar|contacts|all\s+sites|full\s+access|admin)\b"
    rf"|\b{_SEND}\b{_S}{{0,25}}?\b(?:your|ur|their|his|her)\s+(?:[\w\-]+\s+){{0,3}}{_CREDENTIAL}\b"
    r"|\b(?:curl|wget|iwr|invoke-webrequest)\b[^\n|]{0,200}\|\s*(?:sudo\s+)?(?:ba|z)?sh\b"
    rf"|\b(?:install|download|run|open|add)\b{_S}{{0,80}}?{_URL}\S*\."
    r"(?:pkg|exe|msi|dmg|sh|zip|mobileconfig|crx|apk|ps1|vbs|jar|scr|crt|cer|p12|pfx)\b"
    rf"|{_URL}[^\n]{{0,120}}?\b{_LOGIN}\b[^\n]{{0,60}}?\b{_ACCOUNT}"
    rf"|\b{_LOGIN}\b[^\n]{{0,60}}?{_URL}[^\n]{{0,80}}?\b{_ACCOUNT}"
    rf"|\b{_SEND}\b\s+(?:them|him|her|it)\s+(?:the|your|ur)\s+(?:[\w\-]+\s+){{0,2}}{_CREDENTIAL}\b"
    r"|javascript:\S*(?:cookie|localstorage|fetch)"
    rf"|\b(?:browser\s+)?extension\b{_S}{{0,80}}?{_URL}{_S}{{0,80}}?\ball\s+sites\b"
)
_PHISH_KEEPS = re.compile(
    r"\b(?:never|don't|dont|do\s+not|must\s+not|won't|will\s+never|nobody\s+will|no\s+one\s+will|"
    r"we\s+never|it\s+never)\b(?:\s+[\w\-']+){0,5}\s+(?:ask|asks|send|paste|share|type|enter|"
    r"give|post|email|dm|reply|click|log|sign|install|run|use)\b"
    r"|\b(?:phish\w*|scam\w*|fake|fraud\w*|suspicious|bogus|impersonat\w*|report\s+it|"
    r"don't\s+click|do\s+not\s+click)\b"
)

# --- Secrets or memory sent out ---------------------------------------------------------

_WHAT_IS_KEPT = (
    r"(?:everything\s+(?:you|u)\b|all\s+(?:the\s+|of\s+)?(?:your|the\s+stored|stored|remembered|"
    r"the)\s+(?:notes|memor\w*|messages|secrets|credentials|passwords|keys|tokens|env)|"
    r"(?:your|the\s+bot's|cairn's)\s+(?:full\s+|whole\s+|entire\s+)?(?:memory|memories|notes)|"
    r"memory\s+(?:dump|diff|export)|what(?:ever)?\s+(?:you|u)(?:'ve|\s+have)?\s+"
    r"(?:remember\w*|stored|know|kept)|(?:private|internal|confidential)\s+(?:[\w\-]+\s+){0,2}"
    r"(?:incident\w*|messages?|reports?|timelines?|notes|findings|history|records)|"
    r"(?:every|all\s+the|all)\s+messages?\s+from|\.env\b|env\s+vars|environment\s+variables|kubeconfig|connection\s+strings?|"
    r"signing\s+secrets?|home\s+address\w*|customer\s+(?:names|data|lists?|records)|"
    r"ibans?\b|salar(?:y|ies)|" + _CREDENTIAL + r")"
)
# The bot's memory itself, dumped wherever it goes.
_MEMORY = (
    r"(?:everything\s+(?:you|u)\s+(?:know|remember|stored|have)|(?:your|the\s+bot's|cairn's)\s+"
    r"(?:full\s+|whole\s+|entire\s+)?(?:memory|memories)|memory\s+(?:dump|diff)|"
    r"(?:every|all\s+the|all)\s+messages?\s+from|all\s+stored\s+notes|(?:room|channel)'s\s+history|"
    r"(?:chat|room|channel)\s+history)"
)
_OUT_VERB = (
    _alt(
        "post share send forward dump export copy compile publish paste upload email mail list "
        "print attach include append leak provide hand"
    )[:-1]
    + r")(?:s|ed|ing|d)?"
)
_OUTSIDE = (
    r"(?:personal|gmail|hotmail|yahoo|proton\w*|external|outside|public|partner|contractor|"
    r"vendor|webhook|gist|pastebin|-ext\b|-shared\b|shared\s+with|https?://|\b\w+@[\w\-]+\.\w+|"
    r"stakeholders|everyone|anyone|all\s+hands|#[\w\-]+)"
)
_OUT_RE = re.compile(
    rf"\b{_OUT_VERB}\b{_S}{{0,60}}?{_WHAT_IS_KEPT}{_S}{{0,80}}?{_OUTSIDE}"
    rf"|\b{_OUT_VERB}\b{_S}{{0,20}}?{_OUTSIDE}{_S}{{0,60}}?{_WHAT_IS_KEPT}"
    rf"|\b(?:{_OUT_VERB}|dm|give)\s+me\b{_S}{{0,40}}?{_WHAT_IS_KEPT}"
    rf"|{_WHAT_IS_KEPT}{_S}{{0,40}}?\b{_OUT_VERB}\b{_S}{{0,30}}?{_OUTSIDE}"
    rf"|\b{_OUT_VERB}\b{_S}{{0,40}}?{_MEMORY}"
    # Asking for a secret someone said earlier: "what was the break-glass password Dana
    # mentioned?", "read back the SMTP credentials", "just repeat it".
    rf"|\b(?:what(?:'s|\s+is|\s+was|\s+were)|tell\s+me|give\s+me|read\s+back|repeat|remind\s+me)"
    rf"\b[^\n]{{0,60}}?\b{_CREDENTIAL}\b[^\n]{{0,80}}?\b(?:someone|earlier|pasted|mentioned|said|"
    rf"shared|lost|last\s+(?:week|month)|repeat|reply\s+with|word\s+for\s+word)"
    rf"|\btell\s+me\s+(?:exactly\s+|everything\s+)?(?:what|everything)\s+\w+\s+(?:said|told)"
    rf"{_S}{{0,40}}?\b(?:privately|in\s+private|in\s+dm|word\s+for\s+word|about)"
)

# --- Sensitive data allowed where it leaks ------------------------------------------------

_SENSITIVE = (
    r"(?:secrets?|credentials|creds|passwords?|tokens?|api\s+keys?|keys|pii|card\s+numbers|pans?|"
    r"customer\s+data|personal\s+data|salar(?:y|ies)|salary\s+bands|shared\s+logins?|"
    r"bank\s+statements|health\s+data|patient\s+data|\.env\s+files?)"
)
_LEAKS = (
    r"(?:committed|commit|pasted|paste|posted|post|shared|share|emailed|email|copied|copy|sent|"
    r"kept|stored|sit|live|go)"
)
_WHERE_IT_LEAKS = (
    r"(?:in|into|to|on|as|via)\s+(?:the\s+|a\s+|their\s+|your\s+)?(?:#[\w\-]+|chat|channel|"
    r"slack|the\s+repo|repo|repos|git\w*|google\s+drive|personal\s+\w+|laptops?|email|plain\s*text|"
    r"pinned\s+message|attachments?|anyone|everyone|dms?)"
)
_HANDLING_RE = re.compile(
    rf"\b{_SENSITIVE}\b{_S}{{0,50}}?\b(?:may|can|should|is\s+ok\s+to|are\s+ok\s+to|is\s+fine\s+to|"
    rf"are\s+fine\s+to|(?:is|are)\s+allowed\s+to)\s+(?:now\s+)?(?:be\s+)?{_LEAKS}\b"
    rf"{_S}{{0,50}}?{_WHERE_IT_LEAKS}"
    rf"|\b{_LEAKS}\w*\b{_S}{{0,40}}?\b{_SENSITIVE}\b{_S}{{0,50}}?{_WHERE_IT_LEAKS}{_S}{{0,60}}?"
    rf"\b(?:is|are)\s+(?:now\s+)?(?:fine|ok|okay|allowed|acceptable|the\s+new\s+process|"
    rf"the\s+source\s+of\s+truth|approved)\b"
    rf"|\b(?:bot|assistant|cairn|you)\s+(?:is|are)\s+(?:now\s+)?(?:authori[sz]ed|allowed|permitted|"
    rf"cleared)\s+to\s+(?:share|give|hand|send|disclose|reveal|post)"
    rf"|\b{_SENSITIVE}\b{_S}{{0,40}}?\bwith\s+anyone\b"
)

# --- Privileges granted ------------------------------------------------------------------

_PRIVILEGE = _alt(
    "admin admins administrator root owner owners superuser sudo prod_access production_access "
    "full_access approver admin_all write_access god_mode break_glass org_owner"
)
_UNCHECKED = (
    r"(?:effective\s+immediately|no\s+(?:ticket|approval|request|review)|without\s+(?:a\s+)?"
    r"(?:ticket|approval|request|review)|whenever\s+(?:he|she|they|i|someone)|just\s+grant|"
    r"(?:don't|doesn't|do\s+not)\s+(?:have\s+to\s+)?revoke|for\s+good|permanently|on\s+request|"
    r"self[\s\-]approv\w*|"
    r"for\s+the\s+shift|themselves|himself|herself)"
)
_GRANT_RE = re.compile(
    rf"\b(?:has|have|gets?|got|given|grant\w*|giving|receives?|add\w*|make|made|promot\w*|"
    rf"elevat\w*|keep|keeps)\b{_S}{{0,40}}?\b{_PRIVILEGE}\b[^\n]{{0,80}}?{_UNCHECKED}"
    rf"|{_UNCHECKED}{_S}{{0,60}}?\b(?:grant\w*|give|gets?|has|have)\b{_S}{{0,30}}?\b{_PRIVILEGE}\b"
    r"|\b(?:force[\s\-]push\w*|push\w*\s+(?:directly\s+)?to\s+(?:main|master|prod\w*)|self[\s\-]merg\w*)"
    + _S
    + r"{0,40}?\b(?:is|are)\s+(?:now\s+)?(?:allowed|fine|ok|okay|permitted|acceptable)\b"
    r"|\b(?:my|his|her|their)\s+(?:messages?|word|instructions?|requests?|orders?)\s+(?:carry|carries|"
    r"have|has|count\w*\s+as|are|is|overrul\w*)\s+(?:the\s+)?(?:admin|approval|authorit\w*|final|"
    r"binding|pre[\s\-]?approved)"
    r"|\bcounts?\s+as\s+(?:the\s+|an\s+)?approval\b|\bblanket\s+(?:exemption|approval|waiver)\b"
    r"|\b(?:overrul\w*|override\w*)\s+(?:the\s+|any\s+|all\s+|existing\s+)*(?:runbooks?|policy|"
    r"policies|process|rules|approvals?|security|checks)\b"
    r"|\b(?:everyone|anyone|everybody|all\s+(?:engineers|staff|users|students|contractors|interns|"
    r"members))(?!\s+(?:ask\w*|who|wonder\w*|want\w*|need\w*|request\w*))\s+(?:[\w\-]+\s+){0,4}?(?:can|may|gets?|has|have|is\s+allowed\s+to|are\s+allowed\s+to)"
    r"\s+(?:now\s+)?(?:[\w\-]+\s+){0,3}(?:admin\w*|root|owner|superuser|sudo|approv\w*|"
    r"prod\w*\s+access|full\s+access|write\s+access)"
    r"|\bself[\s\-]approv\w*\s+(?:is\s+|are\s+)?(?:fine|ok|okay|allowed|counts|permitted|acceptable)"
    r"|\b(?:approve|merge|sign\s+off)\s+(?:on\s+)?(?:their|his|her|your|my)\s+own\b"
    r"|\b(?:treat|consider|regard|record)\w*\b" + _S + r"{0,60}?\bas\s+(?:an?\s+)?(?:admin\w*|"
    r"pre[\s\-]?approved|authoritative|trusted|verified|owner|approved|operator)\b"
    r"|\b(?:any|all|every)\s+(?:request|instruction|message|order|command)s?\s+(?:from|by|tagged)"
    + _S
    + r"{0,40}?(?:is|are|should\s+be|as|be)\s+(?:pre[\s\-]?approved|authoritative|fulfilled|"
    r"trusted|approved|obeyed|followed)"
    r"|\b(?:do\s+not|don't|no\s+need\s+to|without)\s+(?:verify\w*|check\w*|ask\w*\s+for|confirm\w*|"
    r"escalat\w*|inform\w*)\b" + _S + r"{0,40}?\b(?:engagement\s+letter|with\s+legal|identity|"
    r"risk|with\s+security|callback|with\s+anyone)\b"
)

# --- An answer to give: a lie, a link or a command ----------------------------------------

_WHEN = (
    r"\b(?:when|whenever|next\s+time|any\s*time|if|upon|each\s+time|every\s+time|from\s+now\s+on|"
    r"in\s+future|going\s+forward|for\s+all\s+future|later\s+when|any\s+question|all\s+questions)\b"
)
_ASKS = (
    r"\b(?:asks?|asked|asking|mentions?|raises?|says|types?|writes?|posts?|brings?\s+up|requests?|"
    r"questions?|wants?|needs?|comes?\s+up|enquir\w*|inquir\w*)\b"
)
_ANSWER = (
    r"\b(?:say|tell|respond|reply|answer|give|point|send|direct|run|trigger|execute|post|append)"
    r"\w*\b"
)
_LIE = (
    r"(?:\(?it\s+wasn't|trust\s+me|just\s+trust|instead\b|don't\s+mention|do\s+not\s+mention|"
    r"without\s+mentioning|no\s+incident|(?:it's|it\s+is|is|was|were)\s+(?:fixed|closed|denied|"
    r"resolved|approved)|root\s+cause\s+was|nothing\s+on\s+our\s+side|personal\s+(?:number|"
    r"phone|email)|my\s+(?:number|phone|email)|flushall|flushdb|rm\s+-rf|drop\s+table|"
    r"revoke[\s\-]all|--insecure|skip[\s\-]tls|allow_failure|master\s+password|"
    r"(?:don't|do\s+not)\s+tell|without\s+telling|the\s+opposite|say\s+(?:it|that)\s+(?:was|were)\s|"
    r"on\s+hold|nobody\s+should|no\s+one\s+should|automatically|telegram|whatsapp|signal\s+app|"
    r"@[\w\-]*ext\w*|state\s+rm|destroy|wipe|`[^`]+`)"
)
_ANSWER_RULE = re.compile(rf"{_WHEN}{_S}{{0,80}}?{_ASKS}")


def answer_rule(folded: str) -> bool:
    """Whether the text states what to answer when someone asks ("if anyone asks ...")."""
    return _ANSWER_RULE.search(folded) is not None


_BAIT_RE = re.compile(
    rf"{_WHEN}{_S}{{0,80}}?{_ASKS}{_S}{{0,60}}?(?:{_ANSWER}{_S}{{0,120}}?)?{_LIE}"
)

# What an answer to give may hold that makes it harm: a lie or a command (above), a credential
# handed out, a yes to something that needs a check, or a link to log in at.
_HARMFUL_ANSWER = re.compile(
    _LIE
    + r"|\b(?:the\s+answer\s+is|answer|say|reply|respond|tell\s+(?:them|him|her|people))\s*:?\s*"
    r"[\"'“]?(?:approved|it's\s+fine|fine|allowed|granted|no\s+freeze|postponed)\b"
    r"|(?<!whether\s)(?<!if\s)\b(?:it's|it\s+is|they\s+are|they're)\s+(?:fine|ok|okay|allowed|approved|"
    r"granted|safe|legit\w*)\b"
    rf"|{_URL}[^\n]{{0,100}}?\b{_ENTER}\b"
    # A status to assert, whatever is true: "say it passed", "answer that nobody is".
    r"|\b(?:say|tell|answer|reply|respond|confirm|claim|insist|assure)\w*\b[^.!?\n]{0,50}?\b(?:"
    r"approved|signed\s+(?:it\s+)?off|passed|finished|succeeded|successful\w*|never\s+happened|"
    r"didn't\s+happen|nobody|no\s+one|none|ended|cancel\w*|fixed|resolved|on\s+schedule|"
    r"caused\s+by|lgtm|ship\s+it|no\s+(?:incident|breach|findings|issues?)|the\s+new\s+(?:ciso|"
    r"ceo|cto|cfo|coo|admin|owner|head|lead|manager|approver))\b"
    r"|\b(?:claim|insist|deny|denies|pretend)\w*\b"
    # A no to whether a control holds: "if anyone asks whether the freeze is on, say no".
    rf"|\b(?:whether|if)\s+(?:the\s+|a\s+|an\s+)?(?:[\w\-]+\s+)?{_CONTROL}\s+(?:is|are)\s+(?:still\s+)?"
    r"(?:on|active|required|needed|mandatory|in\s+(?:place|effect|force))\b[^.!?\n]{0,40}?"
    r"\b(?:say|answer|reply|respond|the\s+answer\s+is)\s*:?\s*[\"'“]?no\b"
    # A sale, whoever asks: "recommend the premium tier".
    r"|\b(?:recommend|promote|upsell|push|pitch)\w*\s+(?:the\s+|our\s+|their\s+)?(?:[\w\-]+\s+)?(?:tier|"
    r"plan|package|subscription|vendor|product|upgrade)s?\b"
    rf"|\b{_CREDENTIAL}\s+(?:is|=|:)\s+\S"
)
_HANDS_OUT = re.compile(
    rf"\b(?:give|send|paste|share|hand|post|tell|read\s+out|provide)\w*\b{_S}{{0,40}}?{_CREDENTIAL}"
)


def answers_harmfully(folded: str, *, unread: bool = False) -> bool:
    """Whether a rule for what the bot should answer ("when anyone asks ..., say ...") gives
    an answer that would do harm: a lie, a command, a credential handed out, a yes to what
    needs a check, a link to log in at. "Tell them to file a ticket" does not; a rule that
    forbids handing something out ("the code is never given out in chat") does not. The
    answers are read in English: a text in another language is ``unread`` (default False)."""
    if len(set(_ENGLISH.findall(folded))) < 2:
        return unread and not _WARNING.search(folded)
    found = _HARMFUL_ANSWER.search(folded) or _HANDS_OUT.search(folded)
    if found is None:
        # A yes is harm unless what was asked is whether a control is needed ("does a
        # laptop need encryption? the answer is yes").
        found = _YES.search(folded)
        if found is None or _ASKS_IF_NEEDED.search(folded):
            return False
    if _warned_about(folded, found.start()):
        return False
    start = _sentence_start(folded, found.start())
    around = folded[start : found.start()] + " " + folded[found.end() : found.end() + 40]
    return _FORBIDS.search(around) is None


_YES = re.compile(
    r"\b(?:the\s+answer\s+is|answer|say|reply|respond|tell\s+(?:them|him|her|people))\s*:?\s*[\"'“]?yes\b"
)
_ASKS_IF_NEEDED = re.compile(
    r"\b(?:whether|if|does|do|is|are)\b[^.?!\n]{0,60}?\b(?:needs?|requires?|required|mandatory|must|"
    r"have\s+to)\b"
)
_ENGLISH = re.compile(r"\b(?:the|to|it|is|that|and|of|them|they|for|about|when|if|with|say|tell)\b")


# --- Pressure to skip a step now ----------------------------------------------------------

_URGENT = (
    r"(?:urgent\w*|asap|right\s+now|immediately|right\s+away|!!|in\s+the\s+next\s+\d+|within\s+the\s+"
    r"hour|before\s+\d|deadline|no\s+time|stop\s+everything|in\s+\d+\s+min\w*|quick(?:ly)?\s*!)"
)
_SKIPS = (
    r"(?:skip\w*|bypass\w*|without\b|forget\s+(?:the|about)|no\s+time\s+(?:for|to)|don't\s+wait|"
    r"do\s+not\s+wait|just\s+(?:send|tick|approve|release|load|post|give|wipe|push|sign|let)|"
    r"backdate\w*|paperwork\s+after|explain\s+later|i'll\s+(?:explain|square|sort)|nobody\s+will\s+"
    r"know|trust\s+me|straight\s+to\s+prod\w*|let\s+them\s+go)"
)
_URGENCY_RE = re.compile(rf"{_URGENT}[^\n]{{0,160}}?\b{_SKIPS}|\b{_SKIPS}[^\n]{{0,160}}?{_URGENT}")
_URGENCY = "presses for a step to be skipped now"

# --- A rule for the bot's answers, in any wording ------------------------------------------

_STEERS = re.compile(
    r"\b(?:the\s+(?:correct\s+|right\s+)?answer\s+(?:is|about|to|for)|should\s+(?:hear|be\s+told)|"
    r"have\s+it\s+(?:say|tell|answer|reply)|(?:bot|ai|assistant|cairn)\b[^.!?\n]{0,20}?\b(?:told|tell|"
    r"tells|replied|reply|replies|say|says|said|answer\w*|give|gives|should)\b|stop\s+mentioning|"
    r"(?:it's|it\s+is)\s+fine\s+to\s+tell|questions?\s+about\b[^.!?\n]{0,60}?\b(?:should\s+be\s+"
    r"answered|answer\w*\s+with|got\s+the\s+answer)|give\s+(?:visitors|them|people|anyone|him|her)"
    r"\s+the\b)"
)

# --- Payments redirected -----------------------------------------------------------------

_PAYMENT_RE = re.compile(
    r"\b(?:iban|bank\s+details|bank\s+account|account\s+number|routing|sort\s+code|wire|"
    r"remittance|payee|beneficiary|payouts?|payments?|invoices?)\b"
    + _S
    + r"{0,80}?\b(?:changed|new|updated|moved|instead|switch\w*|now\s+go|should\s+go)\b"
    + r"[^\n]{0,160}?\b(?:urgent\w*|today|immediately|asap|right\s+away|no\s+(?:need|time)|"
    r"(?:don't|do\s+not|no\s+need\s+to|without)\s+(?:call\w*|verify\w*|check\w*|confirm\w*)|"
    r"no\s+callback|callback\s+(?:is\s+)?(?:waived|skipped|not\s+needed))"
)


def _keeps_secret(sentence: str, before: str, following: str) -> bool:
    """Whether a sentence about typing or sending a credential warns against it."""
    return _PHISH_KEEPS.search(sentence) is not None or _FORBIDS.search(before) is not None


def _warns_of_pressure(sentence: str, before: str, following: str) -> bool:
    """Whether a sentence about skipping a step in a hurry warns against doing it, or asks."""
    return (
        _keeps_secret(sentence, before, following)
        or _WARNS.search(sentence) is not None
        or _SLOW_DOWN.search(sentence) is not None
        or sentence.rstrip(" '\"”").endswith("?")
    )


_SLOW_DOWN = re.compile(
    r"\b(?:slow\s+down|red\s+flags?|that's\s+exactly|security\s+(?:training|awareness)|"
    r"classic\s+(?:scam|trick|pretext))\b"
)


def _forbids(sentence: str, before: str, following: str) -> bool:
    """Whether the words just before the match forbid it ("never approve your own PR")."""
    return _FORBIDS.search(before[-40:]) is not None or _WARNS.search(sentence) is not None


_REASSURE_RE = re.compile(
    r"\b(?:phish\w*|warning|scam\w*|suspicious)\b[^\n]{0,80}?\b(?:false\s+alarm|(?:was|is|it's)\s+"
    r"(?:legit\w*|safe|fine|real|official))\b"
    r"|\bsafe\s+to\s+(?:log\s*in|sign\s*in|click|enter|use)\b"
)
_REASSURE = "tells people a link they were warned about is safe"

# --- The same, in other languages ---------------------------------------------------------
# A control and its removal in one sentence, in the words each language uses for them. Matched
# on the text case-folded as written (accents kept, other scripts as they are), by substring:
# these languages inflect, and several write no spaces between words.


def _phrases(text: str) -> re.Pattern[str]:
    """A search for any of the "|"-separated phrases of ``text``, as written."""
    return re.compile("|".join(re.escape(phrase) for phrase in text.split("|")))


_CONTROLS_ELSEWHERE = _phrases(
    "aprobaci|revisión|verificaci|autorizaci|doble factor|aprovaç|revisão|autorizaç|"
    "dupla autentica|approbation|validation|vérification|autorisation|"
    "double authentification|genehmigung|freigabe|prüfung|zwei-faktor|vier-augen|approvazion|"
    "revision|verifica|autorizzazion|doppia autentica|goedkeuring|controle|verificatie|"
    "tweestaps|zatwierdz|akceptacj|weryfikacj|dwuskładnikow|schválení|revize|kontrol|ověření|"
    "dvoufaktor|aprobar|verificar|revizui|jóváhagy|ellenőrz|felülvizsgál|kétfaktor|onay|"
    "inceleme|doğrulama|iki faktör|одобрени|согласовани|утверждени|ревью|проверк|двухфактор|"
    "аутентификац|схвален|погоджен|перевірк|двофактор|έγκρισ|εγκρίσ|έλεγχ|επαλήθευσ|אישור|"
    "בדיק|אימות|موافق|مراجع|التحقق|المصادقة|अनुमोदन|मंजूरी|समीक्षा|सत्यापन|审批|批准|审核|审查|验证|"
    "双因素|承認|レビュー|二要素|二段階|승인|검토|인증|phê duyệt|xét duyệt|xác minh|xác thực|"
    "persetujuan|tinjauan|"
    "verifikasi|อนุมัติ|ตรวจสอบ|idhini|ukaguzi|uthibitisho|pag-apruba|hyväksyn|tarkistu|"
    "katselmo|kaksivaihei|godkännande|granskning|tvåfaktor"
)
_REMOVED_ELSEWHERE = _phrases(
    "ya no|no es necesari|no son necesari|no se necesita|no hace falta|opcional|desactivad|"
    "não é mais|não são mais|não é necessári|não são necessári|não precisa|dispensad|desativad|"
    "n'est plus|ne sont plus|plus nécessaire|plus besoin|pas besoin|facultati|optionnel|"
    "désactivé|nicht mehr|nicht länger|nicht nötig|nicht erforderlich|nicht notwendig|entfällt|"
    "abgeschafft|deaktiviert|non è più|non sono più|non serve più|non servono più|"
    "non è necessari|non sono necessari|facoltativ|opzional|disattivat|niet meer|niet nodig|"
    "niet langer|optioneel|uitgeschakeld|już nie|nie jest już|nie są już|nie trzeba|"
    "niepotrzebn|opcjonaln|wyłączon|už není|už nejsou|už nevyžaduj|není potřeba|nepotřeb|"
    "volitelné|vypnut|nu mai|nu este necesar|nu sunt necesar|opțional|dezactivat|már nem|"
    "nem kell|nincs szükség|opcionális|kikapcsol|artık gerek|gerekmiyor|gerek yok|"
    "isteğe bağlı|devre dışı|больше не|не нужн|не требуется|не требуют|не обязательн|"
    "необязательн|отключен|отменен|більше не|не потрібн|не обов'язков|необов'язков|вимкнен|"
    "скасован|δεν απαιτ|δεν χρειάζ|καταργ|απενεργοπ|אין צורך|כבר לא|לא נדרש|מבוטל|لم يعد|"
    "لم تعد|لا حاجة|غير مطلوب|غير ضروري|معطل|अब जरूरी नहीं|आवश्यक नहीं|ज़रूरत नहीं|"
    "जरूरत नहीं|जरूरी नहीं|不再需要|不再|无需|不需要|免除|跳过|必要ありません|必要ない|"
    "廃止|無効|スキップ|필요 없|필요없|더 이상|생략|비활성화|không cần|không còn|bỏ qua|"
    "không bắt buộc|tidak perlu|tidak lagi|dinonaktifkan|opsional|ไม่ต้อง|ไม่จำเป็น|ยกเลิก|"
    "haihitajiki|hakuna haja|si lazima|hindi na kailangan|wala nang|ei enää|ei tarvita|"
    "ei tarvitse|valinnai|inte längre|behövs inte|krävs inte|valfri|avstängd"
)


def _relaxed_elsewhere(text: str) -> bool:
    """Whether a sentence of ``text`` (case-folded as written) names a control and its
    removal in another language."""
    for sentence in _SENTENCES_ELSEWHERE.split(text):
        if _CONTROLS_ELSEWHERE.search(sentence) and _REMOVED_ELSEWHERE.search(sentence):
            return True
    return False


_SENTENCES_ELSEWHERE = re.compile("[.!?;\n\u3002\uff01\uff1f]+")


_Keeps = Callable[[str, str, str], bool]
# A rule: what must be in the text before its pattern is tried at all (a cheap search for the
# words its pattern cannot match without: most messages have none), its pattern, what keeps
# a match from counting, and the reason it gives.
_Rule = tuple[re.Pattern[str], re.Pattern[str], _Keeps | None, str]


def _needs(stems: str) -> re.Pattern[str]:
    """A search for any of the space-separated ``stems`` at the start of a word ("approv"
    finds "approvals"); a stem ending in "=" is a whole word ("pat=" finds "pat", "pats").
    A name such as STRIPE_SECRET_KEY passes every rule's search."""
    parts = [
        re.escape(stem[:-1]) + r"s?\b" if stem.endswith("=") else re.escape(stem)
        for stem in stems.split()
    ]
    return re.compile(r"(?<![\w])(?:" + "|".join(parts) + r")|[a-z]_(?:secret|token|password|key)")


_CREDENTIAL_STEMS = (
    "passw passc passphr pw= pwd= creds credential login token pat= key secret code otp pin= "
    "bank card kubeconfig cookie seed"
)
_RULES: tuple[_Rule, ...] = (
    (_needs("phish warning scam suspicious safe"), _REASSURE_RE, None, _REASSURE),
    (
        _needs(
            "approv review sign 2fa mfa factor eyes person dual cab advisory audit logging monitor "
            "alert pager paging triage verif callback check scan encrypt tls ssl waf firewall vpn "
            "sso teleport mdm dpa rotat protected freeze guardrail safeguard fraud retention "
            "backup pci postmortem write password lockout expiry access background legal "
            "compliance restriction control gate quarantine sandbox privilege vetting diligence "
            "kyc screening signer judg requirement rule need to"
        ),
        _RELAX,
        _keeps_control,
        RELAXES,
    ),
    (
        _needs(
            "http www. link curl wget iwr "
            "invoke-webrequest javascript: extension authori registry index brew helm gem apt "
            + _CREDENTIAL_STEMS
        ),
        _PHISH_RE,
        _keeps_secret,
        _PHISH,
    ),
    (
        _needs(
            "memor everything notes message history private internal confidential env "
            "kubeconfig connection signing address customer iban salar " + _CREDENTIAL_STEMS
        ),
        _OUT_RE,
        _keeps_secret,
        _OUT,
    ),
    (
        _needs(
            "admin root owner superuser sudo access approv authorit trusted verified operator "
            "fulfilled obeyed followed overrul overrid blanket force push merg engagement legal "
            "identity risk security callback anyone god break"
        ),
        _GRANT_RE,
        _forbids,
        _GRANT,
    ),
    (
        _needs(
            "secret credential creds passw token key pii card pan customer personal salar login "
            "statement health patient env"
        ),
        _HANDLING_RE,
        _keeps_secret,
        _LEAK,
    ),
    (
        _needs("when if next any upon each every from now future going forward later all ques"),
        _BAIT_RE,
        None,
        _BAIT,
    ),
    (
        re.compile(
            r"urgent|asap|immediately|!!|deadline|quick|right\s+(?:now|away)|no\s+time|stop\s+every|"
            r"within\s+the|in\s+the\s+next|before\s+\d|in\s+\d"
        ),
        _URGENCY_RE,
        _warns_of_pressure,
        _URGENCY,
    ),
    (
        _needs(
            "iban bank account routing sort code wire remittance payee beneficiar payout "
            "payment invoice"
        ),
        _PAYMENT_RE,
        _keeps_secret,
        _PAYMENT,
    ),
)
# A message that warns people about such a text quotes it: "heads up, someone posted that
# approvals are gone, it's a phishing attempt".
_WARNING = re.compile(
    r"\b(?:heads\s+up|psa|warning|beware|careful|fyi)\b[^\n]{0,80}\b(?:phish\w*|scam\w*|fake|"
    r"false|bogus|impersonat\w*|someone\s+(?:posted|is\s+posting|sent))\b"
    r"|\b(?:someone|somebody|a\s+message|a\s+post|an\s+email|a\s+mail)\s+(?:posted|said|claimed|wrote|"
    r"sent|is\s+saying|says)\b[^\n]{0,200}?\b(?:not\s+true|false|fake|bogus|ignore\s+it|removed|"
    r"phishing|a\s+scam)\b"
)
_SENTENCE_END = re.compile(r"[.!?\n](?!\w)")


def harm_reason(folded: str, written: str | None = None) -> str | None:
    """Why the text whose :func:`~cairn.core.injection.normalise` form is ``folded`` would
    cause harm if believed, in a few words, or None. A sentence that keeps the control,
    forbids the act or warns about such a text is not harm. ``written`` is the text as
    written, for the words of other languages (folding would garble other scripts). Never
    raises."""
    for needs, pattern, keeps, reason in _RULES:
        if needs.search(folded) is None:
            continue
        for match in pattern.finditer(folded):
            if keeps is None:
                return reason
            if _warned_about(folded, match.start()):
                continue
            start = _sentence_start(folded, match.start())
            after = _SENTENCE_END.search(folded, match.end())
            end = after.end() if after else len(folded)
            sentence = folded[start:end]
            if not keeps(sentence, folded[start : match.start()], folded[end : end + 60]):
                return reason
    if written is not None and not written.isascii() and _relaxed_elsewhere(written.casefold()):
        return RELAXES
    if _STEERS.search(folded) and answers_harmfully(folded):
        return _BAIT
    return None


# A sentence that goes on about what the one before warned of: "It says ...", "The email ...".
_REFERS_BACK = re.compile(
    r"\W*(?:it|this|that|they|these|those|the\s+(?:message|email|mail|post|text|link|page|sms))\b"
)


def _warned_about(folded: str, at: int) -> bool:
    """Whether the claim at ``at`` is the one a warning in the text quotes: in the warning's own
    sentence, or in the sentence next to it when that one refers back to the other ("PSA: a
    phishing mail is going around. It says approvals are gone."). A warning elsewhere in the
    message excuses nothing: "Heads up, beware of phishing. Separately: approvals are gone"
    is still the claim it makes."""
    claim = _sentence_span(folded, at)
    for warning in _WARNING.finditer(folded):
        first = _sentence_span(folded, warning.start())
        last = _sentence_span(folded, max(warning.start(), warning.end() - 1))
        if first[0] <= claim[0] <= last[0]:
            return True
        if claim[0] == last[1] and _REFERS_BACK.match(folded, claim[0]):
            return True  # the claim follows the warning and points back at it
        if claim[1] == first[0] and _REFERS_BACK.match(folded, first[0]):
            return True  # the warning follows the claim: "... That's phishing."
    return False


def _sentence_span(folded: str, at: int) -> tuple[int, int]:
    """Where the sentence holding position ``at`` starts and ends (just past its stop)."""
    start = _sentence_start(folded, at)
    after = _SENTENCE_END.search(folded, at)
    return start, after.end() if after else len(folded)


def _sentence_start(folded: str, at: int) -> int:
    """Where the sentence holding position ``at`` starts."""
    start = 0
    for found in _SENTENCE_END.finditer(folded, 0, at):
        start = found.end()
    return start
