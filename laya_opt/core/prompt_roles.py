"""What each prompt position is, for `laya-opt inspect-prompt`: cls, header, sep, marker, option or state.

Display only: the forward never reads it, so it lives apart from the prompt building of
`laya_opt.core.prompt` (and out of the reference cache's source digest).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from laya_opt.core.prompt import PreparedQuestion

if TYPE_CHECKING:
    from laya_opt.core.tokens import TextCodec


class RenderedToken(NamedTuple):
    index: int
    token_id: int
    token: str
    role: str   # cls, header, sep, marker, option or state


def token_roles(prepared: PreparedQuestion, sep_id: int) -> list[str]:
    """Role of every position: cls, header, sep, marker, option, state.

    The options' closing [SEP] is taken to be the first SEP id after the last marker, so an option text that
    itself tokenizes to the SEP id is shown as ending early; the ids themselves are unaffected.
    """
    length = len(prepared.ids)
    roles = ["state"] * length
    if not length:
        return roles
    roles[0] = "cls"
    first_marker = prepared.markers[0] if prepared.markers else length
    for position in range(1, min(first_marker - 1, length)):
        roles[position] = "header"
    if 0 < first_marker - 1 < length:
        roles[first_marker - 1] = "sep"
    options_end = _options_end(prepared, sep_id)
    for position in range(first_marker, options_end):
        roles[position] = "option"
    for position in prepared.markers:
        roles[position] = "marker"
    if options_end < length:
        roles[options_end] = "sep"
        if options_end < length - 1:
            roles[length - 1] = "sep"
    return roles


def _options_end(prepared: PreparedQuestion, sep_id: int) -> int:
    """Position of the SEP closing the options, or len(ids) when the cut to max_len removed it."""
    if not prepared.markers:
        return len(prepared.ids)
    for position in range(prepared.markers[-1] + 1, len(prepared.ids)):
        if prepared.ids[position] == sep_id:
            return position
    return len(prepared.ids)


def render_tokens(prepared: PreparedQuestion, codec: TextCodec) -> list[RenderedToken]:
    """(index, id, token string, role) for every position, for `inspect-prompt`."""
    tokens = codec.decode_tokens(prepared.ids)
    roles = token_roles(prepared, codec.sep_id)
    return [RenderedToken(index, int(token_id), token, role)
            for index, (token_id, token, role) in enumerate(zip(prepared.ids, tokens, roles))]
