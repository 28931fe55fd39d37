"""A durable process through the processor helper, and the event stream."""
import threading
import time
import uuid

import pytest

from docket_client import Conflict, DocketError, Processor, ProcessorFailure, Result, timer


@pytest.fixture
def processor_url():
    proc = Processor()

    @proc.init
    def init(req):
        return Result(events=[{"created": req.args}], aux_state={"paid": 0}, response="created",
                      action=timer("1s"))

    @proc.call
    async def call(req):  # async handlers work too
        if req.args.get("fail"):
            raise ProcessorFailure({"reason": "card declined"})
        paid = req.aux_state["paid"] + req.args["amount"]
        return Result(events=[{"paid": req.args["amount"]}], aux_state={"paid": paid},
                      response={"paid": paid, "seen": len(req.events)})

    @proc.timeout
    def on_timeout(req):
        return Result(events=["reminded"], metadata={"reminded": True})

    @proc.repair
    def repair(req):
        return Result(response="repaired")

    srv = proc.server(port=0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/"
    srv.shutdown()


def test_a_process_through_the_helper(client, processor_url):
    ns = f"py-{uuid.uuid4().hex[:10]}"
    client.put_namespace(ns, processor_url, process_step_timeout="10s")
    assert client.init_process(ns, "order-1", {"sku": "x"}) == "created"
    with pytest.raises(Conflict) as e:
        client.init_process(ns, "order-1", {})
    assert e.value.code == "process_exists"
    assert client.call_process(ns, "order-1", {"amount": 5}) == {"paid": 5, "seen": 1}
    assert client.call_process(ns, "order-1", {"amount": 7}) == {"paid": 12, "seen": 2}

    def reminded():
        p = client.get_process(ns, "order-1")
        return [e["payload"] for e in p["history"]] if p["process"].get("metadata") == {"reminded": True} else None
    end = time.monotonic() + 20
    while not (events := reminded()):
        assert time.monotonic() < end, client.get_process(ns, "order-1")
        time.sleep(0.1)
    assert events == [{"created": {"sku": "x"}}, {"paid": 5}, {"paid": 7}, "reminded"]
    with pytest.raises(DocketError) as e:
        client.call_process(ns, "order-1", {"fail": True})
    assert e.value.code == "processor_error" and e.value.status == 422
    assert client.get_process(ns, "order-1")["process"]["status"] == "error"
    client.repair_process(ns, "order-1", {})
    assert client.get_process(ns, "order-1")["process"]["status"] == "running"
    assert client.trace_process(ns, "order-1")

    # The notifications of all this, as an iterator.
    seen = []
    for n in client.events(namespace=ns):
        seen.append(n["kind"])
        if n["kind"] == "repaired":
            break
    assert seen[0] == "created" and seen.count("event") == 4 and "failed" in seen
