"""Downloads through a link that breaks mid-body, against real gunicorn behind a proxy of the test's own that cuts a
connection after so many bytes: the rest is asked for with a Range, a file is whole or left as it was, and the error
after every retry is the client's own."""
import hashlib
import io
import socket
import threading

import pytest

from service.cli import main
from service.client import MB, Client, ServerUnreachable, download
from service.interface.archive import ArchiveReader
from support.media import sha256_of, write_mp4
from support.proxy import Proxy
from support.tokens import TOKEN

pytestmark = pytest.mark.file_backend_only("the client's own behaviour (requests, retries, progress, resuming); the "
                                           "server's answers are tested on both backends")

CUT_AFTER = 100_000


@pytest.fixture(scope="module")
def video(server, tmp_path_factory):
    """(media path, SHA-256, size) of an 11 MB video stored on the server."""
    file = write_mp4(tmp_path_factory.mktemp("video") / "long.mp4", 11 * MB)
    client = Client(server.url, TOKEN, backoff=0)
    return client.upload(file, state_dir=file.parent / "state"), sha256_of(file), 11 * MB


@pytest.fixture
def proxy(server):
    proxies = []

    def start(**options):
        proxies.append(Proxy(server.url, **options))
        return proxies[-1]

    yield start
    for started in proxies:
        started.stop()


def gets_of(proxy, path):
    return [headers for method, seen, headers in proxy.requests_seen() if (method, seen) == ("GET", path)]


def test_a_download_cut_off_mid_body_asks_for_the_rest_and_writes_the_whole_file(proxy, video, tmp_path):
    path, sha, size = video
    cutting = proxy(cut_after=CUT_AFTER, cuts=1)

    written = Client(cutting.url, TOKEN, backoff=0).download(path, tmp_path / "dl.mp4")

    assert written == size
    assert sha256_of(tmp_path / "dl.mp4") == sha
    assert [item.name for item in tmp_path.iterdir()] == ["dl.mp4"]  # no temporary left beside it
    first, second = gets_of(cutting, path)
    assert "range" not in first
    received = int(second["range"].removeprefix("bytes=").removesuffix("-"))
    assert 0 < received <= CUT_AFTER  # only the rest was sent again
    assert second["if-range"].startswith('"')  # the first answer's ETag: the rest of the same file
    assert cutting.cut == 1


def test_a_download_into_a_binary_file_resumes_too(proxy, video):
    path, sha, size = video
    cutting = proxy(cut_after=CUT_AFTER, cuts=2)
    buffer = io.BytesIO(b"kept")

    buffer.seek(4)
    written = Client(cutting.url, TOKEN, backoff=0).download(path, buffer)

    assert written == size
    assert buffer.getvalue()[:4] == b"kept"
    assert hashlib.sha256(buffer.getvalue()[4:]).hexdigest() == sha
    assert cutting.cut == 2


def test_a_download_cut_off_every_time_raises_server_unreachable_and_leaves_the_destination_as_it_was(
        proxy, video, tmp_path):
    path, _, _ = video
    cutting = proxy(cut_after=CUT_AFTER)
    (tmp_path / "dl.mp4").write_bytes(b"an older copy")

    with pytest.raises(ServerUnreachable) as caught:
        Client(cutting.url, TOKEN, retries=2, backoff=0).download(path, tmp_path / "dl.mp4")

    assert caught.value.message.startswith(f"cannot download {path} from {cutting.url}: the connection broke 3 times "
                                           f"in a row, the last after ")
    assert "IncompleteRead" in caught.value.message
    assert len(gets_of(cutting, path)) == 3
    assert [item.name for item in tmp_path.iterdir()] == ["dl.mp4"]
    assert (tmp_path / "dl.mp4").read_bytes() == b"an older copy"


def test_an_interrupted_download_leaves_no_file(api, video, tmp_path, monkeypatch):
    path, _, _ = video

    def interrupted(fd):
        raise KeyboardInterrupt  # Ctrl-C once the bytes are written, before the file is renamed into place

    monkeypatch.setattr(download.os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        api.download(path, tmp_path / "dl.mp4")

    assert list(tmp_path.iterdir()) == []


def test_an_export_through_a_link_that_breaks_mid_media_writes_every_media_whole(proxy, server, video, tmp_path,
                                                                                   capsys):
    path, sha, size = video
    Client(server.url, TOKEN).create_process({"id": "exported", "name": "Exported",
                                              "steps": [{"id": "step_1", "video": {"path": path}}]})
    cutting = proxy(cut_after=CUT_AFTER, cuts=1)

    code = main(["export", str(tmp_path / "org.tar.gz"), "--url", cutting.url, "--token", TOKEN, "--no-progress"])

    out, err = capsys.readouterr()
    assert (code, out) == (0, "")
    assert cutting.cut == 1
    media = ArchiveReader(tmp_path / "org.tar.gz").check().media
    assert media[path] == {"size": size, "sha256": sha}


def test_an_export_whose_media_download_breaks_every_time_is_one_error_line(proxy, server, video, tmp_path, capsys):
    path, _, _ = video
    Client(server.url, TOKEN).create_process({"id": "exported", "name": "Exported",
                                              "steps": [{"id": "step_1", "video": {"path": path}}]})
    cutting = proxy(cut_after=CUT_AFTER)

    code = main(["export", str(tmp_path / "org.tar.gz"), "--url", cutting.url, "--token", TOKEN, "--no-progress",
                 "--retries", "1"])

    out, err = capsys.readouterr()
    assert code == 1
    [line] = err.splitlines()
    assert line.startswith(f"error: cannot download {path} from {cutting.url}: the connection broke 2 times in a row")
    assert "Connection broken: IncompleteRead(" in line


def test_a_server_that_ignores_range_and_breaks_off_at_the_same_place_is_given_up(tmp_path):
    """Such a server sends the whole file again from its first byte, and breaks off after 1.5 MB of 3 MB every time: the
    same 1.5 MB again is no progress, so the failures in a row reach the retries and the download ends, where it was
    asked again for ever (each attempt's 1.5 MB counted as progress)."""
    asked = []
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stopped = threading.Event()

    def serve():
        while not stopped.is_set() and len(asked) < 40:  # (bounded: the code before asked without end)
            try:
                connection, _ = listener.accept()
            except OSError:
                continue
            with connection:
                connection.settimeout(5)
                head = b""
                while b"\r\n\r\n" not in head:
                    piece = connection.recv(4096)
                    if not piece:
                        break
                    head += piece
                asked.append(head)
                connection.sendall(b'HTTP/1.1 200 OK\r\nContent-Length: 3000000\r\nAccept-Ranges: bytes\r\n'
                                   b'ETag: "same"\r\n\r\n' + bytes(1_500_000))
        listener.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        client = Client(f"http://127.0.0.1:{listener.getsockname()[1]}", TOKEN, retries=3, backoff=0)
        with pytest.raises(ServerUnreachable, match="broke 4 times in a row"):
            client.download("/api/v1/videos/0123456789abcdef-long.mp4", tmp_path / "long.mp4")
    finally:
        stopped.set()
        thread.join(timeout=10)
    assert len(asked) == 4 and b"range: bytes=" in asked[1].lower()  # asked for the rest, answered the whole again
    assert list(tmp_path.iterdir()) == []
