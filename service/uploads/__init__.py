"""Upload endpoints (to be built)."""


def init_app(app):
    pass
