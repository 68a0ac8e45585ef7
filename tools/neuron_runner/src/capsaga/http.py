"""Outgoing HTTP for neurons, over ``wasi:http/outgoing-handler`` (mirrors the
Rust SDK's ``capsaga_sdk::http``)::

    from capsaga import http

    resp = http.get("https://api.example.com/items?limit=10",
                    headers={"accept": "application/json"})
    if resp.status == 200:
        items = resp.json()

The host checks every request against the neuron's ``net:`` grants, resolves
names itself, refuses private, loopback, link-local and metadata addresses,
and never follows redirects: a 3xx comes back as a :class:`Response` (see
:meth:`Response.location`). A refusal raises a ``permission-denied``
:class:`capsaga.ToolError`; transport failures raise ``network-error`` or
``timeout``. There is no other way out of the sandbox: no sockets.
"""

from urllib.parse import urljoin, urlsplit

from componentize_py_types import Err
from wit_world.imports import outgoing_handler, streams
from wit_world.imports import wasi_http_types as wh

from . import ToolError

__all__ = ["Response", "request", "get", "post", "DEFAULT_MAX_BODY_BYTES"]

#: Default cap on the bytes of a response body read by the neuron.
DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024

_METHODS = {
    "GET": wh.Method_Get,
    "HEAD": wh.Method_Head,
    "POST": wh.Method_Post,
    "PUT": wh.Method_Put,
    "PATCH": wh.Method_Patch,
    "DELETE": wh.Method_Delete,
    "OPTIONS": wh.Method_Options,
}
_CHUNK = 64 * 1024


class Response:
    """An HTTP response: ``status`` (int), ``headers`` (list of ``(name,
    value)`` with lowercase names), ``body`` (bytes) and ``url``."""

    def __init__(self, url, status, headers, body):
        self.url = url
        self.status = status
        self.headers = headers
        self.body = body

    def header(self, name):
        """The first value of header ``name`` (case-insensitive), or None."""
        name = name.lower()
        for k, v in self.headers:
            if k == name:
                return v
        return None

    def text(self, encoding="utf-8"):
        """The body decoded as text (undecodable bytes replaced)."""
        return self.body.decode(encoding, errors="replace")

    def json(self):
        """The body parsed as JSON; ``external-error`` when it is not JSON."""
        import json

        try:
            return json.loads(self.body)
        except ValueError as e:
            raise ToolError.external(
                f"{self.url} answered with a body that is not JSON: {e}",
                llm_hint="the service did not answer JSON; check the URL and the accept header",
            ) from None

    def location(self):
        """For a redirect (301, 302, 303, 307, 308), the absolute URL it
        points to; send a new request to follow it (checked again)."""
        if self.status not in (301, 302, 303, 307, 308):
            return None
        loc = self.header("location")
        return urljoin(self.url, loc.strip()) if loc else None

    def __repr__(self):
        return f"<Response {self.status} from {self.url} ({len(self.body)} bytes)>"


def _split(url):
    bad = ToolError.invalid_args(
        f"`{url}` is not an absolute http(s) URL",
        llm_hint="pass a full URL such as https://example.com/page",
    )
    try:
        parts = urlsplit(url)
    except ValueError:
        raise bad from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.netloc:
        raise bad
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return (wh.Scheme_Https() if scheme == "https" else wh.Scheme_Http()), parts.netloc, path


def _error_from_code(code, url):
    details = {"url": url, "wasi_http_error": type(code).__name__}
    if isinstance(code, wh.ErrorCode_HttpRequestDenied):
        return ToolError.permission_denied(
            f"the host refused the request to {url}: not granted to this neuron, "
            "or a header or method it does not allow",
            llm_hint="only hosts the operator granted are reachable; see the error details "
            "for the host's reason",
            details=details,
        )
    if isinstance(code, wh.ErrorCode_DestinationIpProhibited):
        return ToolError.permission_denied(
            f"the host refused {url}: it resolves to an address neurons may not reach "
            "(private, loopback, link-local, metadata or reserved)",
            llm_hint="use a public host the operator granted",
            details=details,
        )
    if isinstance(code, (wh.ErrorCode_HttpRequestUriInvalid, wh.ErrorCode_HttpRequestUriTooLong)):
        return ToolError.invalid_args(f"invalid URL {url}", details=details)
    if isinstance(code, wh.ErrorCode_HttpRequestMethodInvalid):
        return ToolError.invalid_args(f"method not allowed for {url}", details=details)
    if isinstance(code, wh.ErrorCode_HttpResponseBodySize):
        return ToolError.quota_exceeded(
            f"the response from {url} is larger than the host's cap",
            llm_hint="ask for less data (a range, a page, a smaller resource)",
            details=details,
        )
    timeouts = (
        wh.ErrorCode_DnsTimeout,
        wh.ErrorCode_ConnectionTimeout,
        wh.ErrorCode_ConnectionReadTimeout,
        wh.ErrorCode_ConnectionWriteTimeout,
        wh.ErrorCode_HttpResponseTimeout,
    )
    if isinstance(code, timeouts):
        return ToolError.timeout(f"the request to {url} timed out", details=details)
    if isinstance(code, (wh.ErrorCode_DnsError, wh.ErrorCode_DestinationNotFound)):
        return ToolError.network(f"{url}: the host name did not resolve", details=details)
    return ToolError.network(f"the request to {url} failed", details=details)


