"""The SQS wire protocols, sans I/O: bytes and headers in, commands out; results out, bytes back.

Nothing here touches a socket or an event loop, so every function can be unit-tested with plain
values and reused by any HTTP stack.
"""
