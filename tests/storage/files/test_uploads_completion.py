"""What the request that completes an upload does on the file backend, beside what every chunk does: the steps it
waits for (docs/performance.md, "The completing request"). It links the verified file into the media folder, puts the
stream's complete record in place and tidies the stream; deduplication (CONTRACT 10) looks the bytes up in the org's
index. None of it may grow with the size of the upload or the number of the org's media."""
import os
import tempfile
import threading
import time

import pytest

from service.interface import MB
from service.storage import get_repository
from service.storage.common import disk as storage_disk
from service.storage.files import media_index
from support.media import png, random_blob, sha256
from support.uploads import create_stream, send_chunk, uploaded_path

pytestmark = pytest.mark.file_backend_only("the file backend's own steps: links, fsyncs, its index's files")

ORG = "default"


def streamed(client, auth, data, chunk_size=MB):
    """Send `data` as a chunk stream in order; (its stream id, the path the completing chunk answers)."""
    stream_id = create_stream(client, auth, data)
    chunks = [data[at:at + chunk_size] for at in range(0, len(data), chunk_size)]
    for index, chunk in enumerate(chunks):
        response = send_chunk(client, auth, stream_id, index, len(chunks), chunk)
        assert response.status_code == (201 if index == len(chunks) - 1 else 200), response.get_json()
    return stream_id, response.get_json()["path"]


def test_a_duplicate_completes_without_waiting_for_its_file_to_be_freed(app, client, auth, monkeypatch):
    """The same bytes under the same name again: the stream's own file, the whole upload, is not needed. Freeing a
    file's blocks takes the filesystem about 0.2 ms a MB (a 500 MB upload's: 100 ms, which the completing request
    waited for): its last name goes in the request, its blocks on a thread of its own."""
    data = random_blob(b"\x00\x00\x00\x18ftypmp42", 3 * MB, seed=1)
    _, path = streamed(client, auth, data)
    freed_later = []
    monkeypatch.setattr(storage_disk, "free_later", freed_later.append)

    stream_id, again = streamed(client, auth, data)

    assert again == path
    directory = get_repository(app).orgs_root / ORG / "streams" / stream_id
    assert os.listdir(directory) == ["meta.json"]
    [fd] = freed_later
    status = os.fstat(fd)
    assert (status.st_size, status.st_nlink) == (len(data), 0)  # the whole duplicate, no name left, not freed yet
    os.close(fd)
    assert client.get(path, headers=auth).data == data


