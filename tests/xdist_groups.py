"""Under pytest-xdist (`make test` runs `-n 2 --dist loadgroup`) the tests that share a module-scoped fixture of their
own module run on one worker, so that fixture is built once, not once per worker (the conformance sample alone is
2.5 minutes). tests/conftest.py imports the hook; tests/test_lock.py runs it in a pytest of its own."""

import pytest


def _module_fixtures(item) -> bool:
    """Whether the test uses a module-scoped fixture of its own module (a traced sample, a subprocess, a browser:
    the slow set-up a module shares)."""
    info = getattr(item, "_fixtureinfo", None)
    for defs in (info.name2fixturedefs.values() if info else ()):
        for fd in defs:
            if fd.scope == "module" and getattr(fd.func, "__module__", None) == item.module.__name__:
                return True
    return False


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which turns the mark into the node id's group suffix
def pytest_collection_modifyitems(config, items):
    for item in items:
        if isinstance(item, pytest.Function) and _module_fixtures(item):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
