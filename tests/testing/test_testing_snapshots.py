"""Test mode's snapshots (CONTRACT 12): POST /_test/snapshot answers the whole state as an archive, POST
/_test/restore replaces the whole state with one; a snapshot that cannot be restored is refused with a JSON error
naming what is wrong and changes nothing. On both backends, and across gunicorn workers."""
import gzip
import io
import json
import subprocess
import sys
import tarfile
import threading
import tracemalloc

import pytest
import requests

from service.domain import snapshots
from service.interface import MAX_SNAPSHOT_BYTES, MEDIA_PATH_ROOT
from service.testing import SnapshotRefused, ThreadedServer
from support.media import MP4, png, sha256
from support.servers import SHIPPED_WORKER_CLASS
from support.tar_blocks import MB, end_of_tar, long_name, pax_chain, tar_end, with_tail
from support.tokens import HEADERS, OTHER_HEADERS
from support.uploads import uploaded_path

MUTATIONS = {
    "stations": "mutation($input: StationCreateInput!) { stationCreate(input: $input) }",
    "processes": "mutation($input: ProcessCreateInput!) { processCreate(input: $input) }",
    "products": "mutation($input: ProductCreateInput!) { productCreate(input: $input) }",
}
FIELD = {"stations": "station", "processes": "process", "products": "product"}
READ = "query($id: String!) { %s(id: $id) { id revision input } %sHistory(id: $id) { revision change } }"


@pytest.fixture
def app(make_app):
    return make_app(TEST_MODE=True)


def gql(client, query, variables=None, headers=HEADERS):
    answer = client.post("/graph/v2", json={"query": query, "variables": variables}, headers=headers).get_json()
    assert "errors" not in answer, answer
    return answer["data"]


def create(client, kind, value, headers=HEADERS):
    return gql(client, MUTATIONS[kind], {"input": {FIELD[kind]: value}}, headers)


def read(client, kind, identifier, headers=HEADERS):
    data = gql(client, READ % (FIELD[kind], FIELD[kind]), {"id": identifier}, headers)
    return data[FIELD[kind]], data[f"{FIELD[kind]}History"]


def objects(client):
    return client.get("/_test/objects", headers=HEADERS).get_json()["orgs"]


def take_snapshot(client):
    answer = client.post("/_test/snapshot", headers=HEADERS)
    assert answer.status_code == 200, answer.get_data(as_text=True)
    assert answer.mimetype == "application/gzip"
    return answer.get_data()


def restore(client, archive):
    return client.post("/_test/restore", data=archive, headers={**HEADERS, "Content-Type": "application/gzip"})


def fill(client):
    """Two orgs' objects and media, a process changed twice (three revisions); what a restore must bring back."""
    image = uploaded_path(client, HEADERS, png(3000, 1), name="housing.png")
    video = uploaded_path(client, HEADERS, MP4 + bytes(5000), destination="stepVideo", name="weld.mp4")
    other_image = uploaded_path(client, OTHER_HEADERS, png(2000, 2), name="cover.png")
    create(client, "stations", {"id": "st_1", "name": "Press"})
    steps = [{"id": "step_1", "primaryImage": {"path": image}, "video": {"path": video}}]
    for name in ("Weld", "Weld again", "Weld at last"):
        create(client, "processes", {"id": "weld_1", "name": name, "steps": steps})
    create(client, "processes", {"id": "paint_1", "name": "Paint"})
    create(client, "products", {"id": "car_1", "name": "Car", "finalProcessId": "weld_1",
                                "dependencies": [{"processId": "weld_1", "upstreamProcessId": "paint_1"}]})
    create(client, "processes", {"id": "other_1", "name": "Other", "steps": [
        {"id": "step_1", "primaryImage": {"path": other_image}}]}, OTHER_HEADERS)
    return {"default": [image, video], "other": [other_image]}


def entries_of(archive):
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        return {member.name: tar.extractfile(member).read() for member in tar}


