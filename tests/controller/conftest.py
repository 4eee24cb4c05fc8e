"""fabric.p4 compiled once per run for the controller tests that drive p4switch processes."""
import pytest

from tests.fabricd_process import compile_fabric


@pytest.fixture(scope="session")
def compiled_fabric(tmp_path_factory):
    """(p4info path, device config path, Pipeline) of fabric.p4, compiled by p4switch."""
    return compile_fabric(tmp_path_factory.mktemp("fabric"))
