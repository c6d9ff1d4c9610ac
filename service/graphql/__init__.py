"""GraphQL endpoint (to be built)."""


def init_app(app):
    pass