def forge(entries):
    """A .tar.gz of (name, bytes) entries, in order."""
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb") as zipped, tarfile.open(fileobj=zipped, mode="w|") as tar:
        for name, data in entries:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_a_snapshot_holds_each_org_as_an_archive_of_section_10_and_a_manifest_last(client):
    media = fill(client)
    archive = take_snapshot(client)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        names = tar.getnames()
    assert names[-1] == "manifest.json"
    entries = entries_of(archive)
    manifest = json.loads(entries["manifest.json"])
    assert manifest["format"] == 1 and manifest["snapshot"] is True and manifest["takenAt"].endswith("Z")
    assert manifest["orgs"] == {"default": {"stations": 1, "processes": 2, "products": 1, "media": 2},
                                "other": {"stations": 0, "processes": 1, "products": 0, "media": 1}}
    # Inputs, as the create mutations take them: no metadata, no derived data.
    assert json.loads(entries["default/processes/weld_1.json"])["name"] == "Weld at last"
    assert "revision" not in json.loads(entries["default/processes/weld_1.json"])
    org_manifest = json.loads(entries["default/manifest.json"])
    assert org_manifest["org"] == "default" and org_manifest["format"] == 1
    for org, paths in media.items():
        for path in paths:
            data = entries[f"{org}/media/{path[len('/api/v1/'):]}"]
            assert client.get(path, headers=HEADERS if org == "default" else OTHER_HEADERS).get_data() == data


def test_restore_replaces_the_whole_state_and_each_object_starts_its_history_again(client):
    media = fill(client)
    archive = take_snapshot(client)
    before = objects(client)
    # Everything changes after the snapshot: new objects, a deletion, new media, a fault, the journal.
    create(client, "stations", {"id": "st_2", "name": "Drill"})
    gql(client, 'mutation { productDelete(id: "car_1") }')
    uploaded_path(client, HEADERS, png(1000, 9), name="late.png")
    create(client, "processes", {"id": "late_1", "name": "Late"}, OTHER_HEADERS)
    client.post("/_test/faults", headers=HEADERS, json={"path": "^/nothing$", "status": 503})

    answer = restore(client, archive)
    assert answer.status_code == 200, answer.get_data(as_text=True)
    assert answer.get_json() == {"status": "restored", "orgs": json.loads(entries_of(archive)["manifest.json"])["orgs"]}
    assert client.get("/_test/requests", headers=HEADERS).get_json()["requests"] == []
    assert objects(client) == before
    process, history = read(client, "processes", "weld_1")
    assert process["revision"] == 1 and history == [{"revision": 1, "change": "CREATED"}]
    assert process["input"]["name"] == "Weld at last"
    assert read(client, "products", "car_1")[0]["input"]["finalProcessId"] == "weld_1"
    assert read(client, "processes", "other_1", OTHER_HEADERS)[0]["revision"] == 1
    for org, paths in media.items():
        for path in paths:
            assert client.get(path, headers=HEADERS if org == "default" else OTHER_HEADERS).status_code == 200
    assert client.get("/_test/faults", headers=HEADERS).get_json() == {"faults": []}
    # The restored state works on: an update is revision 2, a snapshot of it restores again.
    create(client, "processes", {"id": "paint_1", "name": "Paint twice"})
    assert read(client, "processes", "paint_1")[0]["revision"] == 2
    assert restore(client, take_snapshot(client)).status_code == 200


def test_an_empty_server_snapshots_and_restores_to_empty(client):
    empty = take_snapshot(client)
    fill(client)
    assert restore(client, empty).status_code == 200
    assert objects(client) == {}


def good_snapshot(objects=({"id": "weld_9", "name": "Nine"},), kind="processes"):
    """A small valid snapshot of org `default`: one process (or the `objects` of `kind`: the first entry), one image
    (images/0123456789abcdef-a.png under MEDIA_PATH_ROOT)."""
    image = png(500, 3)
    record = {"images/0123456789abcdef-a.png": {"size": len(image), "sha256": sha256(image)}}
    counts = {"stations": 0, "processes": 0, "products": 0, "media": 1}
    counts[kind] = len(objects)
    org_manifest = {"format": 1, "org": "default", "exportedAt": "2026-01-01T00:00:00Z", "counts": counts,
                    "media": record}
    top = {"format": 1, "snapshot": True, "takenAt": "2026-01-01T00:00:00Z",
           "orgs": {"default": org_manifest["counts"]}}
    return [*((f"default/{kind}/{value['id']}.json", json.dumps(value).encode()) for value in objects),
            ("default/media/images/0123456789abcdef-a.png", image),
            ("default/manifest.json", json.dumps(org_manifest).encode()),
            ("manifest.json", json.dumps(top).encode())]


