"""What an app or a server holds: the files of a data directory, or on the shared backend the rows of its index and
the objects of its bucket; and storing media as an upload would."""
import hashlib
import os
import tempfile
from pathlib import Path

from support.media import MP4, PNG


def snapshot(directory):
    """{relative path: SHA-256} of every file under `directory`, to show a request changed nothing. Without the note a
    checkpoint of the write-ahead log writes in the background (service.storage.files.checkpoints), a while after the
    writes before the request."""
    files = {}
    for root, _dirs, names in os.walk(directory):
        for name in names:
            if os.path.basename(root) == "wal" and (name == "checkpoint" or name.startswith(".tmp-")):
                continue
            path = os.path.join(root, name)
            with open(path, "rb") as handle:
                files[os.path.relpath(path, directory)] = hashlib.sha256(handle.read()).hexdigest()
    return files


def media_dir(data_dir, segment, org="default"):
    """Where the media of one segment ("images" or "videos") of one org are stored under a data directory."""
    return Path(data_dir) / "orgs" / org / "media" / segment


def media_files(data_dir, *segments, org="default"):
    """The stored media files of an org (of the given segments, else images and videos), sorted."""
    directories = [media_dir(data_dir, segment, org) for segment in segments or ("images", "videos")]
    return sorted(path for directory in directories if directory.exists() for path in directory.iterdir())


def store_media(repo, org, path, data=None):
    """Publish `data` (by default the signature of the path's kind) at a media path, as an upload would, on either
    backend."""
    if data is None:
        data = PNG if "/images/" in path else MP4
    with tempfile.TemporaryDirectory() as directory:
        source = Path(directory) / "media"
        source.write_bytes(data)
        assert repo.media.publish(org, path, source, hashlib.sha256(data).hexdigest()) == path, f"{path} is taken"


def stored_names(app, org, area, *under):
    """What an org has stored under `area` ("media", optionally "images" or "videos"; or "streams", optionally a stream
    id), to check that a request left exactly what it should. File backend: the names of the files there. Shared
    backend: media names in the index, or ids of stream rows, plus the key of every object of the org in that area
    that the index does not name, and of every file left in the node's spool (both leftovers)."""
    from service.storage import get_repository

    repo = get_repository(app)
    if not hasattr(repo, "database"):
        root = repo.orgs_root.joinpath(org, area, *under)
        # The media deduplication index (`media/.same`) is bookkeeping that stays, not something a request left.
        return sorted(path.name for path in root.rglob("*") if path.is_file()
                      and ".same" not in path.relative_to(root).parts) if root.exists() else []
    with repo.database.transaction() as connection:
        if area == "media":
            rows = connection.execute("SELECT path, object_key FROM media WHERE org = %s", (org,)).fetchall()
            folder = f"/{under[0]}/" if under else "/"
            names = [path.rsplit("/", 1)[1] for path, _ in rows if folder in path]
            indexed = {key for _, key in rows}
        else:
            rows = connection.execute("SELECT id FROM streams WHERE org = %s", (org,)).fetchall()
            names = [stream_id for (stream_id,) in rows if not under or stream_id == under[0]]
            indexed = set()
    leftovers = [key for key in repo.objects.keys(f"{area}/{org}/{'/'.join(under)}") if key not in indexed]
    spooled = [path.name for path in repo.spool.iterdir()]
    return sorted(names + leftovers + spooled)


def media_names_of(server, segment="videos", org="default"):
    """Names of the media a GunicornServer holds for an org under /api/v1/<segment>/, on either backend; on the shared
    one also the key of every object of the org's media that the index does not name (a leftover)."""
    settings = getattr(server, "settings", {})
    if not settings.get("DATABASE_URL"):
        return [path.name for path in media_files(server.data_dir, segment, org=org)]
    import psycopg

    from service.storage.shared.objects import ObjectStore

    with psycopg.connect(settings["DATABASE_URL"]) as connection:
        rows = connection.execute("SELECT path, object_key FROM media WHERE org = %s", (org,)).fetchall()
    names = [path.rsplit("/", 1)[1] for path, _ in rows if path.startswith(f"/api/v1/{segment}/")]
    indexed = {key for _, key in rows}
    objects = ObjectStore(settings["S3_BUCKET"], settings["S3_PREFIX"])
    return sorted(names + [key for key in objects.keys(f"media/{org}/") if key not in indexed])


def stream_ids(server, org="default"):
    """Ids of every stream a GunicornServer holds for an org, on either backend."""
    settings = getattr(server, "settings", {})
    if settings.get("DATABASE_URL"):
        import psycopg

        with psycopg.connect(settings["DATABASE_URL"]) as connection:
            return {stream_id for (stream_id,) in connection.execute("SELECT id FROM streams WHERE org = %s", (org,))}
    streams = server.data_dir / "orgs" / org / "streams"
    return {path.name for path in streams.iterdir() if path.is_dir()} if streams.exists() else set()
