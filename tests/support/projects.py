"""Running pytest in a project of its own, as an integrator's repository runs it.

This repository's test extras install pytest plugins an integrator's project does not have (hypothesis,
schemathesis, anyio, xdist). Loaded in every nested pytest, they cost 3.5 CPU s of its 4 s start-up here, and they
are not what the nested run tests: it runs with them off, the service's own plugin still loaded from its entry point.
"""
FOREIGN_PLUGINS = ("hypothesispytest", "schemathesis", "anyio", "xdist", "xdist.looponfail")
WITHOUT_FOREIGN_PLUGINS = tuple(option for name in FOREIGN_PLUGINS for option in ("-p", f"no:{name}"))
