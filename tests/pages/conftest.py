"""What the page tests share: one sample store per test process, copied for each module.

Building the sample run classifies 30 views with three real models (about 20 s on this 2-core
machine); every page-test module used to build its own. Now each process builds it once and
each module gets a copy of the whole store (runs and caches, file times kept, so the stored
fingerprints still match): a module may add or delete runs without touching another's."""
import os
import shutil

import pytest


@pytest.fixture(scope="session")
def sample_store(tmp_path_factory):
    """A store with the sample run built (real models, real predictions); never modified."""
    home = tmp_path_factory.mktemp("sample_store")
    old = os.environ.get("WILDLENS_HOME")
    os.environ["WILDLENS_HOME"] = str(home)
    try:
        from core.runstore import RunStore
        from wildlens.sample import ensure_sample_run

        ensure_sample_run(RunStore(home))
    finally:
        if old is None:
            os.environ.pop("WILDLENS_HOME", None)
        else:
            os.environ["WILDLENS_HOME"] = old
    return home


def copy_store(sample_store, tmp_path_factory, name: str):
    home = tmp_path_factory.mktemp(name)
    shutil.copytree(sample_store, home, dirs_exist_ok=True, symlinks=True)  # copy2: file times kept
    return home
