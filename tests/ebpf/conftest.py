"""Each program is compiled once per test session; every test starts from empty maps."""
import pytest

from ebpf.impair import Impair
from ebpf.pin import Pin
from ebpf.reps import Reps
from ebpf.spray import Spray


@pytest.fixture(scope="session")
def _pin():
    with Pin.load() as prog:
        yield prog


@pytest.fixture
def pin(_pin):
    _pin.clear()
    return _pin


@pytest.fixture(scope="session")
def _reps():
    with Reps.load() as prog:
        yield prog


@pytest.fixture
def reps(_reps):
    _reps.clear()
    return _reps


@pytest.fixture(scope="session")
def _spray():
    with Spray.load() as prog:
        yield prog


@pytest.fixture
def spray(_spray):
    _spray.disable()
    return _spray


@pytest.fixture(scope="session")
def _impair():
    with Impair.load() as prog:
        yield prog


@pytest.fixture
def impair(_impair):
    _impair.disable()
    _impair.reset_counters()
    return _impair
