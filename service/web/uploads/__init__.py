"""Upload endpoints, one blueprint whose views live in modules by job: chunks (single uploads, chunked streams and
their chunks), tus (tus 1.0 on the same URLs) and media (serving what was uploaded)."""
from service.web.uploads import chunks, media, tus_views  # noqa: F401 (importing them puts their routes on the blueprint)
from service.web.uploads.blueprint import bp


def init_app(app):
    if not app.config.get("LOAD_ON_FIRST_REQUEST"):
        import service.web.uploads.schemas  # noqa: F401 (marshmallow now, so that no upload waits for it)
    app.register_blueprint(bp)
