"""The wire form of everything storage defines: compact, versioned, explicit (never pickle).

What it carries: the mutations and snapshot records (``storage.mutations``), the commands
(``storage.commands``) and results (``storage.results``) that replicas forward to the master,
and ``storage.errors.SqsError`` (with its ``ErrorKind``). Top level, ``None`` is allowed too,
because several commands return nothing.

Layout
------
Every frame starts with two raw bytes, then one msgpack value::

    [FORMAT_VERSION] [kind]  msgpack...      kind 0x00: one object    (encode / decode)
                                             kind 0x01: array of many (encode_many / decode_many)

The version is checked before anything is parsed, so a later format need not even be msgpack.
An object is a msgpack array ``[tag, field values...]`` in field order (snapshot groups
of messages go column by column instead: see "columnar layout" below). Field values
are msgpack scalars (str, int, bool, nil, bin), arrays (tuples) and maps (``Mapping[str, ...]``),
and nested objects as arrays again. Decoding is driven by the classes' type hints
(``typing.get_type_hints``, resolved once at import): tuples come back as tuples, mappings as
dicts, nested objects as their classes, and every value is type-checked on the way (a str where an
int belongs, a bool where an int belongs, a float anywhere, an unknown or mismatched tag, a wrong
number of fields: all ``CodecError``).

Tags
----
``TAGS`` below is written out by hand and is the only source of tags: they never depend on import
or definition order. Rules for maintainers:

* A tag, once released, means that class forever. Never renumber; never reuse the tag of a
  removed class: move it to ``RETIRED_TAGS`` instead.
* New classes take the next free tag of their range (ranges are advisory; tags are small ints,
  below 128 they cost one byte): 1-15 shared values and errors, 16-47 mutations and snapshot
  records, 48-95 commands, 96-159 results.
* ``tests/storage/test_codec.py`` fails if a record or dataclass of ``storage.commands``, ``.results``,
  ``.mutations`` or ``.errors`` is missing from the table.

Evolving a class
----------------
Fields are positional, so: only ever *append* fields, and give each appended field a default.
A decoder accepts an object with trailing fields missing when those fields have defaults (an old
sender, a new receiver), and rejects an object with more fields than it knows (a new sender, an
old receiver: upgrade receivers first, or bump ``FORMAT_VERSION``). Renaming a field is free; the
name is never on the wire. Removing, reordering or retyping a field needs a new format version.

Robustness
----------
``decode`` and ``decode_many`` raise ``CodecError`` (a ``ValueError``) for any malformed input and
nothing else. msgpack bounds every declared length by the input size and the nesting depth by its
own stack, and reconstruction never recurses deeper than the schema, so memory stays linear in
the input. Frames are authenticated by the cluster layer before they get here; this is defence in
depth, not the security boundary.

Encoding trusts its input to be well typed (storage builds it), except that unregistered types,
ints beyond 64 bits and strings that are not valid Unicode raise ``CodecError``. A float in an
int field is encoded and then refused by the decoder; the round-trip tests are what keep
producers honest.

Speed
-----
Per class, an encoder function and per-field decoders are built once at import. The encoder is
generated source (as ``dataclasses`` generates ``__init__``): one tuple expression reading each
field as ``obj.field``, which the interpreter specializes to a direct slot read; an
``attrgetter`` looks every name up through the type instead, and cost four times as much for a
20-field MessageRecord. Encoding is one tuple per object handed to msgpack's C packer. Decoding
checks all fields' types with one lookup of their type tuple in a cache of signatures already
found valid, and builds a record (a msgspec Struct, storage/records.py) by its constructor,
which runs in C. The few frozen dataclasses (QueueKey, ErrorKind) have their slots filled
directly instead of through ``__init__``, whose ``object.__setattr__`` per field would cost more
than everything else; classes with ``__post_init__`` or ``init=False`` fields go through
``__init__``.

Frames made only of sends, receives and deletes (most of the replication stream and of a
journal) skip all of this: msgspec reads and writes them in C, to the same bytes and objects
(see "the compiled path" below).

Thread safety: each thread gets its own msgpack ``Packer``; the only state decoding shares is
that signature cache (a set only ever added to, bounded, safe under the GIL).
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import types
import typing
from collections.abc import Mapping
from itertools import repeat
from typing import Any, Callable, Iterable

import msgpack
import msgspec

from storage import commands as _c
from storage import errors as _e
from storage import mutations as _m
from storage import results as _r

__all__ = [
    "FORMAT_VERSION", "CodecError", "TAGS", "RETIRED_TAGS", "tag_of",
    "encode", "decode", "encode_many", "decode_many",
]

FORMAT_VERSION = 1
_ONE = 0x00
_MANY = 0x01
_HEADER_ONE = bytes((FORMAT_VERSION, _ONE))
_HEADER_MANY = bytes((FORMAT_VERSION, _MANY))


class CodecError(ValueError):
    """The bytes are not a valid encoding, or the object cannot be encoded."""


# --- the tag table: tag -> class, by hand, forever ----------------------------------------------

TAGS: Mapping[int, type] = types.MappingProxyType({
    # 1-15: shared values and errors
    1: _c.QueueKey,
    2: _c.Namespace,
    3: _c.MessageAttributeValue,
    4: _e.ErrorKind,
    5: _e.SqsError,
    # 16-47: mutations and snapshot records
    16: _m.MessageRecord,
    17: _m.MoveTaskRecord,
    18: _m.DedupEntry,
    19: _m.AttemptEntry,
    20: _m.QueueCreated,
    21: _m.QueueUpdated,
    22: _m.QueueDeleted,
    23: _m.TombstoneCleared,
    24: _m.QueuePurged,
    25: _m.MessageAdded,
    26: _m.MessageChanged,
    27: _m.MessageDeleted,
    28: _m.AttemptRecorded,
    29: _m.Pruned,
    30: _m.MoveTaskUpdated,
    31: _m.QueueRestored,
    32: _m.StorageRestored,
    33: _m.MessageRestored,
    34: _m.MessagesRestored,
    # 48-95: commands
    48: _c.CreateQueue,
    49: _c.DeleteQueue,
    50: _c.GetQueueUrl,
    51: _c.ListQueues,
    52: _c.GetQueueAttributes,
    53: _c.SetQueueAttributes,
    54: _c.PurgeQueue,
    55: _c.TagQueue,
    56: _c.UntagQueue,
    57: _c.ListQueueTags,
    58: _c.AddPermission,
    59: _c.RemovePermission,
    60: _c.ListDeadLetterSourceQueues,
    61: _c.SendMessage,
    62: _c.SendMessageBatchEntry,
    63: _c.SendMessageBatch,
    64: _c.ReceiveMessage,
    65: _c.DeleteMessage,
    66: _c.DeleteMessageBatchEntry,
    67: _c.DeleteMessageBatch,
    68: _c.ChangeMessageVisibility,
    69: _c.ChangeMessageVisibilityBatchEntry,
    70: _c.ChangeMessageVisibilityBatch,
    71: _c.StartMessageMoveTask,
    72: _c.CancelMessageMoveTask,
    73: _c.ListMessageMoveTasks,
    74: _c.Tick,
    # 96-159: results
    96: _r.CreateQueueResult,
    97: _r.GetQueueUrlResult,
    98: _r.ListQueuesResult,
    99: _r.GetQueueAttributesResult,
    100: _r.ListQueueTagsResult,
    101: _r.ListDeadLetterSourceQueuesResult,
    102: _r.SendMessageResult,
    103: _r.BatchResultError,
    104: _r.SendMessageBatchResultEntry,
    105: _r.SendMessageBatchResult,
    106: _r.ReceivedMessage,
    107: _r.ReceiveMessageResult,
    108: _r.DeleteMessageBatchResult,
    109: _r.ChangeMessageVisibilityBatchResult,
    110: _r.StartMessageMoveTaskResult,
    111: _r.CancelMessageMoveTaskResult,
    112: _r.MessageMoveTaskInfo,
    113: _r.ListMessageMoveTasksResult,
    114: _r.TickResult,
})

# Tags of classes that were removed: never to be given to another class.
RETIRED_TAGS: frozenset[int] = frozenset()

_TAG_OF: dict[type, int] = {cls: tag for tag, cls in TAGS.items()}
if len(_TAG_OF) != len(TAGS):  # pragma: no cover - a table edit gone wrong
    raise RuntimeError("storage.codec: a class appears twice in TAGS")
if RETIRED_TAGS & TAGS.keys():  # pragma: no cover
    raise RuntimeError("storage.codec: a retired tag is in use")


def tag_of(cls: type) -> int:
    """The wire tag of a registered class (``KeyError`` if it is not registered)."""
    return _TAG_OF[cls]


# --- schema: per class, field names, hints, defaults ------------------------------------------

class _SqsErrorShape:
    """SqsError is an exception, not a dataclass; this stands in for its field list."""

    kind: _e.ErrorKind
    message: str


def _schema(cls: type) -> tuple[tuple[str, ...], dict[str, Any], int]:
    """(field names in order, resolved type hints, number of required leading fields)."""
    if cls is _e.SqsError:
        return ("kind", "message"), typing.get_type_hints(_SqsErrorShape), 2
    hints = typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))
    if _is_struct(cls):
        names = cls.__struct_fields__
        return names, hints, len(names) - len(cls.__struct_defaults__)
    if not dataclasses.is_dataclass(cls):  # pragma: no cover
        raise TypeError(f"storage.codec: {cls!r} is neither a Struct nor a dataclass")
    fields = [f for f in dataclasses.fields(cls) if f.init]
    required = 0
    for f in fields:
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            required += 1
        else:
            break
    return tuple(f.name for f in fields), hints, required


def _is_struct(cls: type) -> bool:
    """A msgspec Struct (storage's records): built by its constructor, in C, which is the
    cheapest way to store the values."""
    return isinstance(cls, type) and issubclass(cls, msgspec.Struct)


# --- encoding -----------------------------------------------------------------------------------

def _make_encoder(cls: type, tag: int) -> Callable[[Any], Any]:
    """obj -> (tag, field values...); msgpack packs the values, calling ``_default`` for ours."""
    names, hints, _req = _schema(cls)
    if cls is _e.SqsError:
        return lambda err: (tag, err.kind, err.message)
    # Fields declared as one registered class, or that or None (MessageAdded.message, .dedup),
    # are encoded here rather than through msgpack's ``default`` callback, which is slower. A value
    # of any other type (None, a subclass) is left to msgpack and ``_default``, as before.
    env: dict[str, Any] = {}
    reads = []
    fields = []
    for i, n in enumerate(names):
        sub = _nested_class(hints[n])
        if sub is None:
            fields.append(f"obj.{_identifier(n)}")
            continue
        env[f"cls{i}"] = sub
        reads.append(f"    v{i} = obj.{_identifier(n)}\n")
        sub_names, sub_hints, _ = _schema(sub)
        if sub is not _e.SqsError and not any(_nested_class(sub_hints[m]) for m in sub_names):
            # A flat class (MessageRecord, DedupEntry): its tuple is built right here, sparing
            # a call per nested object.
            inner = "".join(f"v{i}.{_identifier(m)}, " for m in sub_names)
            fields.append(f"({_TAG_OF[sub]}, {inner}) if type(v{i}) is cls{i} else v{i}")
        else:
            env[f"enc{i}"] = _encoder(_TAG_OF[sub])
            fields.append(f"enc{i}(v{i}) if type(v{i}) is cls{i} else v{i}")
    src = (f"def encode_{cls.__name__}(obj):\n{''.join(reads)}"
           f"    return ({tag}, {''.join(f + ', ' for f in fields)})\n")
    exec(src, env)  # noqa: S102 - source built above from dataclass field names only
    return env[f"encode_{cls.__name__}"]


def _nested_class(hint: Any) -> type | None:
    """The registered class a field holds, if declared as exactly one (optionally or None)."""
    members = _union_members(hint) or (hint,)
    classes = [m for m in members if m in _TAG_OF]
    if len(classes) == 1 and all(m is _NoneType or m in _TAG_OF for m in members):
        return classes[0]
    return None


def _identifier(name: str) -> str:
    if not name.isidentifier():  # pragma: no cover - dataclass fields always are
        raise TypeError(f"storage.codec: field name {name!r} is not an identifier")
    return name


_NoneType = type(None)
_ENCODERS: dict[type, Callable[[Any], Any]] = {}


def _union_members(hint: Any) -> tuple | None:
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        return typing.get_args(hint)
    return None


def _encoder(tag: int) -> Callable[[Any], Any]:
    cls = TAGS[tag]
    enc = _ENCODERS.get(cls)
    if enc is None:
        enc = _ENCODERS[cls] = _make_encoder(cls, tag)
    return enc


for _tag in TAGS:
    _encoder(_tag)
del _tag
_SQS_ERROR_ENCODER = _ENCODERS[_e.SqsError]


def _default(obj: Any) -> Any:
    """msgpack calls this for every value it cannot pack natively: our objects, mostly."""
    enc = _ENCODERS.get(type(obj))
    if enc is not None:
        return enc(obj)
    if isinstance(obj, Mapping):
        return dict(obj)
    if isinstance(obj, _e.SqsError):  # a subclass: sent as the base class
        return _SQS_ERROR_ENCODER(obj)
    raise TypeError(f"cannot encode a {type(obj).__name__}")


_local = threading.local()
_unpackb = msgpack.unpackb


def _packer() -> msgpack.Packer:
    p = msgpack.Packer(use_bin_type=True, default=_default, datetime=False)
    _local.packer = p
    return p


def _top(obj: Any) -> Any:
    enc = _ENCODERS.get(type(obj))
    if enc is not None:
        return enc(obj)
    if obj is None:
        return None
    if isinstance(obj, _e.SqsError):
        return _SQS_ERROR_ENCODER(obj)
    raise CodecError(f"cannot encode a {type(obj).__name__}: not a registered storage type")


def encode(obj: Any) -> bytes:
    """One registered object (or ``None``) as a versioned frame."""
    enc = _ENCODERS.get(type(obj))
    value = enc(obj) if enc is not None else _top(obj)
    try:
        packer = _local.packer
    except AttributeError:
        packer = _packer()
    try:
        return _HEADER_ONE + packer.pack(value)
    except Exception as exc:
        packer.reset()
        raise CodecError(f"cannot encode {type(obj).__name__}: {exc}") from exc


def encode_many(objs: Iterable[Any]) -> bytes:
    """Many registered objects (or ``None``s) in one versioned frame, order kept."""
    if type(objs) is not list and type(objs) is not tuple:
        objs = list(objs)
    if all(map(_COMPILED_SET.__contains__, map(type, objs))):
        try:
            return _HEADER_MANY + _compiled_encode(objs)
        except Exception:   # noqa: BLE001 - anything msgspec will not write: the general way says why
            pass
    return _encode_many_general(objs)


def _encode_many_general(objs: list | tuple) -> bytes:
    encoders = _ENCODERS
    try:
        # Most commands emit one mutation; a comprehension would build a function object per
        # call, which costs about as much as encoding the mutation.
        if len(objs) == 1:
            o = objs[0]
            values = [encoders[type(o)](o)]
        else:
            values = []
            for o in objs:
                values.append(encoders[type(o)](o))
    except KeyError:
        values = [_top(o) for o in objs]
    try:
        packer = _local.packer
    except AttributeError:
        packer = _packer()
    try:
        return _HEADER_MANY + packer.pack(values)
    except Exception as exc:
        packer.reset()
        raise CodecError(f"cannot encode batch: {exc}") from exc


# --- decoding -----------------------------------------------------------------------------------
#
# Each field has a set of msgpack types it may arrive as (its "accepts") and, if it needs
# reshaping (tuples, mappings, nested objects), a converter that takes the freshly unpacked value
# and returns the typed one or raises CodecError. Scalar fields (str, int, bool, bytes, None and
# unions of those) need no converter. A class decoder checks all fields' types at once by looking
# up the tuple of their types in a cache of signatures already found valid, and only walks the
# fields one by one for a signature it has not seen.

_SCALARS = {str: str, int: int, bool: bool, bytes: bytes, _NoneType: _NoneType}
_contains = frozenset.__contains__


def _bad(what: str, value: Any) -> CodecError:
    return CodecError(f"expected {what}, got {type(value).__name__}")


class _Conv(typing.NamedTuple):
    accepts: frozenset            # msgpack types this field may arrive as (cheap pre-check)
    convert: Callable[[Any], Any] | None   # None: the value is already right


_DECODERS: dict[int, Callable[[list], Any]] = {}   # tag -> decoder of [tag, fields...]


def _conv_for(hint: Any, owner: type) -> _Conv:
    if hint in _SCALARS:
        return _Conv(frozenset((_SCALARS[hint],)), None)
    if hint in _TAG_OF:
        return _Conv(frozenset((list,)), _decoder(_TAG_OF[hint]))
    members = _union_members(hint)
    if members is not None:
        optional = _NoneType in members
        rest = [m for m in members if m is not _NoneType]
        if all(m in _SCALARS for m in rest):
            return _Conv(frozenset(_SCALARS[m] for m in members), None)
        if len(rest) == 1:
            inner = _conv_for(rest[0], owner)
            accepts = inner.accepts | {_NoneType} if optional else inner.accepts
            fn = inner.convert
            if fn is None:
                return _Conv(accepts, None)
            if not optional:  # pragma: no cover - a one-member union is not a union
                return _Conv(accepts, fn)
            return _Conv(accepts, lambda v: None if v is None else fn(v))
        if all(m in _TAG_OF for m in rest):
            allowed = frozenset(_TAG_OF[m] for m in rest)

            def tagged(v: Any) -> Any:
                if v is None and optional:
                    return None
                if type(v) is not list or not v or type(v[0]) is not int or v[0] not in allowed:
                    raise _bad("one of " + ", ".join(m.__name__ for m in rest), v)
                return _DECODERS[v[0]](v)
            accepts = frozenset((list, _NoneType)) if optional else frozenset((list,))
            return _Conv(accepts, tagged)
        raise TypeError(f"storage.codec: unsupported union {hint!r} in {owner.__name__}")
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return _Conv(frozenset((list,)), _var_tuple(_conv_for(args[0], owner)))
        if args == ((),) or not args:  # pragma: no cover - tuple[()]
            args = ()
        return _Conv(frozenset((list,)), _fixed_tuple([_conv_for(a, owner) for a in args]))
    if origin is Mapping or origin is dict:
        key_hint, value_hint = args
        if key_hint is not str:
            raise TypeError(f"storage.codec: mapping keys must be str ({hint!r} in {owner.__name__})")
        return _Conv(frozenset((dict,)),
                     _str_map(_conv_for(value_hint, owner), _m.NO_ATTRIBUTES if owner in _SHARED_EMPTY else None))
    raise TypeError(f"storage.codec: unsupported field type {hint!r} in {owner.__name__}")


def _var_tuple(elem: _Conv) -> Callable[[Any], tuple]:
    accepts, fn = elem

    if fn is None:
        if len(accepts) == 1:
            (only,) = accepts

            def scalar_tuple(v: Any) -> tuple:
                for e in v:
                    if type(e) is not only:
                        raise _bad(only.__name__, e)
                return tuple(v)
            return scalar_tuple

        def scalars_tuple(v: Any) -> tuple:
            if not all(map(_contains, [accepts] * len(v), map(type, v))):
                raise CodecError("wrong element type in a tuple")
            return tuple(v)
        return scalars_tuple

    def conv_tuple(v: Any) -> tuple:
        for e in v:
            if type(e) not in accepts:
                raise _bad("/".join(sorted(t.__name__ for t in accepts)), e)
        return tuple(map(fn, v))
    return conv_tuple


def _fixed_tuple(elems: list[_Conv]) -> Callable[[Any], tuple]:
    n = len(elems)
    sets = tuple(e.accepts for e in elems)
    convs = tuple((i, e.convert) for i, e in enumerate(elems) if e.convert is not None)

    def fixed(v: Any) -> tuple:
        if len(v) != n:
            raise CodecError(f"expected a {n}-tuple, got {len(v)} items")
        if not all(map(_contains, sets, map(type, v))):
            raise CodecError("wrong element type in a tuple")
        for i, fn in convs:
            v[i] = fn(v[i])
        return tuple(v)
    return fixed


# Classes whose empty mappings decode as the one shared, read-only ``NO_ATTRIBUTES``: a stored
# message's two empty attribute maps were 128 bytes of the ~900 it cost on a replica.
_SHARED_EMPTY = frozenset({_m.MessageRecord})


def _str_map(value: _Conv, empty: dict | None = None) -> Callable[[Any], dict]:
    accepts, fn = value
    if fn is None and accepts == frozenset((str,)):
        def str_str(d: dict) -> dict:
            if not d:
                return d if empty is None else empty
            for k, x in d.items():
                if type(k) is not str or type(x) is not str:
                    raise CodecError("expected a map of str to str")
            return d
        return str_str

    def str_any(d: dict) -> dict:
        if not d:
            return d if empty is None else empty
        for k, x in d.items():
            if type(k) is not str or type(x) not in accepts:
                raise CodecError("wrong key or value type in a map")
        if fn is None:
            return d
        return {k: fn(x) for k, x in d.items()}
    return str_any


def _wrong_object(v: Any, tag: int) -> Any:
    if type(v) is not list:
        raise _bad(TAGS[tag].__name__, v)
    if not v:
        raise CodecError(f"expected {TAGS[tag].__name__}, got an empty array")
    raise CodecError(f"expected {TAGS[tag].__name__} (tag {tag}), got tag {v[0]!r}")


def _sqs_error(kind: _e.ErrorKind, message: str) -> _e.SqsError:
    return _e.SqsError(_CANONICAL_KINDS.get(kind, kind), message)


# Decoded ErrorKinds equal to a module-level constant of storage.errors come back as that constant.
_CANONICAL_KINDS: dict[_e.ErrorKind, _e.ErrorKind] = {
    k: k for k in vars(_e).values() if isinstance(k, _e.ErrorKind)
}


_MAX_SIGNATURES = 4096
_set_slot = types.MemberDescriptorType.__set__
_new_object = object.__new__


def _make_decoder(cls: type, tag: int) -> Callable[[list], Any]:
    names, hints, required = _schema(cls)
    convs = [_conv_for(hints[n], cls) for n in names]
    nfields = len(names)
    sets = tuple(c.accepts for c in convs)
    # per accepted field count: the converters that apply (omitted trailing fields take defaults)
    by_count = {
        n: tuple((i, c.convert) for i, c in enumerate(convs[:n]) if c.convert is not None)
        for n in range(required, nfields + 1)
    }
    full_steps = by_count[nfields]
    name = cls.__name__
    # Field type signatures seen to be valid: checking one is a tuple hash instead of a loop.
    # Only valid ones are added, so the set is bounded by the product of the allowed-type sets.
    signatures: set[tuple] = set()

    # Building the object: a record's constructor is C and the cheapest way (_straight_decoder).
    # A frozen dataclass's __init__ sets each field through
    # object.__setattr__, which costs more than all the rest of decoding. For slotted classes
    # without __post_init__ the slots are filled directly (as pickle and copy would); the values
    # are exactly what __init__ would store.
    descriptors = tuple(vars(cls).get(n) for n in names)
    direct = (
        cls is not _e.SqsError
        and not _is_struct(cls)
        and not hasattr(cls, "__post_init__")
        and len(dataclasses.fields(cls)) == nfields          # no init=False fields to compute
        and all(type(d) is types.MemberDescriptorType for d in descriptors)
    )
    make = _sqs_error if cls is _e.SqsError else cls

    def slow_check(args: list) -> None:
        for fname, s, a in zip(names, sets, args):
            if type(a) not in s:
                raise CodecError(f"{name}.{fname}: unexpected {type(a).__name__}")

    def general(v: list) -> Any:
        if not v or v[0] != tag or type(v[0]) is not int:
            _wrong_object(v, tag)
        args = v[1:]
        if len(args) == nfields:
            sig = tuple(map(type, args))
            if sig not in signatures:
                slow_check(args)
                if len(signatures) < _MAX_SIGNATURES:
                    signatures.add(sig)
            for i, fn in full_steps:
                args[i] = fn(args[i])
            if direct:
                obj = _new_object(cls)
                any(map(_set_slot, descriptors, repeat(obj), args))
                return obj
            return make(*args)
        # an older sender: trailing fields omitted, their defaults apply
        steps = by_count.get(len(args))
        if steps is None:
            raise CodecError(f"{name}: {len(args)} fields, expected "
                             f"{required}..{nfields}")
        slow_check(args)
        for i, fn in steps:
            args[i] = fn(args[i])
        return make(*args)

    if not direct and not _is_struct(cls):
        return general
    return _straight_decoder(cls, tag, sets, convs, descriptors, general)


def _straight_decoder(cls: type, tag: int, sets: tuple, convs: list, descriptors: tuple,
                      general: Callable[[list], Any]) -> Callable[[list], Any]:
    """The common case as straight-line code: all fields present, each of an expected type.
    Anything else (an older sender's shorter list, a wrong type, a wrong tag) goes to
    ``general``, which decodes it or raises the precise error. Generated because a snapshot
    chunk is thousands of records: the signature tuple, its hashing and the per-field calls
    of the generic loop were most of a transfer's restore time."""
    n = len(sets)
    env: dict[str, Any] = {"cls": cls, "new": _new_object, "general": general, "list": list, "int": int}
    args = [f"a{i}" for i in range(n)]
    checks = []
    for i, accepts in enumerate(sets):
        if len(accepts) == 1:
            (only,) = accepts
            env[f"T{i}"] = only
            checks.append(f"type(a{i}) is T{i}")
        else:
            env[f"S{i}"] = accepts
            checks.append(f"type(a{i}) in S{i}")
    lines = [f"def dec(v):",
             f"    if type(v) is not list or len(v) != {n + 1} or type(v[0]) is not int or v[0] != {tag}:",
             "        return general(v)",
             f"    _, {', '.join(args)}{',' if n == 1 else ''} = v" if n else "    pass",
             f"    if not ({' and '.join(checks) or 'True'}):",
             f"        return general(v)"]
    for i, c in enumerate(convs):
        if c.convert is not None:
            env[f"C{i}"] = c.convert
            lines.append(f"    a{i} = C{i}(a{i})")
    if _is_struct(cls) or (not cls.__dataclass_params__.frozen and all(f.init for f in dataclasses.fields(cls))):
        # A record's constructor (C) or a plain __init__ stores the same values and is 6x
        # faster than one slot setter call per field (a snapshot restores millions of
        # records). Frozen dataclasses would pay object.__setattr__ per field.
        lines.append(f"    return cls({', '.join(args)})")
    else:
        lines.append("    o = new(cls)")
        for i, d in enumerate(descriptors):
            env[f"D{i}"] = d.__set__
            lines.append(f"    D{i}(o, a{i})")
        lines.append("    return o")
    exec("\n".join(lines) + "\n", env)  # noqa: S102 - built from dataclass field positions only
    return env["dec"]


def _decoder(tag: int) -> Callable[[list], Any]:
    """The decoder of a tag, building those of nested classes first (memoized)."""
    dec = _DECODERS.get(tag)
    if dec is None:
        if tag in _BUILDING:  # a recursive schema: bind late
            return lambda v: _DECODERS[tag](v)
        _BUILDING.add(tag)
        dec = _DECODERS[tag] = _make_decoder(TAGS[tag], tag)
        _BUILDING.discard(tag)
    return dec


_BUILDING: set[int] = set()
for _tag in TAGS:
    _decoder(_tag)
del _tag


# --- columnar layout ----------------------------------------------------------------------------
#
# A state transfer is mostly MessagesRestored groups of up to 64 messages. Sent row by row, each
# message is a 21-item array, and unpacking, checking and building it took the joiner 3.2 us per
# message (in isolation, of 6.5 us in all); column by column, 2.1 us. A field that is the same
# for the whole group (most of them: no attributes, no receipt, no group, version 0...) is sent
# once, and the joiner unpacks only the fields that vary. Frames shrink by ~15% with distinct
# 100-byte bodies, ~4x when bodies repeat. A folded value is shared by every element it stands
# for, mappings included: records are immutable, and nothing mutates their mappings.
#
#     [tag, head fields..., n, column_0, ..., column_k]
#
# for a class whose *last* field is ``tuple[C, ...]`` of a registered class C: ``n`` is the tuple's
# length and ``column_i`` holds field i of every element, either as n values or, when all n are
# equal, as one value (a one-item array). A group of more than one element must have at least one
# full column, so that the objects built stay linear in the input. Columns past the ones sent take
# C's defaults (an older sender of a longer C). Such a class can gain no field (it would no longer
# end with the tuple): changing it means a new class.
#
# The class keeps its row tag in TAGS, and receivers still decode it (an older sender); encoders
# send the columnar tag. Like any new tag, receivers must be upgraded before senders.

COLUMNAR_TAGS: Mapping[int, type] = types.MappingProxyType({
    35: _m.MessagesRestored,
})
if COLUMNAR_TAGS.keys() & (TAGS.keys() | RETIRED_TAGS):  # pragma: no cover - a table edit gone wrong
    raise RuntimeError("storage.codec: a columnar tag collides with a row tag")


def _columnar_parts(cls: type) -> tuple[tuple[str, ...], str, type]:
    """(head field names, the tuple field's name, its element class)."""
    names, hints, _ = _schema(cls)
    *head, last = names
    args = typing.get_args(hints[last])
    if typing.get_origin(hints[last]) is not tuple or len(args) != 2 or args[1] is not Ellipsis \
            or args[0] not in _TAG_OF:  # pragma: no cover - a table edit gone wrong
        raise TypeError(f"storage.codec: {cls.__name__} does not end with tuple[Registered, ...]")
    return tuple(head), last, args[0]


def _make_columnar_encoder(cls: type, tag: int) -> Callable[[Any], Any]:
    head, last, elem = _columnar_parts(cls)
    elem_names, elem_hints, _ = _schema(elem)
    lines = [f"def encode_columns_{cls.__name__}(obj):",
             f"    rows = obj.{_identifier(last)}",
             "    n = len(rows)"]
    cols = []
    for i, m in enumerate(elem_names):
        lines.append(f"    c{i} = [r.{_identifier(m)} for r in rows]")
        # Equal values of different types (1 == True) must not fold into one: only where a
        # field accepts both does the fold look at types too.
        accepts = _conv_for(elem_hints[m], elem).accepts
        mixed = " and len(set(map(type, c%d))) == 1" % i if {int, bool} <= accepts else ""
        lines.append(f"    if n > 1 and c{i}.count(c{i}[0]) == n{mixed}:\n        del c{i}[1:]")
        cols.append(f"c{i}")
    # The decoder wants one full column when n > 1 (its memory bound); only n equal elements,
    # never a snapshot's (message ids differ), fold everywhere.
    lines.append(f"    if n > 1 and {' and '.join(f'len({c}) == 1' for c in cols)}:\n"
                 f"        c0 = [r.{_identifier(elem_names[0])} for r in rows]")
    heads = "".join(f"obj.{_identifier(h)}, " for h in head)
    lines.append(f"    return ({tag}, {heads}n, {', '.join(cols)})")
    env: dict[str, Any] = {}
    exec("\n".join(lines) + "\n", env)  # noqa: S102 - built from dataclass field names only
    return env[f"encode_columns_{cls.__name__}"]


def _builder(cls: type) -> Callable[..., Any]:
    """cls(*fields) by the cheapest road that stores the same values (see _straight_decoder)."""
    if _is_struct(cls):
        return cls
    fields = dataclasses.fields(cls)
    if not cls.__dataclass_params__.frozen or hasattr(cls, "__post_init__") \
            or not all(f.init for f in fields):
        return cls
    descriptors = tuple(vars(cls)[f.name] for f in fields)
    if not all(type(d) is types.MemberDescriptorType for d in descriptors):  # pragma: no cover
        return cls

    def build(*args: Any) -> Any:
        if len(args) != len(descriptors):
            return cls(*args)   # fields left out: __init__ fills the defaults
        obj = _new_object(cls)
        any(map(_set_slot, descriptors, repeat(obj), args))
        return obj
    return build


def _make_columnar_decoder(cls: type, tag: int) -> Callable[[list], Any]:
    head, _last, elem = _columnar_parts(cls)
    _names, hints, _ = _schema(cls)
    head_convs = [_conv_for(hints[h], cls) for h in head]
    elem_names, elem_hints, elem_required = _schema(elem)
    elem_convs = [_conv_for(elem_hints[m], elem) for m in elem_names]
    n_head, n_cols = len(head), len(elem_names)
    first_col = 2 + n_head
    build, build_elem = _builder(cls), _builder(elem)
    name = cls.__name__

    def dec(v: list) -> Any:
        if type(v) is not list or not v or v[0] != tag or type(v[0]) is not int:
            _wrong_object(v, tag)
        if not first_col + elem_required <= len(v) <= first_col + n_cols:
            raise CodecError(f"{name}: {len(v) - 1} fields in columnar form, expected "
                             f"{n_head + 1 + elem_required}..{n_head + 1 + n_cols}")
        heads = v[1:1 + n_head]
        for i, (accepts, fn) in enumerate(head_convs):
            if type(heads[i]) not in accepts:
                raise CodecError(f"{name}.{head[i]}: unexpected {type(heads[i]).__name__}")
            if fn is not None:
                heads[i] = fn(heads[i])
        n = v[1 + n_head]
        if type(n) is not int or n < 0:
            raise CodecError(f"{name}: bad element count {n!r}")
        columns: list[Any] = []
        full = False
        for i, col in enumerate(v[first_col:]):
            accepts, fn = elem_convs[i]
            if type(col) is not list:
                raise _bad(f"a column of {elem.__name__}.{elem_names[i]}", col)
            if len(col) == n:
                if not set(map(type, col)) <= accepts:
                    raise CodecError(f"{elem.__name__}.{elem_names[i]}: unexpected type in a column")
                columns.append(list(map(fn, col)) if fn is not None else col)
                full = True
            elif len(col) == 1:
                value = col[0]
                if type(value) not in accepts:
                    raise CodecError(f"{elem.__name__}.{elem_names[i]}: unexpected {type(value).__name__}")
                columns.append(repeat(fn(value) if fn is not None else value, n))
            else:
                raise CodecError(f"{elem.__name__}.{elem_names[i]}: a column of {len(col)}, "
                                 f"expected {n} or 1")
        if n > 1 and not full:
            raise CodecError(f"{name}: {n} elements and no full column")
        return build(*heads, tuple(map(build_elem, *columns)))
    return dec


for _tag, _cls in COLUMNAR_TAGS.items():
    _ENCODERS[_cls] = _make_columnar_encoder(_cls, _tag)
    _DECODERS[_tag] = _make_columnar_decoder(_cls, _tag)
del _tag, _cls


# --- the compiled path ----------------------------------------------------------------------------
#
# The replication stream and the journal are mostly sends, receives and deletes. Those classes,
# and the records nested in them, are also declared to msgspec as tagged arrays
# (``array_like=True, tag=<their TAGS entry>, forbid_unknown_fields=True`` on the class), which
# is exactly the object layout above: ``[tag, field values...]``, trailing fields with defaults
# optional, no more fields than the class has. So msgspec reads and writes a frame made only of
# them in C. Recovering 1,000,000 sends from a journal spent 1.8 s unpacking and building them
# the general way, 0.4 s this way; encoding a send's MessageAdded costs a fifth.
#
# It changes no answer, only the speed. Both ways check every field's type (bool is not int,
# bytes is not str), the tag and the number of fields, and build equal objects; encoding
# writes the same bytes (tests/storage/test_codec.py holds both ways to that). A frame that
# holds anything else, or that msgspec refuses for any reason, goes the general way, which
# decodes it or raises the precise CodecError. Empty attribute maps come back as the shared
# ``NO_ATTRIBUTES``, as they do the general way.

_COMPILED: tuple[type, ...] = (_m.MessageAdded, _m.MessageChanged, _m.MessageDeleted)
_COMPILED_NESTED: tuple[type, ...] = (_m.MessageRecord, _m.DedupEntry, _c.MessageAttributeValue)
for _cls in _COMPILED + _COMPILED_NESTED:
    _cfg = _cls.__struct_config__
    if not (_cfg.array_like and _cfg.tag == _TAG_OF[_cls] and _cfg.forbid_unknown_fields):  # pragma: no cover
        raise RuntimeError(f"storage.codec: {_cls.__name__} must be declared array_like, "
                           f"forbid_unknown_fields, with tag={_TAG_OF[_cls]} (its TAGS entry)")
del _cls, _cfg
_COMPILED_SET = frozenset(_COMPILED)
_compiled_decode = msgspec.msgpack.Decoder(list[typing.Union[_COMPILED]]).decode   # type: ignore[valid-type]
_compiled_encode = msgspec.msgpack.Encoder().encode
_EXPECTED: dict[Any, bool] = {}


def _compiled_expected(expect: type | tuple[type, ...]) -> bool:
    """Whether every compiled class is an instance of ``expect``: then what the compiled path
    built needs no check one by one."""
    ok = _EXPECTED.get(expect)
    if ok is None:
        ok = _EXPECTED[expect] = all(issubclass(c, expect) for c in _COMPILED)
    return ok


_force_setattr = msgspec.structs.force_setattr
_MessageAdded = _m.MessageAdded
_NO_ATTRIBUTES = _m.NO_ATTRIBUTES


def _share_empty_maps(objs: list) -> None:
    for m in objs:
        if type(m) is _MessageAdded:
            r = m.message
            if not r.attributes:
                _force_setattr(r, "attributes", _NO_ATTRIBUTES)
            if not r.system_attributes:
                _force_setattr(r, "system_attributes", _NO_ATTRIBUTES)


def _decode_any(v: Any) -> Any:
    if type(v) is list and v:
        tag = v[0]
        if type(tag) is int:
            dec = _DECODERS.get(tag)
            if dec is not None:
                return dec(v)
            raise CodecError(f"unknown tag {tag}")
    if v is None:
        return None
    raise CodecError(f"expected a tagged object, got {type(v).__name__}")


_COPY_LIMIT = 1 << 16   # bodies up to this size are sliced (a copy); larger ones are viewed


def _unpack(data: Any, kind: int) -> Any:
    if type(data) is not bytes:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise CodecError(f"expected bytes, got {type(data).__name__}")
        try:
            data = memoryview(data).cast("B")
        except (TypeError, ValueError) as exc:
            raise CodecError(f"unusable buffer: {exc}") from None
    if len(data) < 3:
        raise CodecError("frame too short")
    if data[0] != FORMAT_VERSION:
        raise CodecError(f"unsupported format version {data[0]} (this node speaks {FORMAT_VERSION})")
    if data[1] != kind:
        raise CodecError(f"frame kind {data[1]}, expected {kind} "
                         f"(use {'decode' if data[1] == _ONE else 'decode_many'})")
    body = data[2:] if len(data) <= _COPY_LIMIT else memoryview(data)[2:]
    try:
        return _unpackb(body, raw=False, strict_map_key=True)
    except Exception as exc:
        raise CodecError(f"malformed frame: {type(exc).__name__}: {exc}") from None


def _check(obj: Any, expect: type | tuple[type, ...] | None) -> Any:
    if expect is not None and not isinstance(obj, expect):
        raise CodecError(f"unexpected {type(obj).__name__}")
    return obj


def decode(data: bytes, expect: type | tuple[type, ...] | None = None) -> Any:
    """The object of an ``encode`` frame. ``expect``: refuse anything not an instance of it."""
    value = _unpack(data, _ONE)
    try:
        obj = _decode_any(value)
    except CodecError:
        raise
    except Exception as exc:  # a defect in a decoder or a constructor refusing a value
        raise CodecError(f"malformed frame: {type(exc).__name__}: {exc}") from None
    return _check(obj, expect) if expect is not None else obj


def decode_many(data: bytes, expect: type | tuple[type, ...] | None = None) -> list:
    """The objects of an ``encode_many`` frame, in order."""
    if type(data) is bytes and len(data) > 2 and data[0] == FORMAT_VERSION and data[1] == _MANY:
        try:
            objs = _compiled_decode(memoryview(data)[2:])
        except Exception:   # noqa: BLE001 - not only compiled classes, or malformed (bad UTF-8
            pass            # raises UnicodeDecodeError): the general way decides and says why
        else:
            _share_empty_maps(objs)
            if expect is not None and not _compiled_expected(expect):
                for o in objs:
                    _check(o, expect)
            return objs
    return _decode_many_general(data, expect)


def _decode_many_general(data: bytes, expect: type | tuple[type, ...] | None) -> list:
    values = _unpack(data, _MANY)
    if type(values) is not list:
        raise CodecError(f"expected an array of objects, got {type(values).__name__}")
    try:
        objs = list(map(_decode_any, values))
    except CodecError:
        raise
    except Exception as exc:
        raise CodecError(f"malformed frame: {type(exc).__name__}: {exc}") from None
    if expect is not None:
        for o in objs:
            _check(o, expect)
    return objs
