"""Requests to a real server over HTTP (requests): chunked streams, tus, single uploads, processes."""
import base64

import requests

from support.media import SMALL_PNG, sha256
from support.tokens import HEADERS


# -- chunked streams --------------------------------------------------------------------------------------------------

def create_stream_over_http(url, data, name="clip.mp4", headers=HEADERS):
    """Open a chunked upload of `data` on the server at `url`; return its stream id."""
    response = requests.post(f"{url}/uploads", headers=headers, timeout=30, json={
        "destinationId": "stepVideo", "fileName": name, "fileSize": len(data), "sha": sha256(data)})
    assert response.status_code == 201, response.text
    return response.json()["streamId"]


def send_chunk_over_http(url, stream_id, index, total, chunk, timeout=60, with_sha=False, headers=HEADERS):
    """PATCH one chunk (with its own SHA-256 when `with_sha`); return (status, body)."""
    fields = {"chunkIndex": index, "totalChunks": total}
    if with_sha:
        fields["sha"] = sha256(chunk)
    response = requests.patch(f"{url}/uploads/{stream_id}", headers=headers, timeout=timeout,
                              data=fields, files={"file": ("blob", chunk)})
    return response.status_code, response.json()


# -- single uploads through a requests session (service.testing's ServiceSession) -------------------------------------

def upload_png(session, name="pic.png"):
    """Upload SMALL_PNG as a single upload through `session`, which must be accepted; return its media path."""
    response = session.post("/uploads", files={"file": (name, SMALL_PNG)}, data={"destinationId": "stepImage"},
                            timeout=10)
    assert response.status_code == 201, response.text
    return response.json()["path"]


# -- tus --------------------------------------------------------------------------------------------------------------

TUS_HEADERS = dict(HEADERS, **{"Tus-Resumable": "1.0.0"})
TUS_BODY_TYPE = "application/offset+octet-stream"


def tus_metadata(**fields):
    return ",".join(f"{key} {base64.b64encode(value.encode()).decode()}" for key, value in fields.items())


def tus_create(url, data, name="clip.mp4"):
    """Create a tus upload of `data` (a video, its SHA-256 in the metadata) at a server; return its id."""
    response = requests.post(url + "/uploads", timeout=30, headers=dict(TUS_HEADERS, **{
        "Upload-Length": str(len(data)),
        "Upload-Metadata": tus_metadata(destinationId="stepVideo", filename=name, sha256=sha256(data))}))
    assert response.status_code == 201, response.text
    return response.headers["Location"].rsplit("/", 1)[1]


def tus_patch(url, upload_id, offset, body):
    return requests.patch(f"{url}/uploads/{upload_id}", data=body, timeout=60, headers=dict(
        TUS_HEADERS, **{"Upload-Offset": str(offset), "Content-Type": TUS_BODY_TYPE}))


def tus_offset(url, upload_id):
    response = requests.head(f"{url}/uploads/{upload_id}", headers=TUS_HEADERS, timeout=30)
    assert response.status_code == 200, response.headers
    return int(response.headers["Upload-Offset"])


# -- processes --------------------------------------------------------------------------------------------------------

def upsert_over_http(url, identifier, name, timeout=30):
    """One processCreate of a one-step process named `name`; return "CREATED" or "UPDATED" when acknowledged, else
    None."""
    body = {"id": identifier, "name": name, "steps": [{"id": "step_1", "name": name}]}
    response = requests.post(f"{url}/graph/v2", headers=HEADERS, timeout=timeout, json={
        "query": "mutation($input: ProcessCreateInput!) { processCreate(input: $input) }",
        "variables": {"input": {"process": body}}})
    if response.status_code != 200:
        return None
    return (response.json().get("data") or {}).get("processCreate")


def read_process_over_http(url, identifier):
    """name, revision and step names of a stored process."""
    response = requests.post(f"{url}/graph/v2", headers=HEADERS, timeout=30, json={
        "query": "query($id: String!) { process(id: $id) { name revision steps { name } } }",
        "variables": {"id": identifier}})
    assert response.status_code == 200, response.text
    return response.json()["data"]["process"]