def replaced(entries, name, data):
    return [(entry, data if entry == name else value) for entry, value in entries]


def test_a_forged_snapshot_restores(client):
    answer = restore(client, forge(good_snapshot()))
    assert answer.status_code == 200, answer.get_data(as_text=True)
    assert objects(client)["default"]["documents"] == {"processes": ["weld_9"]}


def test_a_forged_snapshot_whose_objects_name_each_other_and_its_media_restores_and_reads_back(client):
    process = {"id": "weld_9", "name": "Nine", "image": {"path": MEDIA_PATH_ROOT + "images/0123456789abcdef-a.png"},
               "steps": [{"id": "step_1", "name": "Weld",
                          "primaryImage": {"path": MEDIA_PATH_ROOT + "images/0123456789abcdef-a.png"}}]}
    product = {"id": "bike_1", "name": "Bike", "finalProcessId": "weld_9", "dependencies": []}
    entries = good_snapshot([process])
    manifest = json.loads(entries[-2][1])
    manifest["counts"]["products"] = 1
    top = json.loads(entries[-1][1])
    top["orgs"]["default"] = manifest["counts"]
    entries = [entries[0], ("default/products/bike_1.json", json.dumps(product).encode()), entries[1],
               ("default/manifest.json", json.dumps(manifest).encode()), ("manifest.json", json.dumps(top).encode())]
    answer = restore(client, forge(entries))
    assert answer.status_code == 200, answer.get_data(as_text=True)
    assert read(client, "processes", "weld_9")[0]["input"]["image"] == process["image"]
    assert read(client, "products", "bike_1")[0]["input"]["finalProcessId"] == "weld_9"


def test_a_snapshot_unpacked_edited_and_packed_again_with_tar_restores(client, tmp_path):
    """What a person does to change a snapshot by hand: `tar xzf`, edit, `tar czf` (which adds the folders too)."""
    fill(client)
    with tarfile.open(fileobj=io.BytesIO(take_snapshot(client))) as tar:
        tar.extractall(tmp_path / "unpacked", filter="data")
    edited = tmp_path / "unpacked" / "default" / "stations" / "st_1.json"
    edited.write_text(json.dumps({"id": "st_1", "name": "Press, edited"}))
    repacked = tmp_path / "edited.tar.gz"
    subprocess.run(["tar", "czf", str(repacked), "-C", str(tmp_path / "unpacked"), "."], check=True)
    # `tar czf ... .` names every entry `./<name>`: that is outside the snapshot's folders (and says so).
    assert "outside the snapshot's folders" in restore(client, repacked.read_bytes()).get_json()["error"]
    names = sorted(path.name for path in (tmp_path / "unpacked").iterdir())
    subprocess.run(["tar", "czf", str(repacked), "-C", str(tmp_path / "unpacked"), *names], check=True)
    answer = restore(client, repacked.read_bytes())
    assert answer.status_code == 200, answer.get_data(as_text=True)
    assert read(client, "stations", "st_1")[0]["input"]["name"] == "Press, edited"


