"""Upload requests over the Flask test client."""
import io

from support.media import sha256


def upload(client, headers, data, destination="stepImage", name="photo.png", **fields):
    """POST one file as a single upload; return the response."""
    form = {"destinationId": destination, "file": (io.BytesIO(data), name), **fields}
    return client.post("/uploads", headers=headers, data=form)


def uploaded_path(client, headers, data, destination="stepImage", name="photo.png"):
    """POST one file as a single upload that must be accepted; return its media path."""
    response = upload(client, headers, data, destination, name)
    assert response.status_code == 201, response.get_json()
    return response.get_json()["path"]


def create_stream(client, headers, data, destination="stepVideo", name="clip.mp4"):
    """Open a chunked upload of `data`; return its stream id."""
    response = client.post("/uploads", headers=headers, json={
        "destinationId": destination, "fileName": name, "fileSize": len(data), "sha": sha256(data)})
    assert response.status_code == 201, response.get_json()
    return response.get_json()["streamId"]


def send_chunk(client, headers, stream_id, index, total, chunk, **fields):
    """PATCH one chunk of a stream; return the response."""
    form = {"chunkIndex": str(index), "totalChunks": str(total), "file": (io.BytesIO(chunk), "blob"), **fields}
    return client.patch(f"/uploads/{stream_id}", headers=headers, data=form)


def send_file_first(client, headers, stream_id, index, total, chunk):
    """A chunk whose file part comes before its fields: its index is not known while it arrives."""
    boundary = "file-first"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"blob\"\r\n\r\n".encode()
            + chunk + f"\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"chunkIndex\"\r\n\r\n{index}\r\n"
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"totalChunks\"\r\n\r\n{total}\r\n"
            f"--{boundary}--\r\n".encode())
    return client.patch(f"/uploads/{stream_id}", headers=headers, data=body,
                        content_type=f"multipart/form-data; boundary={boundary}")


def stream_status(client, headers, stream_id):
    """GET /uploads/<id>, which must answer 200; return its JSON."""
    response = client.get(f"/uploads/{stream_id}", headers=headers)
    assert response.status_code == 200
    return response.get_json()


def expire_every_stream(repository):
    """Make every stream of a repository idle past its expiry: on the file backend by moving its clock on, on the shared
    backend by moving the streams' last touch back by the database's clock, the one clock of expiry there (CONTRACT
    13: no node's clock can expire a stream)."""
    import time

    if hasattr(repository, "database"):
        with repository.database.transaction() as connection:
            connection.execute("UPDATE streams SET touched_at = touched_at - ttl - 1")
    else:
        later = time.time() + repository.streams.ttl_seconds + 1
        repository.clock = repository.streams.clock = lambda: later
