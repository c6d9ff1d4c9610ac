"""The Client: GraphQL upserts and reads, uploads, downloads and push, over one Transport."""
import re

from service.client import push as push_module
from service.client.errors import ClientError
from service.client.transport import Repeat, Transport, error_message
from service.client.uploader import DEFAULT_CHUNK_SIZE, DEFAULT_PARALLEL, Uploader

READ_BLOCK = 1024 * 1024
# A GraphQL document whose (first) operation is a mutation; comments and whitespace may come first.
MUTATION = re.compile(r"\A(?:\s|,|#[^\n]*)*mutation\b")

PROCESS_FIELDS = """
  id name description partNumber startBehavior endBehavior autoSignoutMinutes
  image { path }
  createdAt updatedAt revision
  steps {
    id name
    instructionText { ...TextFields }
    primaryImage { path }
    video { path title autoplay loop }
    actions {
      id kind torque
      description { ...TextFields }
      inputParts { part { ...PartFields } quantity }
      outputPart { ...PartFields }
      scanPart { ...PartFields }
      toolUsed { id name description }
      measurement { measured units min max }
      confirmation { confirmed }
    }
    alerts { severity title text }
    notes { title text }
    torqueGroups { tool { id name description } actions { id } }
  }
  billOfMaterials { part { ...PartFields } quantity }
"""
PROCESS_FRAGMENTS = """
fragment PartFields on Part { id description serial { id name pattern } }
fragment TextFields on StyledText { text bold italic underline color }
"""
PRODUCT_FIELDS = ("id name finalProcessId dependencies { processId upstreamProcessId quantity } "
                  "createdAt updatedAt revision")
STATION_FIELDS = "id name createdAt updatedAt revision"
READS = {
    # kind: (one, page, fields, fragments)
    "process": ("process", "processes", PROCESS_FIELDS, PROCESS_FRAGMENTS),
    "product": ("product", "products", PRODUCT_FIELDS, ""),
    "station": ("station", "stations", STATION_FIELDS, ""),
}


