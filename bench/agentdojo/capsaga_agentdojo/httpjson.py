"""A small JSON-over-HTTP server on the loopback interface (standard library
only), shared by the environment service and the scripted model, and a JSON
client for the drivers."""

from __future__ import annotations

import ipaddress
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: A route: (method, path or path prefix ending in ``/``) -> handler(path, body) -> (status, JSON body).
Handler = Callable[[str, Any], tuple[int, Any]]

#: Largest request body accepted, bytes.
MAX_BODY = 16 * 1024 * 1024


class HttpError(Exception):
    """An error answered as ``{"error": message}`` with ``status``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _loopback(host: str) -> None:
    try:
        ok = ipaddress.ip_address(host).is_loopback
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"refusing to listen on {host!r}: only a loopback address (127.0.0.1, ::1) is allowed")


class JsonServer:
    """A threaded HTTP server answering JSON on ``host:port`` (loopback only;
    port 0 picks a free one). ``routes`` maps ``(METHOD, path)`` to a handler;
    a path ending in ``/`` matches every path under it."""

    def __init__(self, routes: dict[tuple[str, str], Handler], host: str = "127.0.0.1", port: int = 0, quiet: bool = True) -> None:
        _loopback(host)
        self.routes = routes
        outer = self

        class _H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt: str, *args: Any) -> None:  # noqa: D401 -- stdlib signature
                if not quiet:
                    super().log_message(fmt, *args)

            def _answer(self, status: int, body: Any) -> None:
                data = json.dumps(body, ensure_ascii=False).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _dispatch(self, method: str) -> None:
                path = self.path.split("?", 1)[0]
                handler = outer._find(method, path)
                if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                    # A client that streams its body (a component's
                    # wasi-http request) sends it in chunks.
                    raw = self._read_chunked()
                    if raw is None:
                        self._answer(413, {"error": f"body over {MAX_BODY} bytes"})
                        return
                else:
                    length = int(self.headers.get("Content-Length") or 0)
                    if length > MAX_BODY:
                        self._answer(413, {"error": f"body over {MAX_BODY} bytes"})
                        return
                    raw = self.rfile.read(length) if length else b""
                if handler is None:
                    self._answer(404, {"error": f"no route {method} {path}"})
                    return
                try:
                    body = json.loads(raw) if raw.strip() else None
                except json.JSONDecodeError as e:
                    self._answer(400, {"error": f"the body is not JSON: {e}"})
                    return
                try:
                    status, out = handler(path, body)
                except HttpError as e:
                    status, out = e.status, {"error": e.message}
                except Exception as e:  # noqa: BLE001 -- a bug answers 500 with its message, the server lives on
                    status, out = 500, {"error": f"{type(e).__name__}: {e}"}
                self._answer(status, out)

            def _read_chunked(self) -> bytes | None:
                """A chunked body, or None past MAX_BODY."""
                out = bytearray()
                while True:
                    size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                    if size == 0:
                        while self.rfile.readline().strip():
                            pass
                        return bytes(out)
                    out += self.rfile.read(size)
                    self.rfile.readline()
                    if len(out) > MAX_BODY:
                        return None

            def do_GET(self) -> None:  # noqa: N802 -- stdlib name
                self._dispatch("GET")

            def do_POST(self) -> None:  # noqa: N802 -- stdlib name
                self._dispatch("POST")

        self.httpd = ThreadingHTTPServer((host, port), _H)
        self.httpd.daemon_threads = True
        self.thread: threading.Thread | None = None

    def _find(self, method: str, path: str) -> Handler | None:
        exact = self.routes.get((method, path))
        if exact is not None:
            return exact
        for (m, p), h in self.routes.items():
            if m == method and p.endswith("/") and path.startswith(p) and len(path) > len(p):
                return h
        return None

    @property
    def port(self) -> int:
        """The port listened on."""
        return self.httpd.server_address[1]

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://{self.httpd.server_address[0]}:{self.port}"

    def start(self) -> "JsonServer":
        """Serve in a background thread."""
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in this thread until interrupted."""
        self.httpd.serve_forever()

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self.httpd.shutdown()
        self.httpd.server_close()


def run_until_interrupted(server: JsonServer, banner: str) -> None:
    """Print ``banner`` and serve in this thread until Ctrl-C."""
    print(banner, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


def request(url: str, body: Any = None, method: str | None = None, timeout: float = 60.0) -> Any:
    """Send ``body`` as JSON (POST, or GET when ``body`` is None and no
    method is given) and return the parsed JSON answer.

    Raises:
        HttpError: a non-2xx answer (its ``error`` message) or no answer.
    """
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method or ("GET" if data is None else "POST"))
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        text = e.read().decode(errors="replace")
        try:
            message = json.loads(text).get("error", text)
        except (json.JSONDecodeError, AttributeError):
            message = text
        raise HttpError(e.code, f"{url}: {e.code}: {message}") from None
    except urllib.error.URLError as e:
        raise HttpError(0, f"{url}: {e.reason}") from None