def test_a_small_duplicate_or_a_published_file_is_removed_in_the_request(app, client, auth, monkeypatch):
    freed_later = []
    monkeypatch.setattr(storage_disk, "free_later", freed_later.append)
    small = random_blob(b"\x00\x00\x00\x18ftypmp42", MB // 2, seed=2)
    streamed(client, auth, small)
    streamed(client, auth, small)
    streamed(client, auth, random_blob(b"\x00\x00\x00\x18ftypmp42", 3 * MB, seed=3))
    assert freed_later == []


class Steps:
    """Records the completing request's writes that reach the disk, in order, by the files they are about."""

    def __init__(self, monkeypatch, data_dir):
        self.taken, self._root = [], str(data_dir)
        for name in ("link", "replace", "fsync", "fdatasync"):
            real = getattr(os, name)
            monkeypatch.setattr(os, name, self._recording(name, real))
        real_mkstemp, real_writeback = tempfile.mkstemp, storage_disk._start_writeback

        def mkstemp(*args, **kwargs):
            made = real_mkstemp(*args, **kwargs)
            self._add("create", made[1])
            return made

        def writeback(fd, *args):
            self._add("writeback", fd)
            return real_writeback(fd, *args)
        monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
        monkeypatch.setattr(storage_disk, "_start_writeback", writeback)

    def _recording(self, name, real):
        def call(*args):
            self._add(name, args[-1])
            return real(*args)
        return call

    def _add(self, name, about):
        path = os.readlink(f"/proc/self/fd/{about}") if isinstance(about, int) else str(about)
        file = os.path.basename(path) if path.startswith(self._root) else path
        self.taken.append(f"{name} {'temporary' if file.startswith('.tmp-') else file}")


@pytest.mark.skipif(storage_disk._start_writeback is None, reason="no sync_file_range here")
def test_the_complete_record_is_on_its_way_to_the_disk_before_the_media_is_linked(app, client, auth, monkeypatch):
    """So the media folder's fsync after the link commits the record's bytes too (ext4 and XFS journal them with
    it), and the record's own fsync finds nothing left to wait for: the completion waits for two journal commits (the
    link, the record's rename) instead of three. Nothing is made durable in another order than before: the link is
    fsynced before the record is renamed into place, which is fsynced before the answer."""
    data = random_blob(b"\x00\x00\x00\x18ftypmp42", 2 * MB + 10, seed=4)
    stream_id = create_stream(client, auth, data)
    chunks = [data[:MB], data[MB:2 * MB], data[2 * MB:]]
    for index in (0, 1):
        assert send_chunk(client, auth, stream_id, index, 3, chunks[index]).status_code == 200
    steps = Steps(monkeypatch, get_repository(app).orgs_root)

    answer = send_chunk(client, auth, stream_id, 2, 3, chunks[2])

    assert answer.status_code == 201
    media_name = answer.get_json()["path"].rsplit("/", 1)[1]
    completion = steps.taken[steps.taken.index("fdatasync ledger") + 1:]
    assert completion == [
        "create temporary", "writeback temporary",  # the complete record, written aside
        "replace .listed",  # the first upload into the folder: its listing (media_index), not fsynced
        f"link {media_name}", "fsync videos",  # the media path, durable
        f"replace {sha256(data)}",  # the deduplication index's entry, not fsynced
        "fsync temporary", "replace meta.json", f"fsync {stream_id}"]  # the complete record, durable


def test_an_upload_of_a_new_name_does_not_list_the_media_folder(app, client, auth, monkeypatch):
    """Which names have media without entries in the deduplication index is known from one listing of the folder,
    made by its first upload: before, every upload of a name never seen listed the whole folder, so the completing
    request cost time in proportion to the org's media."""
    for number in range(20):
        uploaded_path(client, auth, png(2000, seed=number), name=f"step {number}.png")
    listed = []
    real_scandir = os.scandir
    monkeypatch.setattr(os, "scandir", lambda path=".": listed.append(os.fspath(path)) or real_scandir(path))

    uploaded_path(client, auth, png(2000, seed=99), name="step 99.png")

    folder = str(get_repository(app).orgs_root / ORG / "media" / "images")
    assert folder not in listed


def test_media_without_entries_are_listed_once_and_hashed_once_per_name(app, client, auth, monkeypatch):
    """A data directory from before the index: its first upload lists the folder once; the earlier media of a name are
    read (hashed) by the first upload of that name only."""
    folder = get_repository(app).orgs_root / ORG / "media" / "images"
    folder.mkdir(parents=True)
    earlier = {f"{number:016x}-photo_{number % 3}.png": png(2000, seed=number) for number in range(1, 10)}
    for name, data in earlier.items():
        (folder / name).write_bytes(data)
    listed, hashed = [], []
    real_scandir, real_sha256 = os.scandir, media_index.file_sha256
    monkeypatch.setattr(os, "scandir", lambda path=".": listed.append(os.fspath(path)) or real_scandir(path))
    monkeypatch.setattr(media_index, "file_sha256", lambda path: hashed.append(path.name) or real_sha256(path))

    found = uploaded_path(client, auth, earlier[f"{4:016x}-photo_1.png"], name="photo 1.png")
    assert found == f"/api/v1/images/{4:016x}-photo_1.png"
    assert uploaded_path(client, auth, png(2000, seed=50), name="photo 1.png").rsplit("/", 1)[1] not in earlier
    uploaded_path(client, auth, png(2000, seed=51), name="photo 2.png")
    uploaded_path(client, auth, png(2000, seed=52), name="other.png")

    assert listed.count(str(folder)) == 1
    assert sorted(hashed) == sorted(name for name in earlier if name.endswith(("photo_1.png", "photo_2.png")))


def test_removed_files_are_freed_by_one_thread_and_a_linked_file_keeps_its_bytes(tmp_path):
    """Many large files removed at once (a sweep of expired streams) are freed one after the other by one thread."""
    big = [tmp_path / f"big-{number}" for number in range(5)]
    held = []
    for file in big:
        file.write_bytes(bytes(2 * MB))
        held.append(os.open(file, os.O_RDONLY))  # to watch the nameless file's size
    (tmp_path / "linked").write_bytes(bytes(2 * MB))
    os.link(tmp_path / "linked", tmp_path / "media")
    before = threading.active_count()

    for file in [*big, tmp_path / "linked"]:
        storage_disk.remove_file(file)

    assert sorted(os.listdir(tmp_path)) == ["media"]
    assert threading.active_count() <= before + 1
    deadline = time.monotonic() + 10
    while any(os.fstat(fd).st_size for fd in held) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [os.fstat(fd).st_size for fd in held] == [0] * len(big)
    for fd in held:
        os.close(fd)
    assert (tmp_path / "media").read_bytes() == bytes(2 * MB)
    with pytest.raises(FileNotFoundError):
        storage_disk.remove_file(big[0])


def test_the_freeing_thread_holds_a_bounded_number_of_files(tmp_path, monkeypatch):
    """Past FREE_QUEUE_LIMIT files waiting, the caller frees a file itself: the descriptors held stay bounded however
    many large files a sweep removes at once."""
    freer = storage_disk._BlockFreer()
    started = threading.Event()
    monkeypatch.setattr(freer, "_run", lambda descriptors: started.wait())  # a freeing thread that never gets to it
    files = []
    for number in range(storage_disk.FREE_QUEUE_LIMIT + 3):
        file = tmp_path / f"big-{number}"
        file.write_bytes(bytes(2 * MB))
        fd = os.open(file, os.O_WRONLY)
        os.unlink(file)
        files.append(fd)
        freer.free(fd)
    try:
        held = [fd for fd in files if fd_open(fd)]
        assert len(held) == storage_disk.FREE_QUEUE_LIMIT
    finally:
        started.set()
        for fd in held:
            os.close(fd)


def fd_open(fd):
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False
