"""The worker protocol: every record survives the wire, and what is not the protocol is refused."""

from __future__ import annotations

import json

import pytest

from xtat.core.status import TrialStatus
from xtat.runner import protocol as p
from xtat.runner.timing import TimingPolicy
from xtat.runner.verify import Tolerance

CHECK = p.Check(False, 1.5, None, "output 0: 3 elements beyond the bound",
                ({"rule": "element", "output": 0, "index": [1, 2]},), {"excess": 2.0, "norm": 0.1})
REQUESTS = [
    p.LoadRun("/tmp/run"), p.Compile("c1", "program.bin", {"xla_cpu_prefer_vector_width": 256}, is_default=False),
    p.Deploy("c1", "program.bin", {}, Tolerance(1e-3, None), is_default=True), p.ReferenceOutputs("default"),
    p.Measure("c1", Tolerance(), TimingPolicy(min_sample_s=0.01), is_default=True),
    p.Prepare("c1", Tolerance(), TimingPolicy(samples=3, contender_pairs=9)),
    p.Measure("c1", Tolerance(), TimingPolicy()), p.Verify("c1", p.InputSet.VERIFY, Tolerance()),
    p.Calibrate("c1", TimingPolicy()), p.Sample("c1", 17), p.Release(("c1", "c2")), p.Exit(),
]
REPLIES = [
    p.Failed(TrialStatus.WRONG_RESULT, CHECK.mismatch, CHECK), p.Failed(TrialStatus.OOM, "RESOURCE_EXHAUSTED"),
    p.Loaded((p.InputSet.MAIN, p.InputSet.VERIFY), ("main",)),
    p.Compiled(0.5, "ab" * 32, {"hlo": {"ops": {"dot": 3}}}, cached=True),
    p.Deployed(0.7), p.Referenced({"outputs": {}}), p.Timed((1e-3, 1.1e-3, 0.9e-3), 10, 1e-3, (0.9e-3, 1.1e-3),
                                                           0.2, False, p.Check(True)),
    p.Timed((1e-3, 1.1e-3), 10, 1e-3, (0.9e-3, 1.1e-3), 0.2, True, p.Check(True), (1.2e-3, 1.3e-3)),
    p.Prepared(12, p.Check(True)),
    p.Verified(p.Check(True, 0.0, 0.0)), p.Calibrated(40), p.Sampled(0.021), p.Done(),
]


@pytest.mark.parametrize("request_", REQUESTS, ids=lambda r: type(r).__name__)
def test_every_request_survives_the_wire(request_):
    assert p.decode_request(p.encode(request_)) == request_


@pytest.mark.parametrize("reply", REPLIES, ids=lambda r: type(r).__name__)
def test_every_reply_survives_the_wire_with_its_types(reply):
    decoded = p.decode_reply(p.encode(reply))
    assert decoded == reply and type(decoded) is type(reply)
    if isinstance(decoded, p.Failed):
        assert isinstance(decoded.status, TrialStatus)


def test_another_protocol_version_and_malformed_messages_are_refused():
    line = json.loads(p.encode(p.Sample("c1", 3)))
    with pytest.raises(p.ProtocolError, match="protocol version 99"):
        p.decode_request(json.dumps({**line, "v": 99}))
    with pytest.raises(p.ProtocolError, match="unknown message 'shutdown'"):
        p.decode_request(json.dumps({**line, "op": "shutdown"}))
    with pytest.raises(p.ProtocolError, match="malformed Timed"):
        p.decode_reply(json.dumps({"reply": "Timed", "body": {"samples": [1.0]}}))
    with pytest.raises(p.ProtocolError, match="malformed Failed"):
        p.decode_reply(json.dumps({"reply": "Failed", "body": {"status": "exploded", "error": "?"}}))
    with pytest.raises(p.ProtocolError, match="not a JSON line"):
        p.decode_reply("Segmentation fault")
