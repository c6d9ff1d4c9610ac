"""Test-mode endpoints under /_test/ for integrators' test suites: reset, inspect, read the request journal, inject
faults.

Registered only when TEST_MODE is on (absent, so 404, otherwise), and they need an API token of the admin scope (the
test double's own token has it). Faults and the
journal live in the data directory under locks, so they hold across gunicorn workers as well as threads. The request
schemas are in service.testing.schemas, imported by the views that use them (marshmallow costs the embedded test
double a tenth of a second at start-up) unless init_app imported them.
"""
import socket
import struct
import tempfile
import time
import uuid

from flask import Blueprint, current_app, g, jsonify, request, send_file

from service.errors import disk_errors
from service.testing import recorder
from service.web.auth import ADMIN_TOKEN, requires
from service.domain import snapshots
from service.storage import get_repository


PREFIX = "/_test"
DEFAULT_FAULT_ERROR = "fault injected by the test-mode API"
# A snapshot this small is written in memory before it is sent; a larger one goes on to a temporary file.
SNAPSHOT_IN_MEMORY = 8 * 1024 * 1024

bp = Blueprint("testing_api", __name__, url_prefix=PREFIX)


def _inject_fault():
    """before_request: answer, delay, mark for dropping or cut the next requests that match a fault."""
    if request.path.startswith(PREFIX + "/"):
        return None
    fault = get_repository(current_app).faults.take(request.method, request.path)
    if fault is None:
        return None
    g.fault_id = fault["id"]
    if "status" in fault:
        response = jsonify(error=fault["error"])
        response.status_code = fault["status"]
        return response
    if "delay" in fault:
        time.sleep(fault["delay"])
    elif "reset" in fault:
        # Nothing of the request is done; this answer goes nowhere: the connection is cut once the journal has the
        # request (_cut_if_marked), and the server's write fails quietly.
        g.connection_reset = True
        return current_app.response_class(status=204)
    else:
        g.drop_response = True
    return None


def _cut_if_marked(response):
    """after_request, after the journal's (so a client that sees the cut and asks for the journal finds the request):
    close the connection of a dropped request, whose work is done, so the client never hears the answer; reset that of
    a request a reset fault stopped before any work."""
    if g.get("drop_response") or g.get("connection_reset"):
        _cut_connection(reset=g.get("connection_reset", False))
    return response


def _cut_connection(reset):
    """Shut the request's connection in both directions: the client reads no answer, only the end of the connection.
    With `reset`, the server's later close of the socket sends a TCP reset (SO_LINGER 0), as a crashed peer's would."""
    connection = request.environ.get("werkzeug.socket") or request.environ.get("gunicorn.socket")
    if connection is None:
        raise RuntimeError("a 'drop' or 'reset' fault needs the werkzeug or gunicorn server (no socket in the environ)")
    if reset:
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    # shutdown, never close: the server still owns the descriptor, its write then fails quietly.
    connection.shutdown(socket.SHUT_RDWR)


def _org_objects(repo, org):
    return {
        "documents": {kind: repo.documents.ids(org, kind) for kind in repo.documents.kinds(org)},
        "media": sorted(path for path, _ in repo.media.list_media(org)),
        "streams": sorted(repo.streams.open_ids(org)),
    }


@bp.post("/reset")
@requires(ADMIN_TOKEN)
def reset():
    """Remove every org's documents, media, streams, events and webhooks, every pending fault and the journal; count
    names anew."""
    get_repository(current_app).reset()
    return jsonify(status="reset")


@bp.post("/snapshot")
@requires(ADMIN_TOKEN)
def snapshot():
    """The whole state, every org, as a snapshot archive (service.domain.snapshots)."""
    repo = get_repository(current_app)
    # Written whole before it is sent: the answer has its Content-Length, and an error is a JSON answer, not a cut one.
    spool = tempfile.SpooledTemporaryFile(max_size=SNAPSHOT_IN_MEMORY)
    try:
        with disk_errors():
            manifest = snapshots.write_snapshot(repo, spool)
        spool.seek(0)
    except BaseException:
        spool.close()
        raise
    name = f"wis-snapshot-{manifest['takenAt'].replace(':', '')}.tar.gz"
    return send_file(spool, mimetype=snapshots.CONTENT_TYPE, as_attachment=True, download_name=name)


@bp.post("/restore")
@requires(ADMIN_TOKEN)
def restore():
    """Replace the whole state with the snapshot archive of the body; the orgs restored, with their counts."""
    repo = get_repository(current_app)
    with repo.staging_directory() as staging:
        state = snapshots.read_snapshot(request.stream, staging)
        # Imported here: the GraphQL stack is not loaded until something needs it.
        from service.web.graphql.input_check import coerced_input
        snapshots.check_objects(state, coerced_input)
        repo.replace_state(state.documents, state.media)
    return jsonify(status="restored", orgs=state.orgs)


@bp.post("/webhooks/due")
@requires(ADMIN_TOKEN)
def webhooks_due():
    """Every pending webhook delivery is due now, not at its retry's time: how many."""
    return jsonify(due=get_repository(current_app).webhooks.make_due_now())


@bp.get("/objects")
@requires(ADMIN_TOKEN)
def objects():
    """What is stored, per org: document ids by kind, media paths, open stream ids."""
    repo = get_repository(current_app)
    return jsonify(orgs={org: _org_objects(repo, org) for org in repo.orgs()})


@bp.get("/requests")
@requires(ADMIN_TOKEN)
def requests_received():
    """The request journal, oldest first: the entries after `since`, at most the last 10,000."""
    from service.testing.schemas import JournalQuerySchema
    from service.web.uploads.schemas import load

    since = load(JournalQuerySchema(), request.args)["since"]
    return jsonify(requests=get_repository(current_app).journal.read(since))


@bp.post("/faults")
@requires(ADMIN_TOKEN)
def add_fault():
    from service.testing.schemas import FaultSchema
    from service.web.uploads.schemas import load

    fault = load(FaultSchema(), request.get_json(silent=True))
    fault["id"] = uuid.uuid4().hex
    fault["method"] = fault["method"].upper() if fault["method"] else None
    if "status" in fault:
        fault.setdefault("error", DEFAULT_FAULT_ERROR)
    return jsonify(get_repository(current_app).faults.add(fault)), 201


@bp.get("/faults")
@requires(ADMIN_TOKEN)
def list_faults():
    return jsonify(faults=get_repository(current_app).faults.list())


@bp.delete("/faults")
@requires(ADMIN_TOKEN)
def clear_faults():
    get_repository(current_app).faults.clear()
    return "", 204


def init_app(app):
    """Register the /_test/ endpoints, the fault hooks and the journal; call only when TEST_MODE is on."""
    if not app.config.get("LOAD_ON_FIRST_REQUEST"):
        import service.testing.schemas  # noqa: F401 (marshmallow now, so that no request waits for it)
    app.register_blueprint(bp)
    app.before_request(_inject_fault)
    app.after_request(_cut_if_marked)
    app.after_request(recorder.record)  # (after_request hooks run in the reverse order: this one first)
