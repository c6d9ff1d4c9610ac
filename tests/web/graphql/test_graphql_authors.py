"""Who changed what (CONTRACT 16) through GraphQL on both backends: every history entry and its event record the name
of the token that sent the change as `author`, and the `comment` of its create, delete or restore mutation; a comment
is at most 500 code points, and is dropped with an unchanged push, which stores nothing."""
from pathlib import Path

import pytest

from service.domain.events import envelope
from service.interface import MAX_COMMENT_LENGTH
from service.storage import get_repository
from support.tokens import HEADERS, TOKEN_NAME, WRITE_HEADERS, WRITE_TOKEN_NAME

CREATE = "mutation($s: StationInput!, $c: String, $d: Boolean) { stationCreate(input: {station: $s}, comment: $c, " \
         "dryRun: $d) }"
DELETE = "mutation($id: String!, $c: String) { stationDelete(id: $id, comment: $c) }"
RESTORE = "mutation($id: String!, $n: Int!, $c: String) { stationRestore(id: $id, revision: $n, comment: $c) }"
HISTORY = 'query($id: String!) { stationHistory(id: $id) { revision change author comment } }'
EVENTS = "{ events { seq revision change author comment } }"


def gql(client, headers, query, **variables):
    response = client.post("/graph/v2", headers=headers, json={"query": query, "variables": variables})
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def station(name, identifier="st_who"):
    return {"id": identifier, "name": name}


def history(client, identifier="st_who"):
    return [tuple(entry.values()) for entry in gql(client, HEADERS, HISTORY, id=identifier)["data"]["stationHistory"]]


def events(client):
    return [tuple(event.values())[1:] for event in gql(client, HEADERS, EVENTS)["data"]["events"]]


def test_each_change_records_its_tokens_name_and_its_comment(client):
    gql(client, WRITE_HEADERS, CREATE, s=station("A"), c="first cut from the sheet")
    gql(client, HEADERS, CREATE, s=station("B"))
    gql(client, WRITE_HEADERS, DELETE, id="st_who", c="line closed")
    gql(client, HEADERS, RESTORE, id="st_who", n=1, c="\u00e9tag\u00e8re \U0001f527\x00 back")
    expected = [(4, "RESTORED", TOKEN_NAME, "\u00e9tag\u00e8re \U0001f527\x00 back"),
                (3, "DELETED", WRITE_TOKEN_NAME, "line closed"), (2, "UPDATED", TOKEN_NAME, None),
                (1, "CREATED", WRITE_TOKEN_NAME, "first cut from the sheet")]
    assert history(client) == expected
    assert events(client) == expected[::-1]


def test_the_envelope_streams_and_webhooks_send_carries_author_and_comment(client):
    gql(client, WRITE_HEADERS, CREATE, s=station("A"), c="why")
    [event] = get_repository(client.application).events.read("default", 0, 10)
    assert envelope(event)["data"] == {"seq": 1, "kind": "station", "id": "st_who", "revision": 1, "change": "CREATED",
                                       "name": "A", "author": WRITE_TOKEN_NAME, "comment": "why"}


def test_an_unchanged_push_and_a_dry_run_drop_the_comment_and_store_nothing(client):
    gql(client, HEADERS, CREATE, s=station("A"), c="kept")
    assert gql(client, HEADERS, CREATE, s=station("A"), c="dropped: nothing changed")["data"] == {
        "stationCreate": "UPDATED"}
    assert gql(client, HEADERS, CREATE, s=station("B"), c="dropped: a dry run", d=True)["data"] == {
        "stationCreate": "UPDATED"}
    assert history(client) == [(1, "CREATED", TOKEN_NAME, "kept")]
    assert len(events(client)) == 1


@pytest.mark.parametrize("comment, said", [
    ("x" * (MAX_COMMENT_LENGTH + 1), f"is {MAX_COMMENT_LENGTH + 1} characters long; at most {MAX_COMMENT_LENGTH}"),
    ("\U0001f527" * (MAX_COMMENT_LENGTH + 1), f"is {MAX_COMMENT_LENGTH + 1} characters long"),
    ("half a pair: \ud800", "holds half of a UTF-16 surrogate pair"),
])
def test_a_comment_over_the_limit_is_bad_input_naming_it_and_nothing_is_stored(client, comment, said):
    for query, variables in ((CREATE, {"s": station("A")}), (CREATE, {"s": station("A"), "d": True})):
        answer = gql(client, HEADERS, query, c=comment, **variables)
        [error] = answer["errors"]
        assert error["extensions"] == {"code": "BAD_USER_INPUT", "field": "comment"}
        assert error["message"].startswith(f"comment: {said}") and answer["data"] == {"stationCreate": None}
    assert history(client) == [] and events(client) == []


def test_a_comment_of_the_limit_in_astral_characters_is_kept_whole(client):
    comment = "\U0001f527" * MAX_COMMENT_LENGTH  # 500 code points, 1000 UTF-16 units, 2000 bytes of UTF-8
    gql(client, HEADERS, CREATE, s=station("A"), c=comment)
    gql(client, HEADERS, DELETE, id="st_who", c=comment)
    assert [entry[3] for entry in history(client)] == [comment, comment]


@pytest.mark.file_backend_only("history entries as the file backend wrote them before changes had authors")
def test_history_written_before_authors_reads_as_made_by_nobody_and_goes_on(app, client):
    stations = Path(app.config["DATA_DIR"]) / "orgs" / "default" / "stations"
    (stations / ".history" / "st_who").mkdir(parents=True)
    for revision, change, name in ((1, "CREATED", "A"), (2, "UPDATED", "B")):
        document = (b'{"id":"st_who","name":"%s","createdAt":"2024-01-01T00:00:00.000Z","updatedAt":"2024-01-0%dT00:00:'
                    b'00.000Z","revision":%d}' % (name.encode(), revision, revision))
        (stations / ".history" / "st_who" / f"{revision}.json").write_bytes(
            b'{"change":"%s","savedAt":"2024-01-0%dT00:00:00.000Z","document":%s}' % (change.encode(), revision,
                                                                                     document))
    (stations / "st_who.json").write_bytes(document)
    assert history(client) == [(2, "UPDATED", None, None), (1, "CREATED", None, None)]
    gql(client, WRITE_HEADERS, CREATE, s=station("C"), c="renamed")
    assert history(client) == [(3, "UPDATED", WRITE_TOKEN_NAME, "renamed"), (2, "UPDATED", None, None),
                               (1, "CREATED", None, None)]