class Client:
    """A session with one service: `Client("http://127.0.0.1:8000", token)`.

    `timeout` is per request (connect, then each wait for the answer); failed requests are retried up to
    `retries` times with waits of `backoff` * 1, 2, 4... seconds, as service.client.transport says
    (mutations only when they never reached the service). `session_factory` makes each
    requests.Session (one for the calling thread, one per upload thread). Use a Client from one
    thread; give other threads their own Client.
    """

    def __init__(self, base_url, token, timeout=60.0, retries=4, backoff=0.5, session_factory=None, state_dir=None):
        self.transport = Transport(base_url, token, timeout=timeout, retries=retries, backoff=backoff,
                                   session_factory=session_factory)
        self.uploader = Uploader(self.transport, state_dir=state_dir)

    @property
    def base_url(self):
        return self.transport.base_url

    @property
    def session(self):
        """The requests.Session of the calling thread (upload threads have their own)."""
        return self.transport.session

    def copy(self):
        """A new Client of the same service with the same settings, for another thread."""
        transport = self.transport
        return Client(transport.base_url, transport.token, timeout=transport.timeout, retries=transport.retries,
                      backoff=transport.backoff, session_factory=transport.session_factory,
                      state_dir=self.uploader.state_dir)

    def close(self):
        """Close the connections of the calling thread's session (upload threads close theirs when done)."""
        self.transport.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    # -- GraphQL --------------------------------------------------------------------------------

    def graphql(self, query, variables=None):
        """Run a GraphQL document; return `data`, or raise ClientError with every error message.

        A mutation is sent again only if it never reached the service (see service.client.transport).
        """
        repeat = Repeat.UNSAFE if MUTATION.match(query) else Repeat.SAFE
        response = self.transport.request("POST", "/graph/v2", repeat, json={"query": query,
                                                                            "variables": variables or {}})
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise ClientError(response.status_code, error_message(response))
        errors = body.get("errors")
        if errors:
            first = errors[0] if isinstance(errors[0], dict) else {}
            extensions = first.get("extensions") or {}
            message = "; ".join(str(e.get("message", e)) if isinstance(e, dict) else str(e) for e in errors)
            raise ClientError(response.status_code, message, field=extensions.get("field"),
                              code=extensions.get("code"), extensions=extensions, errors=errors)
        if response.status_code >= 400 or "data" not in body:
            raise ClientError(response.status_code, error_message(response))
        return body["data"]

    def _upsert(self, kind, obj, if_revision=None, dry_run=False):
        mutation = f"{kind}Create"
        input_type = mutation[0].upper() + mutation[1:] + "Input"
        # ifRevision and dryRun are sent only when asked for: servers before CONTRACT 10 know neither.
        declared, passed, variables = _lifecycle_arguments(if_revision, dry_run)
        query = f"mutation($input: {input_type}!{declared}) {{ {mutation}(input: $input{passed}) }}"
        return self.graphql(query, {"input": {kind: obj}, **variables})[mutation]

    def create_process(self, process, if_revision=None, dry_run=False):
        """Create or update a process; return "CREATED" or "UPDATED". `if_revision`: only if the stored revision is
        that one (0: only if there is none), else ClientError with code CONFLICT and the current revision in
        `extensions["revision"]`. `dry_run`: check everything, store nothing, answer as the write would."""
        return self._upsert("process", process, if_revision, dry_run)

    def create_product(self, product, if_revision=None, dry_run=False):
        """Create or update a product; return "CREATED" or "UPDATED" (options as create_process)."""
        return self._upsert("product", product, if_revision, dry_run)

    def create_station(self, station, if_revision=None, dry_run=False):
        """Create or update a station; return "CREATED" or "UPDATED" (options as create_process)."""
        return self._upsert("station", station, if_revision, dry_run)

    def create(self, kind, obj, if_revision=None, dry_run=False):
        """create_process, create_product or create_station by `kind` ("process", "product", "station")."""
        return self._upsert(_kind(kind), obj, if_revision, dry_run)

    def delete(self, kind, object_id, if_revision=None, dry_run=False):
        """Delete a process, product or station; return "DELETED". ClientError with code NOT_FOUND for an unknown
        or already deleted id, CONFLICT for a process products refer to (`extensions["products"]`) or another
        revision than `if_revision`."""
        mutation = f"{_kind(kind)}Delete"
        declared, passed, variables = _lifecycle_arguments(if_revision, dry_run)
        query = f"mutation($id: String!{declared}) {{ {mutation}(id: $id{passed}) }}"
        return self.graphql(query, {"id": object_id, **variables})[mutation]

    def restore(self, kind, object_id, revision, if_revision=None, dry_run=False):
        """Store that past revision of an object's input as its newest (a deleted object too); return "CREATED"
        (it did not exist) or "UPDATED". ClientError NOT_FOUND for an unknown revision."""
        mutation = f"{_kind(kind)}Restore"
        declared, passed, variables = _lifecycle_arguments(if_revision, dry_run)
        query = (f"mutation($id: String!, $revision: Int!{declared}) "
                 f"{{ {mutation}(id: $id, revision: $revision{passed}) }}")
        return self.graphql(query, {"id": object_id, "revision": revision, **variables})[mutation]

    def history(self, kind, object_id, first=100, after=None):
        """One page of an object's revisions, newest first: [{"revision", "savedAt", "change"}], `after` the last
        revision number of the previous page. Empty for an unknown id."""
        field = f"{_kind(kind)}History"
        query = (f"query($id: String!, $first: Int, $after: Int) {{ {field}(id: $id, first: $first, after: $after) "
                 "{ revision savedAt change } }")
        return self.graphql(query, {"id": object_id, "first": first, "after": after})[field]

    def list_inputs(self, kind, first=100, after=None):
        """One page of objects of `kind` ordered by id, each as {"id", "revision", "input"}: `input` is the stored
        input exactly as the create mutation takes it."""
        page = READS[_kind(kind)][1]
        query = (f"query($first: Int, $after: String) {{ {page}(first: $first, after: $after) "
                 "{ id revision input } }")
        return self.graphql(query, {"first": first, "after": after})[page]

    def _get(self, kind, object_id, revision=None):
        one, _, fields, fragments = READS[kind]
        if revision is None:
            query = f"query($id: String!) {{ {one}(id: $id) {{ {fields} }} }} {fragments}"
            return self.graphql(query, {"id": object_id})[one]
        query = (f"query($id: String!, $revision: Int) {{ {one}(id: $id, revision: $revision) {{ {fields} }} }} "
                 f"{fragments}")
        return self.graphql(query, {"id": object_id, "revision": revision})[one]

    def _list(self, kind, first, after):
        _, page, fields, fragments = READS[kind]
        query = (f"query($first: Int, $after: String) {{ {page}(first: $first, after: $after) {{ {fields} }} }} "
                 f"{fragments}")
        return self.graphql(query, {"first": first, "after": after})[page]

    def get_process(self, process_id, revision=None):
        """The stored process with its derived data, or None when the org has no such process; with `revision`, as
        it was then (None when that revision does not exist or was pruned)."""
        return self._get("process", process_id, revision)

    def get_product(self, product_id, revision=None):
        """The stored product, or None when the org has no such product (`revision` as get_process)."""
        return self._get("product", product_id, revision)

    def get_station(self, station_id, revision=None):
        """The stored station, or None when the org has no such station (`revision` as get_process)."""
        return self._get("station", station_id, revision)

    def list_processes(self, first=100, after=None):
        """One page of processes ordered by id: `first` (0 to 1000) after the id `after`."""
        return self._list("process", first, after)

    def list_products(self, first=100, after=None):
        """One page of products ordered by id, paged like list_processes."""
        return self._list("product", first, after)

    def list_stations(self, first=100, after=None):
        """One page of stations ordered by id, paged like list_processes."""
        return self._list("station", first, after)

    # -- uploads --------------------------------------------------------------------------------

    def stream_status(self, stream_id):
        """State of a chunked upload stream (`receivedChunks`, `state`, `path` when complete, ...)."""
        return self.uploader.stream_status(stream_id)

    def download(self, media_path, destination):
        """Stream the media at `media_path` into `destination` (a file name or a binary file); return its size."""
        response = self.transport.request("GET", media_path, Repeat.SAFE, stream=True)
        with response:
            if response.status_code >= 400:
                raise ClientError(response.status_code, error_message(response))
            if hasattr(destination, "write"):
                return _copy(response, destination)
            with open(destination, "wb") as handle:
                return _copy(response, handle)

    def upload(self, path, destination=None, chunk_size=DEFAULT_CHUNK_SIZE, parallel=DEFAULT_PARALLEL,
               progress=None, resumed=None, state_dir=None):
        """Upload a file to a destination and return its media path.

        With no `destination`, the file's content decides: PNG or JPEG -> stepImage, MP4 -> stepVideo,
        GIF -> stepVideoGif (ValueError for anything else). Files up to 10 MB go in one request;
        larger ones through a chunked stream sending `parallel` chunks at a time, each thread with its
        own session, resumable: running the same upload again sends only what the server lacks.
        `progress(n)` is called in the calling thread with file bytes as they are read into requests
        (negative when a failed attempt takes them back); on a resume the bytes the server already
        holds go to `resumed(n)` if given, else to `progress`, before anything is sent. `state_dir`
        keeps the resume records (default ~/.cache/wis/uploads). ValueError for an unknown destination,
        a chunk size outside 1 byte..10 MB or `parallel` < 1; OSError for a file that cannot be read.
        """
        return self.uploader.upload(path, destination, chunk_size=chunk_size, parallel=parallel,
                                    progress=progress, resumed=resumed, state_dir=state_dir)

    def push(self, paths, on_result=None, progress_for=None, dry_run=False, **upload_options):
        """Create or update the stations, processes and products in JSON/YAML files; see service.client.push.

        Returns a PushResult per entry, also passed to `on_result` as each is known. `upload_options`
        (chunk_size, parallel, state_dir) go to the upload of each local media file; `progress_for(file)`
        may return a context manager giving that upload's `progress`/`resumed` callbacks. `dry_run`: write
        nothing (local media checked, not uploaded; objects sent with dryRun).
        """
        return push_module.push(self, paths, on_result=on_result, upload_options=upload_options,
                                progress_for=progress_for, dry=dry_run)


def _kind(kind):
    if kind not in READS:
        raise ValueError(f"not a kind of object: {kind!r} (process, product or station)")
    return kind


def _lifecycle_arguments(if_revision, dry_run):
    """(variable declarations, arguments, variables) for the optional ifRevision and dryRun of a mutation."""
    declared, passed, variables = "", "", {}
    if if_revision is not None:
        declared, passed, variables["ifRevision"] = ", $ifRevision: Int", ", ifRevision: $ifRevision", if_revision
    if dry_run:
        declared += ", $dryRun: Boolean"
        passed += ", dryRun: $dryRun"
        variables["dryRun"] = True
    return declared, passed, variables


def _copy(response, handle):
    written = 0
    for block in response.iter_content(READ_BLOCK):
        handle.write(block)
        written += len(block)
    return written
