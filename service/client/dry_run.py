"""Checking objects with `dryRun: true` before what they refer to exists on the server (`wis push --dry-run`,
`wis import --dry-run`): the media a real run would upload first, and the processes it would create before the
products that name them, are not there during a dry run, so the server's errors on exactly the fields that name them
are expected and left out; every other error is reported as it is (an object with both kinds fails with the others
only, as the real run would).

What a dry run promises: every object passes all of the server's checks except that the media and processes the run
would create first exist (the media themselves are checked locally: format, destination, size limit and, from an
archive, SHA-256). It cannot promise that an upload will not fail (the server's disk, a limit changed meanwhile) nor
that nobody changes the org between the dry run and the real one.
"""
from typing import NamedTuple

from service.client.errors import ClientError
from service.interface.media_references import media_references
from service.interface import DESTINATIONS
from service.client.uploader import FORMAT_DESTINATIONS, file_format


class Checked(NamedTuple):
    outcome: str  # what the write would answer, or "VALID" when that depends on what is created first
    pending: int  # how many of its fields name media or processes the run creates first


def media_fields(kind, obj, paths):
    """The input fields of `obj` (a process) that name one of `paths`, as the server names fields."""
    if kind != "process":
        return set()
    return {field for _, holder, field in media_references(obj) if holder["path"] in paths}


def process_fields(kind, obj, process_ids):
    """The input fields of `obj` (a product) that name one of `process_ids`."""
    if kind != "product":
        return set()
    fields = {"product.finalProcessId"} if obj.get("finalProcessId") in process_ids else set()
    for position, edge in enumerate(obj.get("dependencies") or []):
        for key in ("processId", "upstreamProcessId"):
            if isinstance(edge, dict) and edge.get(key) in process_ids:
                fields.add(f"product.dependencies[{position}].{key}")
    return fields


def check(client, kind, obj, pending_fields):
    """Send `obj` with dryRun; Checked when it passes, or fails only on `pending_fields`; else the ClientError, of the
    errors on other fields only: those on `pending_fields` are what the real run makes pass by creating them first."""
    try:
        return Checked(client.create(kind, obj, dry_run=True), 0)
    except ClientError as error:
        if not pending_fields or not error.errors:
            raise
        others = [item for item in error.errors if _field(item) not in pending_fields]
        if not others:
            return Checked("VALID", len(error.errors))
        if len(others) == len(error.errors):
            raise
        raise ClientError.of_graphql(error.status, others) from None


def _field(graphql_error):
    return (graphql_error.get("extensions") or {}).get("field") if isinstance(graphql_error, dict) else None


def check_media_file(file, kind=None):
    """The destination a local media file would be uploaded to, checked as the server would (format, kind of the
    field holding it, size limit); ValueError otherwise."""
    fmt = file_format(file)
    destination = FORMAT_DESTINATIONS.get(fmt)
    if destination is None or (kind is not None and DESTINATIONS[destination].kind != kind):
        as_kind = f" as {kind}" if kind else ""
        raise ValueError(f"{file}: not a media file the service accepts{as_kind} ({fmt or 'unknown format'})")
    size = file.stat().st_size
    if size > DESTINATIONS[destination].limit:
        raise ValueError(f"{file}: {size} bytes, more than the {DESTINATIONS[destination].limit} {destination} accepts")
    return destination
