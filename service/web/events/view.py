"""`GET /events`: the org's change events as Server-Sent Events (CONTRACT 14, "Stream").

`retry: 3000` first; then each event as `id: <seq>`, `event: <type>`, `data: <envelope>`; `: keepalive` while nothing
happens. It starts after the `Last-Event-ID` header, else after `?after=`, else at the latest event; `?types=` keeps
some types. A start whose events are no longer kept (or past the latest seq) first gets `event: reset` naming the
oldest kept, then goes on from there; so does a stream whose org's events are numbered again (a test-mode reset), which
then ends. A read token or the pages' session cookie authenticates it (an EventSource cannot send headers); it ends
when that token is revoked (service.web.events.hub).
"""
import logging
import re

from flask import Blueprint, current_app, g, request

from service.domain.events import envelope, event_type, reader_wanted, stream_start
from service.domain.validation import Problems, quoted
from service.errors import ServiceError
from service.storage import get_repository
from service.web.events import sse
from service.web.events.answer import stream_answer
from service.web.events.stream import Ending
from service.web.auth import READ_OR_SESSION, requires

log = logging.getLogger(__name__)

bp = Blueprint("events", __name__)
# A seq as a client sends it: ASCII digits, no sign, no spaces (15 digits are far beyond any org's events).
SEQ = re.compile(r"[0-9]{1,15}")


@bp.get("/events")
@requires(READ_OR_SESSION)
def follow():
    after, wanted = _parameters()
    repo, org = get_repository(current_app), g.org
    position, oldest = stream_start(repo, org, after)

    def frames(stream):
        yield sse.RETRY
        if oldest is not None:
            yield _reset(oldest)
        yield from _events_of(stream, repo.events)

    return stream_answer(g.credential, wanted, position, frames)


def _parameters():
    """(the seq to start after or None, the wanted types or None) from Last-Event-ID, `after` and `types`; 400
    naming each bad one."""
    problems = Problems()
    last_event_id = _seq(request.headers.get("Last-Event-ID"), "Last-Event-ID", problems)
    after = _seq(request.args.get("after"), "after", problems)
    types = request.args.getlist("types")
    wanted = reader_wanted(",".join(types).split(","), problems) if types else None
    problems.raise_if_any()
    return (last_event_id if last_event_id is not None else after), wanted


def _seq(text, field, problems):
    """The seq `text` says (None when absent or empty, as a Last-Event-ID a stream reset to no id), or a problem."""
    if not text:
        return None
    if SEQ.fullmatch(text) is None:
        problems.add(field, f"must be a seq: a whole number, 0 or more; got {quoted(text)}")
        return None
    return int(text)


def _events_of(stream, events):
    """The stream's events as messages, keepalives between them; an `event: reset` when its org's events are numbered
    again. A store that fails ends the stream: its client connects again with Last-Event-ID."""
    try:
        for batch in stream.batches(events, sse.KEEPALIVE_SECONDS):
            if not batch:
                yield sse.KEEPALIVE
            else:
                yield b"".join(sse.message(event_type(event), envelope(event), event.seq) for event in batch)
    except ServiceError as error:
        log.warning("an event stream of org %r ends: %s", stream.org, error.message)
        return
    if stream.ending is Ending.RENUMBERED:
        yield _reset(stream.oldest)


def _reset(oldest):
    """`event: reset`: the events before `oldest` are not kept (or were numbered again); id is the seq before it."""
    return sse.message("reset", {"oldest": oldest}, oldest - 1)
