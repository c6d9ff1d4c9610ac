"""Where an input names media: the `image`, `primaryImage` and `video` objects of a process, at any depth. The server
checks and collects media by them; the client finds the local files a push or an import must upload by them."""

MEDIA_FIELDS = ("image", "primaryImage", "video")


def media_references(value, field="process"):
    """Yield (key, holder, field path) for each `image`/`primaryImage`/`video` object with a path, at any depth.

    `holder` is the object itself (`{"path": ...}`), so a caller may replace the path in place.
    """
    if isinstance(value, dict):
        for key, child in value.items():
            if key in MEDIA_FIELDS and isinstance(child, dict) and isinstance(child.get("path"), str):
                yield key, child, f"{field}.{key}.path"
            else:
                yield from media_references(child, f"{field}.{key}")
    elif isinstance(value, list):
        for position, child in enumerate(value):
            yield from media_references(child, f"{field}[{position}]")


def referenced_media(document):
    """Every media path a process document refers to."""
    return {holder["path"] for _, holder, _ in media_references(document)}
