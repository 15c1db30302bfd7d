"""TLS on the SQS port: the server's context from [tls], and the context our own clients use.

The endpoint serves HTTPS through asyncio's ``ssl=`` on the listening server, so the HTTP layer
(elasticmq_py/httpserver.py) reads decrypted bytes exactly as it reads plain ones; with TLS off
nothing is in the path. TLS 1.2 is the oldest version offered (what AWS's endpoints require).

The certificate and key are loaded when the server starts, so that a missing file or a key that
does not belong to the certificate stops ``serve`` with a ConfigError instead of failing every
handshake later.
"""

from __future__ import annotations

import ssl

from elasticmq_py.config import ConfigError, Tls


def server_context(tls: Tls) -> ssl.SSLContext:
    # ssl's own errors name no file ("[SSL] PEM lib (_ssl.c:3905)"): each is opened here first
    for key, path in (("cert-file", tls.cert_file), ("key-file", tls.key_file)):
        try:
            open(path, "rb").close()
        except OSError as e:
            raise ConfigError(f"tls: cannot read {key} {path}: {e.strerror or e}") from None
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(tls.cert_file, tls.key_file)
    except ssl.SSLError as e:
        what = "the key does not belong to the certificate" if "KEY_VALUES_MISMATCH" in str(e) \
            else "not a PEM certificate and its unencrypted PEM private key"
        raise ConfigError(f"tls: cert-file {tls.cert_file}, key-file {tls.key_file}: {what} ({e})") from None
    return ctx


def client_context(cafile: str | None = None, insecure: bool = False) -> ssl.SSLContext | None:
    """For the operator commands: trust ``cafile`` (or the system's CAs), or, ``insecure``,
    anything. None where the defaults do."""
    if insecure:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx
    if cafile is not None:
        try:
            return ssl.create_default_context(cafile=cafile)
        except (OSError, ssl.SSLError) as e:
            raise ConfigError(f"--cafile {cafile}: {e}") from None
    return None
