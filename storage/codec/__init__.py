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
of messages go column by column instead: see columnar.py). Field values
are msgpack scalars (str, int, bool, nil, bin), arrays (tuples) and maps (``Mapping[str, ...]``),
and nested objects as arrays again. Decoding is driven by the classes' type hints
(``typing.get_type_hints``, resolved once at import): tuples come back as tuples, mappings as
dicts, nested objects as their classes, and every value is type-checked on the way (a str where an
int belongs, a bool where an int belongs, a float anywhere, an unknown or mismatched tag, a wrong
number of fields: all ``CodecError``).

Tags
----
``TAGS`` (schema.py) is written out by hand and is the only source of tags: they never depend on import
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
(see compiled.py).

Thread safety: each thread gets its own msgpack ``Packer``; the only state decoding shares is
that signature cache (a set only ever added to, bounded, safe under the GIL).

Modules
-------
``schema`` holds the tag table and each class's fields; ``encoders`` and ``decoders`` build the
row form per class from them, ``columnar`` the column form of snapshot groups, ``compiled`` the
msgspec path; ``frames`` is the envelope and the four functions below.
"""

from storage.codec.columnar import COLUMNAR_TAGS
from storage.codec.frames import FORMAT_VERSION, decode, decode_many, encode, encode_many
from storage.codec.schema import RETIRED_TAGS, TAGS, CodecError, tag_of

__all__ = [
    "FORMAT_VERSION", "CodecError", "TAGS", "RETIRED_TAGS", "COLUMNAR_TAGS", "tag_of",
    "encode", "decode", "encode_many", "decode_many",
]