def bad_snapshots():
    good = good_snapshot()
    archive = forge(good)
    org_manifest = json.loads(good[2][1])
    export = [(name.removeprefix("default/"), data) for name, data in good[:3]]
    yield "truncated", archive[:len(archive) // 2], "truncated or corrupt"
    yield "cut in its last bytes", archive[:-4], "truncated or corrupt"
    yield "not gzip", b"PK\x03\x04 a zip file", "not a .tar.gz snapshot"
    yield "gzip of no tar", gzip.compress(b"hello" * 300), "truncated or corrupt"
    yield "an export of one org", forge(export), "the export of one org: `wis import` sends that"
    yield "wrong format", forge(replaced(good, "manifest.json", b'{"format": 2, "snapshot": true, "orgs": {}}')), \
        "not the manifest of a snapshot of format 1"
    yield "no top manifest", forge(good[:3]), "manifest.json: missing"
    yield "a top manifest that is not an object", forge(replaced(good, "manifest.json", b"5")), \
        "manifest.json: not the manifest of a snapshot of format 1"
    yield "parent folder", forge([("default/../../etc/passwd", b"x"), *good]), "a name with '..'"
    yield "absolute", forge([("/default/processes/weld_1.json", b"{}"), *good]), "outside the snapshot's folders"
    yield "outside the folders", forge([("default/secrets/key.json", b"{}"), *good]), "outside the archive's folders"
    yield "duplicate", forge([good[0], *good]), "holds this entry twice"
    yield "wrong SHA-256", forge(replaced(good, "default/media/images/0123456789abcdef-a.png", png(500, 4))), \
        "its SHA-256 is"
    yield "id differs from its name", forge(replaced(good, "default/processes/weld_9.json", b'{"id": "weld_8"}')), \
        "its id is 'weld_8'"
    yield "not JSON", forge(replaced(good, "default/processes/weld_9.json", b"{")), "not JSON"
    # Objects the API would refuse as input: the same checks (types, then the rules of their kind).
    yield "a field of the wrong type", forge(good_snapshot([{"id": "weld_9", "name": {"text": "Nine"}}])), \
        "default/processes/weld_9.json: process.name: String cannot represent a non string value"
    yield "a field the input lacks", forge(good_snapshot([{"id": "weld_9", "name": "Nine", "colour": "red"}])), \
        "not to include unknown field 'colour'"
    yield "a name past the API's limit", forge(good_snapshot([{"id": "weld_9", "name": "N" * 1001}])), \
        "process.name: "
    yield "a rule of its kind broken", \
        forge(good_snapshot([{"id": "weld_9", "name": "Nine", "autoSignoutMinutes": -1}])), \
        "process.autoSignoutMinutes: must be 0 or more"
    yield "media the snapshot lacks", forge(good_snapshot([{"id": "weld_9", "name": "Nine", "image": {
        "path": MEDIA_PATH_ROOT + "images/0123456789abcdef-b.png"}}])), "process.image.path: no image has been uploaded"
    yield "a product naming a process the snapshot lacks", forge(good_snapshot(
        [{"id": "bike_1", "name": "Bike", "finalProcessId": "weld_9", "dependencies": []}], kind="products")), \
        "product.finalProcessId: no process 'weld_9' exists"
    counts = {**org_manifest, "counts": {**org_manifest["counts"], "processes": 2}}
    yield "counts", forge(replaced(good, "default/manifest.json", json.dumps(counts).encode())), "counts"
    yield "media missing", forge([good[0], *good[2:]]), "listed in the manifest but not in the snapshot"
    for name, why in (("aaaa-..", "not a name the service gives media"),
                      ("0123456789abcdef-a.mp4", "images are named with .jpg or .png, not .mp4")):
        renamed = json.loads(good[2][1])
        renamed["media"] = {f"images/{name}": renamed["media"]["images/0123456789abcdef-a.png"]}
        yield f"media named {name}", forge([good[0], (f"default/media/images/{name}", good[1][1]),
                                            ("default/manifest.json", json.dumps(renamed).encode()), good[3]]), \
            f"default/media/images/{name}: {why}"
    top = json.loads(good[3][1])
    top["orgs"]["ghost"] = {}
    yield "an org it lacks", forge(replaced(good, "manifest.json", json.dumps(top).encode())), "names the orgs"
    deep = b'{"id": "weld_9", "name": "Nine", "x": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    yield "JSON nested past the stack", forge(replaced(good, "default/processes/weld_9.json", deep)), \
        "default/processes/weld_9.json: nested deeper than 100 levels"
    yield "JSON nested past what is stored", forge(replaced(good, "default/processes/weld_9.json", json.dumps(
        {"id": "weld_9", "name": "Nine", "x": json.loads("[" * 300 + "]" * 300)}).encode())), "nested deeper than 100"
    yield "3,000 pax headers before one entry", gzip.compress(pax_chain(3000) + tar_end()), \
        "3 in a row before one entry"
    yield "a long name of 64 KB and a byte", gzip.compress(long_name(64 * 1024 + 1) + tar_end()), \
        "an extended header (a long name, or pax records) of 65537 bytes, 1 in a row before one entry; at most 2 of"
    link = io.BytesIO()
    with tarfile.open(fileobj=link, mode="w:gz") as tar:
        info = tarfile.TarInfo("default/media/images/0123456789abcdef-b.png")
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(info)
    yield "a link", link.getvalue(), "not a regular file"


@pytest.mark.parametrize("archive, message", [case[1:] for case in bad_snapshots()],
                         ids=[case[0] for case in bad_snapshots()])
def test_a_snapshot_that_cannot_be_restored_is_a_400_naming_the_problem_and_changes_nothing(client, archive, message):
    fill(client)
    before, snapshot = objects(client), take_snapshot(client)
    answer = restore(client, archive)
    assert answer.status_code == 400, answer.get_data(as_text=True)
    assert message in answer.get_json()["error"]
    assert objects(client) == before
    assert read(client, "processes", "weld_1")[0]["revision"] == 3
    assert entries_of(take_snapshot(client)).keys() == entries_of(snapshot).keys()


def test_a_snapshot_over_the_size_limit_is_refused_before_it_is_read(client):
    fill(client)
    before = objects(client)
    answer = client.post("/_test/restore", data=b"", headers=HEADERS,
                         environ_overrides={"CONTENT_LENGTH": str(MAX_SNAPSHOT_BYTES + 1)})
    assert answer.status_code == 413
    assert answer.get_json()["error"] == (f"request body of {MAX_SNAPSHOT_BYTES + 1} bytes is larger than the limit "
                                          f"of {MAX_SNAPSHOT_BYTES} bytes")
    assert objects(client) == before


def test_a_snapshot_that_unpacks_past_the_limit_is_refused_when_it_gets_there(client, monkeypatch):
    """A gzip bomb: a small body whose entries claim more than MAX_SNAPSHOT_UNPACKED."""
    monkeypatch.setattr(snapshots, "MAX_SNAPSHOT_UNPACKED", 1024 * 1024)
    good = good_snapshot()
    bomb = forge([("default/media/images/0123456789abcdef-z.png", bytes(2 * 1024 * 1024)), *good])
    assert len(bomb) < 10_000
    fill(client)
    before = objects(client)
    answer = restore(client, bomb)
    assert answer.status_code == 413
    assert "more than 1048576 bytes unpacked" in answer.get_json()["error"]
    assert objects(client) == before


def assert_refused_and_nothing_changed(client, archive, status, message):
    """The state fill() made is there after the refusal."""
    before = objects(client)
    answer = restore(client, archive)
    assert answer.status_code == status, answer.get_data(as_text=True)
    assert answer.get_json()["error"] == message
    assert objects(client) == before
    assert read(client, "processes", "weld_1")[0]["revision"] == 3


def test_a_gzip_bomb_after_the_end_of_a_snapshot_is_refused_once_past_the_zero_padding(client):
    """4 GiB of zeros after a real snapshot's tar (a 4 MB body) were unpacked uncounted, 8.7 s of a worker, and the
    snapshot restored. 64 MB of zeros (a 65 KB body) stand for them: refused after the first MB."""
    fill(client)
    archive = take_snapshot(client)
    bomb = with_tail(archive, zeros=64 * MB)
    assert len(bomb) < len(archive) + 100_000
    end = end_of_tar(gzip.decompress(archive))
    assert_refused_and_nothing_changed(client, bomb, 400, (
        f"more than 1,048,576 bytes after the archive's last entry (from byte {end:,} of the unpacked tar): an archive "
        "ends with zero blocks, at most that many, and nothing follows them"))


@pytest.mark.parametrize("where", ["its end block", "the padding of its last record", "after that padding"])
def test_data_after_the_last_entry_of_a_snapshot_is_refused_naming_where(client, where):
    """tarfile stops at the first block that is not a header and reads a record ahead of it: what follows was never
    looked at, in that record or past it."""
    raw = gzip.decompress(forge(good_snapshot()))
    assert len(raw) % 10240 == 0 and len(raw) - end_of_tar(raw) > 1024  # the end blocks, then the record's padding
    at = {"its end block": end_of_tar(raw) + 100, "the padding of its last record": len(raw) - 1,
          "after that padding": len(raw)}[where]
    archive = with_tail(forge(good_snapshot()), lambda raw: raw[:at] + b"x" + raw[at + 1:])
    fill(client)
    assert_refused_and_nothing_changed(client, archive, 400, (
        f"data after the archive's last entry (byte {at:,} of the unpacked tar is not zero): an archive ends with "
        "zero blocks, and nothing follows them"))


def test_the_zeros_after_the_last_entry_count_toward_the_unpacked_limit(client, monkeypatch):
    good = good_snapshot()
    monkeypatch.setattr(snapshots, "MAX_SNAPSHOT_UNPACKED", sum(len(data) for _, data in good))  # the entries fit
    raw = gzip.decompress(forge(good))
    fill(client)
    assert_refused_and_nothing_changed(client, forge(good), 413, (
        f"the {len(raw) - end_of_tar(raw)} bytes of zeros after the last entry: the snapshot holds more than "
        f"{snapshots.MAX_SNAPSHOT_UNPACKED} bytes unpacked, the limit of a snapshot"))
    monkeypatch.setattr(snapshots, "MAX_SNAPSHOT_UNPACKED", len(raw))
    assert restore(client, forge(good)).status_code == 200


def test_a_snapshot_of_too_many_entries_or_too_much_json_is_refused_there(client, monkeypatch):
    good = good_snapshot()
    many = forge([(f"default/stations/st_{number}.json", json.dumps({"id": f"st_{number}"}).encode())
                  for number in range(6)] + good)
    monkeypatch.setattr(snapshots, "MAX_ARCHIVE_ENTRIES", 5)
    answer = restore(client, many)
    assert answer.status_code == 400
    assert answer.get_json()["error"] == "default/stations/st_5.json: more than 5 entries; a snapshot has at most that many"
    # A manifest listing more media than a snapshot can hold is refused when it is read, not kept to the end.
    manifest = json.loads(good[2][1])
    manifest["media"].update({f"images/0123456789abcdef-{n}.png": {"size": 1, "sha256": "0" * 64} for n in range(4)})
    answer = restore(client, forge(replaced(good, "default/manifest.json", json.dumps(manifest).encode())))
    assert answer.status_code == 400
    assert answer.get_json()["error"] == ("default/manifest.json: lists 4 media not in the snapshot so far; a snapshot "
                                          "has at most 5 entries")
    monkeypatch.setattr(snapshots, "MAX_ARCHIVE_ENTRIES", 100)
    monkeypatch.setattr(snapshots, "MAX_SNAPSHOT_DOCUMENTS", 20)
    answer = restore(client, forge(good))
    assert answer.status_code == 413
    assert answer.get_json()["error"].startswith("default/processes/weld_9.json: the snapshot's objects hold more than 20")
    assert objects(client) == {}


def snapshot_of_orgs(count, padding):
    """A valid snapshot of `count` empty orgs whose manifests each carry `padding` bytes more (an unknown field)."""
    counts = {"stations": 0, "processes": 0, "products": 0, "media": 0}
    orgs = [f"org_{number}" for number in range(count)]
    entries = [(f"{org}/manifest.json", json.dumps({
        "format": 1, "org": org, "exportedAt": "2026-01-01T00:00:00Z", "counts": counts, "media": {},
        "padding": "x" * padding}).encode()) for org in orgs]
    top = {"format": 1, "snapshot": True, "takenAt": "2026-01-01T00:00:00Z", "orgs": dict.fromkeys(orgs, counts)}
    return forge([*entries, ("manifest.json", json.dumps(top).encode())]), dict.fromkeys(orgs, counts)


def test_a_restore_holds_one_org_manifest_at_a_time_however_many_orgs(tmp_path):
    """Every org's parsed manifest was kept until the end: a 12 MB body peaked a worker at 1.2 GB."""
    peaks = {}
    for count in (2, 8):
        archive, counts = snapshot_of_orgs(count, 2 * 1024 * 1024)
        tracemalloc.start()
        try:
            state = snapshots.read_snapshot(io.BytesIO(archive), tmp_path / str(count))
            peaks[count] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert state.orgs == counts
    # One manifest of 2 MB at a time (its bytes, its text, its parsed value): four times the orgs, the same peak.
    assert peaks[8] < peaks[2] + 1024 * 1024 < 8 * 1024 * 1024, peaks


def calls_to_read(archive, staging):
    """How many calls of C functions (str.startswith, dict lookups...) reading a snapshot takes: its work, counted."""
    count = 0

    def count_calls(frame, event, argument):
        nonlocal count
        count += event == "c_call"

    sys.setprofile(count_calls)
    try:
        snapshots.read_snapshot(io.BytesIO(archive), staging)
    finally:
        sys.setprofile(None)
    return count


def test_the_work_of_a_restore_grows_with_its_entries_not_their_square(tmp_path):
    """Each org's entries were counted by going through every entry's name: 100,000 entries of one org each cost
    10^10 comparisons."""
    few, many = (calls_to_read(snapshot_of_orgs(count, 0)[0], tmp_path / str(count)) for count in (100, 400))
    assert many < 4.5 * few, (few, many)


def test_the_endpoints_need_the_token_and_test_mode(make_app):
    client = make_app(TEST_MODE=True).test_client()
    assert client.post("/_test/snapshot").status_code == 401
    assert client.post("/_test/restore", data=forge(good_snapshot())).status_code == 401
    off = make_app().test_client()
    assert off.post("/_test/snapshot", headers=HEADERS).status_code == 404
    assert off.post("/_test/restore", headers=HEADERS, data=forge(good_snapshot())).status_code == 404


# -- across gunicorn workers ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def test_server(tmp_path_factory, backend, start_module_gunicorn):
    return start_module_gunicorn(tmp_path_factory.mktemp("snapshots") / "data", workers=2, backend=backend,
                                 env={"WIS_TEST_MODE": "1", "WIS_TEST_SEED": "7"},
                                 extra_args=("--worker-class", SHIPPED_WORKER_CLASS, "--threads", "4"))


def test_every_worker_sees_the_restored_state_and_names_count_from_the_start(test_server):
    url = test_server.url

    def post(path, **kwargs):
        answer = requests.post(url + path, headers=HEADERS, timeout=60, **kwargs)
        assert answer.status_code in (200, 201), answer.text
        return answer

    def upload_image():
        return post("/uploads", files={"file": ("late.png", png(800, 5), "image/png")},
                    data={"destinationId": "stepImage"}).json()["path"]

    post("/_test/reset")
    first_name = upload_image()
    post("/_test/reset")
    archive = post("/_test/restore", data=forge(good_snapshot())).content
    assert json.loads(archive)["status"] == "restored"
    assert upload_image() == first_name  # made-up names count from the start again, as after a reset

    seen = []

    def look():
        # A new connection each time, from several threads at once: both workers answer some.
        for _ in range(5):
            answer = requests.post(url + "/graph/v2", headers=HEADERS, timeout=30,
                                   json={"query": '{ process(id: "weld_9") { name revision } }'})
            seen.append(answer.json()["data"]["process"])

    threads = [threading.Thread(target=look) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == [{"name": "Nine", "revision": 1}] * 20
    snapshot = entries_of(post("/_test/snapshot").content)
    assert json.loads(snapshot["manifest.json"])["orgs"]["default"]["media"] == 2


# -- service.testing.ThreadedServer: snapshot() and restore() --------------------------------------------------------

def test_the_embedded_server_takes_and_restores_snapshots_and_says_why_one_is_refused(tmp_path):
    with ThreadedServer() as server:
        assert server.restore(forge(good_snapshot()))["default"]["processes"] == 1
        server.snapshot(tmp_path / "one.tar.gz")
        server.reset()
        assert server.restore(tmp_path / "one.tar.gz") == {
            "default": {"stations": 0, "processes": 1, "products": 0, "media": 1}}
        (tmp_path / "cut.tar.gz").write_bytes((tmp_path / "one.tar.gz").read_bytes()[:100])
        with pytest.raises(SnapshotRefused, match=r"cut.tar.gz: 400: not a whole .tar.gz snapshot \(truncated"):
            server.restore(tmp_path / "cut.tar.gz")
        with server.session() as session:
            assert session.get("/_test/objects").json()["orgs"]["default"]["documents"] == {"processes": ["weld_9"]}