def _write_body(req, body):
    out = req.body()
    stream = out.write()
    view = memoryview(body)
    for start in range(0, len(view), 4096):
        stream.blocking_write_and_flush(bytes(view[start : start + 4096]))
    stream.__exit__(None, None, None)
    wh.OutgoingBody.finish(out, None)


def _read_body(resp, url, max_bytes):
    body = resp.consume()
    stream = body.stream()
    chunks = []
    total = 0
    while True:
        try:
            chunk = stream.blocking_read(_CHUNK)
        except Err as e:
            if isinstance(e.value, streams.StreamError_Closed):
                break
            raise ToolError.network(f"reading the response from {url} failed", retriable=True) from None
        total += len(chunk)
        if total > max_bytes:
            raise ToolError.quota_exceeded(
                f"the response from {url} is larger than {max_bytes} bytes",
                llm_hint="ask for less data, or pass a larger max_bytes if the neuron needs it",
            )
        chunks.append(chunk)
    stream.__exit__(None, None, None)
    wh.IncomingBody.finish(body)
    return b"".join(chunks)


def request(method, url, *, headers=None, body=None, max_bytes=DEFAULT_MAX_BODY_BYTES):
    """Send one request and read the whole response (at most ``max_bytes``
    of body). ``headers`` is a dict or a list of pairs; ``body`` bytes or
    str (UTF-8). Returns a :class:`Response` whatever its status.

    Raises :class:`capsaga.ToolError`: ``invalid-args`` (bad URL, method or
    header), ``permission-denied`` (refused by the host), ``network-error``,
    ``timeout``, ``quota-exceeded`` (body over ``max_bytes``).
    """
    m = _METHODS.get(str(method).upper())
    if m is None:
        raise ToolError.invalid_args(
            f"HTTP method `{method}` is not supported", llm_hint="use GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS"
        )
    scheme, authority, path = _split(url)
    pairs = list(headers.items()) if isinstance(headers, dict) else list(headers or [])
    fields = wh.Fields()
    for k, v in pairs:
        try:
            fields.append(str(k).lower(), str(v).encode())
        except Err as e:
            if isinstance(e.value, wh.HeaderError_Forbidden):
                raise ToolError.permission_denied(
                    f"header `{k}` may not be set by a neuron",
                    llm_hint="the host sets Host and routing headers itself; credentials come from "
                    "the operator's secrets",
                ) from None
            raise ToolError.invalid_args(f"header `{k}` is not valid") from None
    req = wh.OutgoingRequest(fields)
    try:
        req.set_method(m())
        req.set_scheme(scheme)
        req.set_authority(authority)
        req.set_path_with_query(path)
    except Err:
        raise ToolError.invalid_args(f"`{url}` cannot be sent as an HTTP request") from None
    payload = body.encode() if isinstance(body, str) else bytes(body or b"")
    if payload:
        _write_body(req, payload)
    try:
        future = outgoing_handler.handle(req, None)
    except Err as e:
        raise _error_from_code(e.value, url) from None
    future.subscribe().block()
    outcome = future.get()  # None | Ok(Ok(response) | Err(error-code)) | Err(())
    if outcome is None or isinstance(outcome, Err):
        raise ToolError.network(f"the request to {url} produced no response", retriable=True)
    inner = outcome.value
    if isinstance(inner, Err):
        raise _error_from_code(inner.value, url) from None
    resp = inner.value
    headers_out = [(k.lower(), v.decode("latin-1")) for k, v in resp.headers().entries()]
    data = _read_body(resp, url, max_bytes)
    return Response(url, resp.status(), headers_out, data)


def get(url, **kw):
    """``request("GET", url, **kw)``."""
    return request("GET", url, **kw)


def post(url, body=None, **kw):
    """``request("POST", url, body=body, **kw)``."""
    return request("POST", url, body=body, **kw)
