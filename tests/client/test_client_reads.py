"""Readers of products and stations (and lists) shaped like the process ones; ValueError for caller mistakes."""
import pytest

from service.client import MB, Client, ClientError
from support.media import write_mp4, write_png


pytestmark = pytest.mark.file_backend_only("the client's own behaviour (requests, retries, progress, resuming); the server's answers are tested on both backends")


@pytest.fixture
def api(wis_clean):
    with Client(wis_clean.url, wis_clean.token, backoff=0) as client:
        yield client


def test_product_and_station_read_back_what_was_created(api):
    api.create_station({"id": "press_1", "name": "Press"})
    api.create_process({"id": "frame", "name": "Frame"})
    api.create_process({"id": "assembly", "name": "Assembly"})
    api.create_product({"id": "bike", "name": "Bike", "finalProcessId": "assembly",
                        "dependencies": [{"processId": "assembly", "upstreamProcessId": "frame", "quantity": 2}]})

    station = api.get_station("press_1")
    product = api.get_product("bike")

    assert (station["id"], station["name"], station["revision"]) == ("press_1", "Press", 1)
    assert station["createdAt"] and station["updatedAt"]
    assert (product["name"], product["finalProcessId"], product["revision"]) == ("Bike", "assembly", 1)
    assert product["dependencies"] == [{"processId": "assembly", "upstreamProcessId": "frame", "quantity": 2}]


def test_missing_product_and_station_are_none(api):
    assert api.get_product("no_such_product") is None
    assert api.get_station("no_such_station") is None


def test_lists_are_paged_by_id(api):
    for name in ("c_line", "a_line", "b_line"):
        api.create_station({"id": name, "name": name.upper()})
    for name in ("proc_2", "proc_1"):
        api.create_process({"id": name, "name": name})
    api.create_product({"id": "bike", "name": "Bike", "finalProcessId": "proc_1", "dependencies": []})

    assert [s["id"] for s in api.list_stations()] == ["a_line", "b_line", "c_line"]
    assert [s["name"] for s in api.list_stations(first=2)] == ["A_LINE", "B_LINE"]
    assert [s["id"] for s in api.list_stations(first=2, after="b_line")] == ["c_line"]
    assert [p["id"] for p in api.list_processes(first=1, after="proc_1")] == ["proc_2"]
    assert [p["id"] for p in api.list_products()] == ["bike"]
    assert api.list_processes(first=1) == [api.get_process("proc_1")]  # the same fields as get_process


@pytest.mark.parametrize("kwargs, message", [
    ({"destination": "stepAudio"}, "unknown destination 'stepAudio': use one of stepImage, stepVideo, stepVideoGif"),
    ({"chunk_size": 10 * MB + 1}, "chunk size must be between 1 byte and 10 MB, not 10485761"),
    ({"chunk_size": 0}, "chunk size must be between 1 byte and 10 MB, not 0"),
    ({"parallel": 0}, "parallel must be at least 1, not 0"),
])
def test_caller_mistakes_are_value_errors_sent_nowhere(api, wis_session, tmp_path, kwargs, message):
    video = write_mp4(tmp_path / "clip.mp4", 11 * MB)
    kwargs = {"destination": "stepVideo", **kwargs}

    with pytest.raises(ValueError) as caught:
        api.upload(video, state_dir=tmp_path / "state", **kwargs)

    assert str(caught.value) == message
    assert not isinstance(caught.value, ClientError)
    assert wis_session.get("/_test/objects").json()["orgs"] == {}


@pytest.mark.parametrize("head, destination, prefix, suffix", [
    (b"\x89PNG\r\n\x1a\n", "stepImage", "/api/v1/images/", ".png"),
    (b"\xff\xd8\xff\xe0", "stepImage", "/api/v1/images/", ".jpg"),
    (b"\x00\x00\x00\x18ftypisom", "stepVideo", "/api/v1/videos/", ".mp4"),
    (b"GIF89a", "stepVideoGif", "/api/v1/videos/", ".gif"),
    (b"GIF87a", "stepVideoGif", "/api/v1/videos/", ".gif"),
])
def test_destination_is_sniffed_from_the_content(api, tmp_path, head, destination, prefix, suffix):
    file = tmp_path / "media.bin"  # the name says nothing
    file.write_bytes(head + bytes(1000))

    path = api.upload(file, state_dir=tmp_path / "state")

    assert path.startswith(prefix) and path.endswith(suffix)


def test_unknown_format_without_destination_is_refused(api, tmp_path):
    file = tmp_path / "notes.png"
    file.write_bytes(b"just text, whatever the name says")

    with pytest.raises(ValueError) as caught:
        api.upload(file, state_dir=tmp_path / "state")

    assert str(caught.value) == (f"cannot tell the destination of {file} from its content: uploads accept JPEG or PNG "
                                 "-> stepImage, MP4 -> stepVideo, GIF -> stepVideoGif; this is none of these")


def test_an_explicit_destination_is_not_second_guessed(api, tmp_path):
    image = write_png(tmp_path / "a.png")
    with pytest.raises(ClientError) as caught:
        api.upload(image, "stepVideo", state_dir=tmp_path / "state")
    assert caught.value.status == 400  # the server's word: stepVideo accepts MP4 only
