"""Serving an ASGI app with uvicorn: one HTTP stack for the web door and Slack's HTTP mode.

What a connection may cost is bounded the same way for both:
- a silent or trickling client: uvicorn closes an idle kept-alive connection, but waits for the
  head and the body of a request without limit. `HeadTimeoutH11` closes a connection whose request
  head has not arrived HEAD_TIMEOUT_S after it opened (or after its last response), or whose body
  has not BODY_TIMEOUT_S after its head. Connections are served by one event loop, not a thread
  each: 100 silent connections cost 100 sockets, and past MAX_CONCURRENCY the answer is a 503;
- a burst: the listen backlog is uvicorn's (2,048; http.server's was 5, and the rest of a burst
  had its SYNs dropped);
- work: requests run on the loop, and blocking calls (a search, bolt's dispatch) in its bounded
  thread pool.
Before this, Slack's HTTP mode ran a hand-written http.server with its own pool and timeouts;
it now runs here with the web door's body limits, guard and logging.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable

from ...errors import KbError

HEAD_TIMEOUT_S = 10.0  # a request's head must arrive within this after the connection opens
BODY_TIMEOUT_S = 30.0  # and its body within this after the head (2 MB on a slow 1 Mbit/s link: 17 s)
# Connections and requests at once: past this, uvicorn answers 503 at once instead of running
# out of file descriptors (at 1,024 the accept loop logged "Too many open files" 8,000 times a
# second, 154 MB of log in 40 s).
MAX_CONCURRENCY = 512


def _head_timeout_protocol():
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeadTimeoutH11(H11Protocol):
        """uvicorn's h11 protocol, closing connections whose request head, or whose request's
        body, does not arrive in time. One timer per connection: the head's, then the body's."""

        head_timeout_s = HEAD_TIMEOUT_S
        body_timeout_s = BODY_TIMEOUT_S
        _timer: asyncio.TimerHandle | None = None

        def _arm(self, delay: float, call, *args) -> None:
            self._disarm()
            self._timer = self.loop.call_later(delay, call, *args)

        def _disarm(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

        def connection_made(self, transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm(self.head_timeout_s, self._no_head)

        def handle_events(self) -> None:
            cycle = self.cycle
            super().handle_events()
            if self.cycle is not cycle and self.cycle is not None:  # a request head arrived
                self._arm(self.body_timeout_s, self._no_body, self.cycle)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm(self.head_timeout_s, self._no_head)  # the next request's head

        def connection_lost(self, exc) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _no_head(self) -> None:
            self._timer = None
            if (self.cycle is None or self.cycle.response_complete) and not self.transport.is_closing():
                self.transport.close()

        def _no_body(self, cycle) -> None:
            """A body trickling a byte every few seconds held its connection (and a file
            descriptor) for ever; a request still being answered is left alone."""
            self._timer = None
            if cycle is self.cycle and cycle.more_body and not self.transport.is_closing():
                self.transport.close()

    return HeadTimeoutH11


def config(
    app,
    host: str = "127.0.0.1",
    port: int = 0,
    head_timeout_s: float = HEAD_TIMEOUT_S,
    body_timeout_s: float = BODY_TIMEOUT_S,
):
    """The uvicorn Config every door is served with."""
    import uvicorn

    protocol = _head_timeout_protocol()
    protocol.head_timeout_s, protocol.body_timeout_s = head_timeout_s, body_timeout_s
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=protocol,
        log_level="warning",
        access_log=False,
        limit_concurrency=MAX_CONCURRENCY,
    )


def check_port(host: str, port: int) -> None:
    """Fail before the slow part (loading the index) when the port is taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            raise KbError(
                f"cannot listen on {host}:{port} ({e.strerror}); pick another port with --port"
            ) from e


def launch(
    app, host: str = "127.0.0.1", port: int = 7860, bound: Callable[[int], None] | None = None
) -> None:
    """Serve until interrupted (SIGTERM or Ctrl+C). `bound` is told the port once it is taken
    (port 0: any free one)."""
    import uvicorn

    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        raise KbError(f"cannot listen on {host}:{port} ({e.strerror}); pick another port with --port") from e
    sock.listen(2048)
    if bound is not None:
        bound(sock.getsockname()[1])
    # uvicorn shuts down gracefully on SIGTERM, then raises it again with the handler it found:
    # exiting through SystemExit (not the default handler's instant death) runs the atexit
    # clean-up, e.g. of Gradio's private temp folder.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    # Ctrl+C likewise, by our own handler: with Python's default one in place, asyncio.run puts
    # its own in front, which only cancels the server's task; when uvicorn raises the signal
    # again as it finishes, that cancel can come too late and the process exits 0, not 130.
    signal.signal(signal.SIGINT, _interrupted)
    uvicorn.Server(config(app, host, sock.getsockname()[1])).run(sockets=[sock])


def _interrupted(*_) -> None:
    raise KeyboardInterrupt


class Served:
    """An app served in a background thread on a port of its own (tests, and embedding the
    doors in another program). `address` is (host, port) once `start()` returns."""

    def __init__(
        self,
        app,
        host: str = "127.0.0.1",
        port: int = 0,
        head_timeout_s: float = HEAD_TIMEOUT_S,
        body_timeout_s: float = BODY_TIMEOUT_S,
    ):
        import uvicorn

        self.socket = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.bind((host, port))
        self.socket.listen(2048)  # taken at once, so a burst before start() is queued, not refused
        self.address = self.socket.getsockname()[:2]
        self.server = uvicorn.Server(config(app, host, self.address[1], head_timeout_s, body_timeout_s))
        self._thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.socket]}, name="kb-served", daemon=True
        )

    def start(self, timeout: float = 30.0) -> Served:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise KbError(f"the server on port {self.address[1]} did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(10)
        self.socket.close()
