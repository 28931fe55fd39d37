"""The servers come from clients/test.sh: DOCKET_TEST_SERVERS="sqlite=URL,postgres=URL,mysql=URL",
DOCKET_TEST_TLS_URL / DOCKET_TEST_CA / DOCKET_TEST_TOKEN for the TLS + token one. Each test
works its own queue (and namespace), so tests do not see each other's tasks."""
import os
import uuid

import pytest

from docket_client import AsyncClient, Client


def _servers():
    raw = os.environ.get("DOCKET_TEST_SERVERS")
    if not raw:
        pytest.exit("run these tests through clients/test.sh (it starts the servers)", 2)
    return dict(item.split("=", 1) for item in raw.split(","))


SERVERS = _servers()


@pytest.fixture(params=sorted(SERVERS))
def server(request):
    return SERVERS[request.param]


@pytest.fixture
def client(server):
    with Client(server) as c:
        yield c


@pytest.fixture
def aclient_factory(server):
    return lambda: AsyncClient(server)


@pytest.fixture
def queue():
    return f"py-{uuid.uuid4().hex[:12]}"
