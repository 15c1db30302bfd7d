"""storage.mutations.NO_ATTRIBUTES: the one read-only empty map that messages without attributes
share (two fresh empty dicts per stored message were 128 of its ~900 bytes)."""

from __future__ import annotations

import copy
import json

import pytest

from storage import IdSource, ManualClock, Storage, codec
from storage.commands import CreateQueue, MessageAttributeValue, Namespace, SendMessage
from storage.mutations import NO_ATTRIBUTES, MessageAdded

NS = Namespace("us-east-1", "000000000000")


def _sent(**kw) -> MessageAdded:
    s = Storage(ManualClock(1_700_000_000_000), IdSource(1))
    s.execute(CreateQueue(NS, "q"))
    _, muts = s.execute(SendMessage(NS.key("q"), "body", **kw))
    (added,) = [m for m in muts if isinstance(m, MessageAdded)]
    return added


def test_a_message_without_attributes_shares_the_read_only_empty_map():
    rec = _sent().message
    assert rec.attributes is NO_ATTRIBUTES and rec.system_attributes is NO_ATTRIBUTES
    assert rec.visible_ms is rec.sent_ms, "no delay: one int object for both"
    with_attrs = _sent(message_attributes={"a": MessageAttributeValue("String", "v")},
                       delay_seconds=5).message
    assert with_attrs.attributes == {"a": MessageAttributeValue("String", "v")}
    assert with_attrs.attributes is not NO_ATTRIBUTES and with_attrs.system_attributes is NO_ATTRIBUTES
    assert with_attrs.visible_ms == with_attrs.sent_ms + 5000


@pytest.mark.parametrize("change", [
    lambda d: d.__setitem__("a", 1), lambda d: d.__delitem__("a"), lambda d: d.update(a=1),
    lambda d: d.setdefault("a", 1), lambda d: d.pop("a", None), lambda d: d.popitem(), lambda d: d.clear(),
    lambda d: d.__ior__({"a": 1}),
])
def test_no_attributes_cannot_be_changed(change):
    with pytest.raises(TypeError, match="never change it"):
        change(NO_ATTRIBUTES)
    assert NO_ATTRIBUTES == {} and len(NO_ATTRIBUTES) == 0


def test_no_attributes_behaves_as_an_empty_dict_elsewhere():
    assert isinstance(NO_ATTRIBUTES, dict) and not NO_ATTRIBUTES
    assert json.dumps(NO_ATTRIBUTES) == "{}"
    assert type(copy.copy(NO_ATTRIBUTES)) is dict and type(copy.deepcopy(NO_ATTRIBUTES)) is dict
    mine = dict(NO_ATTRIBUTES)
    mine["a"] = 1                       # a copy is the caller's own
    assert NO_ATTRIBUTES == {}


def test_decoded_messages_share_it_and_nothing_else_does():
    added = _sent()
    back = codec.decode(codec.encode(added))
    assert back == added and back.message.attributes is NO_ATTRIBUTES
    assert back.message.system_attributes is NO_ATTRIBUTES
    # the encoded bytes are those of an empty map
    assert codec.encode(added) == codec.encode(
        MessageAdded(added.qid, type(added.message)(**{**{f: getattr(added.message, f) for f in
                                                          added.message.__struct_fields__},
                                                       "attributes": {}, "system_attributes": {}}),
                     added.dedup))
    # other classes' empty maps stay their own dicts
    created = codec.decode(codec.encode(CreateQueue(NS, "q")))
    assert created.attributes == {} and created.attributes is not NO_ATTRIBUTES
