"""A platform's id copied from an identifier column into a gated JSON column passes as it is."""

from __future__ import annotations

import uuid

from cairn.core.gate import gated_data, identifier


def test_a_ref_marked_as_an_identifier_is_copied_as_it_is() -> None:
    # A token-shaped string the detector masks when it is anyone's text...
    looks_like_a_token = "ghp_" + uuid.uuid4().hex + "AbCd"
    assert gated_data({"in_reply_to": looks_like_a_token}) != {"in_reply_to": looks_like_a_token}
    # ...is an event's own id when an identifier column holds it: its copy shows nothing more.
    ref = "ghp_" + uuid.uuid4().hex + "EfGh"
    assert identifier(ref) == ref
    assert gated_data({"in_reply_to": ref}) == {"in_reply_to": ref}
    # Only that exact string: the same shape with another value is still masked.
    other = "ghp_" + uuid.uuid4().hex + "IjKl"
    assert gated_data({"in_reply_to": other}) != {"in_reply_to": other}
