"""The server as a Python object: start it in-process (from sync or async code) or run it."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from concurrent.futures import Future
from typing import Any

from storage import Storage
from storage.commands import Command, CreateQueue, Namespace
from storage.errors import SqsError

from cluster.clock import SystemClock
from cluster.history import HistoryWriter

from elasticmq_py.admin import ClusterAdmin
from elasticmq_py.backend import Backend, LocalBackend, run
from elasticmq_py.clustered import ClusterBackend
from elasticmq_py.config import Config, ConfigError
from elasticmq_py.dashboard.console import Console
from elasticmq_py.endpoint import Endpoint, EndpointConfig
from elasticmq_py.httpserver import HttpServer, serve
from elasticmq_py.tls import server_context

log = logging.getLogger(__name__)


def _config_error(command: CreateQueue, e: SqsError) -> ConfigError:
    return ConfigError(f"queue {command.name} ({command.ns.region}/{command.ns.account}): {e.code}: {e.message}")


class Server:
    """``with Server(port=0) as s: boto3.client("sqs", endpoint_url=s.endpoint_url, ...)``.

    From synchronous code ``start()`` runs the server on its own event loop in a daemon thread;
    inside a running loop use ``await start_async()`` / ``await stop_async()`` instead.

    ``execute(command)`` is the in-process API: the same typed commands and results as the HTTP
    endpoint, without HTTP. With ``listen=False`` nothing is bound at all.
    """

    def __init__(self, host: str | None = None, port: int | None = None,
                 config: Config | None = None, backend: Backend | None = None,
                 listen: bool = True):
        config = config or Config()
        self.config = config.with_overrides(host=host, port=port)
        self.listen = listen
        self._backend = backend
        self.backend: Backend | None = None
        self.endpoint: Endpoint | None = None
        self._server: HttpServer | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._port: int | None = None

    # -- async ------------------------------------------------------------------------------

    async def start_async(self) -> "Server":
        """Build the node in the order a reader would explain it: the storage backend (local,
        or a cluster member over it), the endpoint in front of it, the backend started with the
        endpoint answering what other members forward, then the HTTP listener."""
        cfg = self.config
        # before anything starts: an unreadable or mismatched pair is a ConfigError here
        tls_context = server_context(cfg.tls) if cfg.tls is not None and self.listen else None
        backend = self._backend
        queues = self._configured_queues()
        admin = None
        if backend is None and cfg.cluster is not None:
            # Each new master creates them through the replicated path; check them here first,
            # so that a bad queue definition fails at start-up on every member.
            self._check_queues(queues)
            backend = ClusterBackend(cfg.cluster, SystemClock(), cfg.limits_profile, on_master=queues)
        elif backend is None and cfg.durability is not None:
            from elasticmq_py.durable import DurableBackend
            backend = DurableBackend(SystemClock(), cfg.durability, cfg.limits_profile, node_name=cfg.node_name)
        elif backend is None:
            backend = LocalBackend(SystemClock(), cfg.limits_profile, node_name=cfg.node_name)
        # the admin secret of the admin routes and the console: [admin]'s, else the cluster's
        secret = cfg.admin_secret or (cfg.cluster.cluster.secret if cfg.cluster is not None else None) or None
        if isinstance(backend, ClusterBackend):
            # a cluster member's backend offers step_down / add_member / remove_member
            admin = ClusterAdmin(backend, secret or "", cfg.admin_from)
            console = Console(secret, cfg.admin_from, cfg.scheme == "https", backend.history)
        else:
            console = Console(secret, cfg.admin_from, cfg.scheme == "https", self._history(), owns_history=True)
        self.backend = backend
        self.endpoint = Endpoint(backend, EndpointConfig(
            account_id=cfg.account_id, region=cfg.region,
            fallback_host=cfg.public_host or f"{cfg.host}:{cfg.port}", scheme=cfg.scheme,
            credentials=cfg.auth.credentials if cfg.auth.enabled else None),
            admin=admin, console=console)
        try:
            await self._start_serving(backend, queues, tls_context)
        except BaseException:
            console.close()   # a single node's history file, opened above
            raise
        return self

    async def _start_serving(self, backend: Any, queues: list, tls_context: Any) -> None:
        """The backend started with the endpoint answering what other members forward, a single
        node's configured queues, then the HTTP listener; the backend stopped if a later step fails."""
        cfg = self.config
        await backend.start(serve_forwarded=self.endpoint.handle_forwarded)
        if not isinstance(backend, ClusterBackend):
            try:
                for command in queues:
                    await self._create(command)
            except BaseException:
                await backend.stop()
                raise
        if self.listen:
            try:
                self._server = await serve(self.endpoint, cfg.host, cfg.port, cfg.max_body_bytes(), ssl=tls_context)
            except BaseException:
                await backend.stop()
                raise
            self._port = self._server.port
            log.info("elasticmq-py listening on %s", self.endpoint_url)

    def _history(self) -> HistoryWriter | None:
        """A single node's history log ([admin] history), where console actions are audited."""
        if self.config.history is None:
            return None
        try:
            return HistoryWriter(self.config.history, self.config.node_name)
        except OSError as e:
            raise ConfigError(f"[admin] history: {e}") from None

    def _configured_queues(self) -> list[CreateQueue]:
        """The [queues] of the configuration as commands, dead-letter queues first."""
        cfg = self.config
        out: list[CreateQueue] = []
        configured = {(q.region or cfg.region, q.account_id or cfg.account_id, q.name) for q in cfg.queues}
        for spec in cfg.queues:
            ns = Namespace(spec.region or cfg.region, spec.account_id or cfg.account_id)
            attrs = dict(spec.attributes)
            if spec.name.endswith(".fifo"):
                attrs.setdefault("FifoQueue", "true")
            dlq = spec.dead_letter_queue
            if dlq is not None:
                if (ns.region, ns.account, dlq.name) not in configured:
                    # a dead-letter queue named only as a target is created with defaults
                    out.append(CreateQueue(ns, dlq.name, {"FifoQueue": "true"} if dlq.name.endswith(".fifo") else {}, {}))
                    configured.add((ns.region, ns.account, dlq.name))
                attrs["RedrivePolicy"] = json.dumps({"deadLetterTargetArn": ns.key(dlq.name).arn,
                                                     "maxReceiveCount": dlq.max_receive_count})
            out.append(CreateQueue(ns, spec.name, attrs, dict(spec.tags)))
        return out

    def _check_queues(self, queues: list[CreateQueue]) -> None:
        scratch = Storage(SystemClock(), limits=self.config.limits_profile)
        for command in queues:
            try:
                scratch.execute(command)
            except SqsError as e:
                raise _config_error(command, e) from None

    async def _create(self, command: CreateQueue) -> None:
        try:
            await run(self.backend, command)
        except SqsError as e:
            raise _config_error(command, e) from None

    # -- the in-process API -----------------------------------------------------------------

    async def execute_async(self, command: Command) -> Any:
        """Run a command on the server's loop; raises ``SqsError`` as the endpoint would."""
        return await run(self.backend, command)

    def execute(self, command: Command) -> Any:
        """The same, from any thread other than the server's own."""
        if self._loop is None:
            raise RuntimeError("execute() needs a server started with start(); use execute_async()")
        return asyncio.run_coroutine_threadsafe(self.execute_async(command), self._loop).result()

    async def stop_async(self) -> None:
        if self._server is not None:
            await self._server.close()
            self._server = None
        if self.backend is not None:
            await self.backend.stop()
        if self.endpoint is not None:
            self.endpoint.console.close()

    async def __aenter__(self) -> "Server":
        return await self.start_async()

    async def __aexit__(self, *exc) -> None:
        await self.stop_async()

    # -- sync -------------------------------------------------------------------------------

    def start(self) -> "Server":
        if self._thread is not None:
            raise RuntimeError("server already started")
        started: Future = Future()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self.start_async())
            except BaseException as e:
                started.set_exception(e)
                loop.close()
                return
            started.set_result(None)
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(self.stop_async())
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()

        self._thread = threading.Thread(target=run, name="elasticmq-py", daemon=True)
        self._thread.start()
        try:
            started.result()
        except BaseException:
            self._thread.join()
            self._thread = None
            raise
        return self

    def stop(self) -> None:
        if self._thread is None:
            return
        loop = self._loop
        if loop is not None and loop.is_running():
            loop.call_soon_threadsafe(loop.stop)
        self._thread.join(timeout=10)
        self._thread = None
        self._loop = None

    def __enter__(self) -> "Server":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- where ------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("server not started")
        return self._port

    @property
    def endpoint_url(self) -> str:
        host = self.config.host
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        if ":" in host:
            host = f"[{host}]"
        return f"{self.config.scheme}://{host}:{self.port}"
