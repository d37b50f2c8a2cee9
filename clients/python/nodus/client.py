"""The nodus client: one HTTP transport with the spec's retry rules, generic resource calls, and the Sandbox, Job,
blob and Function helpers (docs/clients.md).

Retries (spec: "Client retries are finite"): a request is sent at most `1 + max_retries` times. It is retried when the
answer's registered code says a later retry can succeed (the registry's `retryable`), on 429 and 503 without one, and
when no answer came for a request that is safe to send again (GET, PUT, DELETE, PATCH, and a create, which carries
an Idempotency-Key kept across its retries). The wait is the server's Retry-After (or `details.retryAfterSeconds`);
a wait longer than `max_retry_wait` is not slept through: the error is raised at once, with `retry_after` saying how
long the server asked for. Without a server hint the wait doubles from 0.5 s.
"""

import email.utils
import hashlib
import http.client
import json
import random
import socket
import ssl
import time
import urllib.parse
import uuid

from . import _config
from ._handle import Handle, _duration
from .errors import APIConnectionError, APITimeoutError, NodusError, from_response, is_retryable
from .functions import Function

_USER_AGENT = "nodus-python/0.1"

# Methods that are safe to send again when the outcome of the first try is unknown.
_REPLAYABLE = frozenset(["GET", "HEAD", "PUT", "DELETE", "PATCH"])


_COMMAND_TIMEOUT_DEFAULT = 600.0
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def _seconds(duration):
    """Seconds in a duration given as a number or as the API's text ("90s", "2h30m"); the default when unreadable."""
    if not isinstance(duration, str):
        return float(duration)
    total = 0.0
    rest = duration
    while rest:
        digits = len(rest) - len(rest.lstrip("0123456789."))
        unit = "ms" if rest[digits:].startswith("ms") else rest[digits:digits + 1]
        if digits == 0 or unit not in _DURATION_UNITS:
            return _COMMAND_TIMEOUT_DEFAULT
        total += float(rest[:digits]) * _DURATION_UNITS[unit]
        rest = rest[digits + len(unit):]
    return total


def _retry_after(headers, payload):
    """Seconds the server asked to wait (Retry-After: seconds or an HTTP date; else details.retryAfterSeconds)."""
    value = headers.get("retry-after")
    if value:
        value = value.strip()
        if value.isdigit():
            return float(value)
        try:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
        except (TypeError, ValueError):
            pass
    details = payload.get("details") if isinstance(payload, dict) else None
    seconds = details.get("retryAfterSeconds") if isinstance(details, dict) else None
    return float(seconds) if isinstance(seconds, (int, float)) and seconds >= 0 else None


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def json(self):
        return json.loads(self.body.decode("utf-8")) if self.body else None


class StreamedResponse:
    """A 2xx answer whose body is read as it arrives (a watch): `lines()` once, then `close()`."""

    def __init__(self, status, headers, connection, reply):
        self.status = status
        self.headers = headers
        self._connection = connection
        self._reply = reply

    def lines(self):
        """The body's lines as they come (bytes, newline kept); OSError or HTTPException if the connection breaks."""
        while True:
            line = self._reply.readline()
            if not line:
                return
            yield line

    def shutdown(self):
        """Ends the connection from any thread: a read blocked in another thread wakes (close alone may not)."""
        sock = self._connection.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        """Closes the connection (from the thread that reads it)."""
        self._connection.close()


class Client:
    """A nodus API client.

    base_url, token, ca: the server, its API key and the CA that signed its certificate (a PEM file path or PEM text);
    each from its argument, else NODUS_URL / NODUS_TOKEN / NODUS_CA, else the kubeconfig `nodus kubeconfig` prints.
    """

    def __init__(self, base_url=None, token=None, ca=None, *, kubeconfig=None, group="nodus.dev", timeout=60.0,
                 max_retries=3, max_retry_wait=30.0):
        found = _config.resolve(base_url, token, ca, kubeconfig)
        self.base_url = found["base_url"]
        self.token = found["token"]
        self.ca = found["ca"]
        #: The kubeconfig context's namespace, if it names one (a default project for callers that want one).
        self.default_project = found["namespace"]
        self.group = group
        self.timeout = timeout
        self.max_retries = max_retries
        self.max_retry_wait = max_retry_wait
        parsed = urllib.parse.urlsplit(self.base_url)
        self._https = parsed.scheme == "https"
        self._host = parsed.hostname
        self._port = parsed.port or (443 if self._https else 80)
        self._prefix = parsed.path.rstrip("/")
        self._ssl = self._ssl_context() if self._https else None

    def _ssl_context(self):
        if self.ca is None:
            return ssl.create_default_context()
        inline = self.ca.lstrip().startswith("-----BEGIN")
        try:
            return ssl.create_default_context(cadata=self.ca) if inline else ssl.create_default_context(cafile=self.ca)
        except (OSError, ssl.SSLError) as error:
            where = "the CA given as PEM text" if inline else "the CA %s" % self.ca
            raise _config.ConfigurationError("cannot read %s: %s" % (where, error)) from None

    # -- transport ---------------------------------------------------------------------------------------------------

    def _send(self, method, path, body, headers, timeout, stream=False):
        if self._https:
            connection = http.client.HTTPSConnection(self._host, self._port, timeout=timeout, context=self._ssl)
        else:
            connection = http.client.HTTPConnection(self._host, self._port, timeout=timeout)
        try:
            connection.request(method, self._prefix + path, body=body, headers=headers)
            reply = connection.getresponse()
            if stream and 200 <= reply.status < 300:
                streamed = StreamedResponse(reply.status, {k.lower(): v for k, v in reply.getheaders()}, connection, reply)
                connection = None
                return streamed
            data = reply.read()
            return Response(reply.status, {k.lower(): v for k, v in reply.getheaders()}, data)
        finally:
            if connection is not None:
                connection.close()

    def request(self, method, path, *, body=None, json_body=None, content_type=None, query=None, headers=None,
                timeout=None, idempotency_key=None, replayable=None, stream=False):
        """One API request with the client's retries; the Response of a 2xx answer, else the mapped NodusError.

        With `stream`, a 2xx answer is a StreamedResponse, its body read as it arrives; `timeout` then also bounds
        each silence of the body.

        A request whose outcome is unknown (no answer came) is sent again only when `replayable` (default: GET, HEAD,
        PUT, DELETE, PATCH, or any request with an idempotency key).
        """
        if query:
            pairs = [(k, v) for k, v in query.items() if v is not None]
            if pairs:
                path = "%s?%s" % (path, urllib.parse.urlencode(pairs))
        sent = {"Authorization": "Bearer %s" % self.token, "Accept": "application/json", "User-Agent": _USER_AGENT}
        if json_body is not None:
            body = json.dumps(json_body).encode("utf-8")
            content_type = content_type or "application/json"
        if body is not None:
            sent["Content-Type"] = content_type or "application/octet-stream"
        if idempotency_key is not None:
            sent["Idempotency-Key"] = idempotency_key
        sent.update(headers or {})
        if replayable is None:
            replayable = method in _REPLAYABLE or idempotency_key is not None
        timeout = self.timeout if timeout is None else timeout
        attempt = 0
        while True:
            try:
                reply = self._send(method, path, body, sent, timeout, stream)
            except (socket.timeout, TimeoutError) as error:
                failure, wait = APITimeoutError("%s %s: no answer within %gs (%s)" % (method, path, timeout, error)), None
            except (OSError, http.client.HTTPException) as error:
                failure, wait = APIConnectionError("%s %s: cannot reach %s: %s" % (method, path, self.base_url, error)), None
            else:
                if 200 <= reply.status < 300:
                    return reply
                try:
                    payload = reply.json()
                except ValueError:
                    payload = None
                failure = from_response(reply.status, payload, reply.headers.get("x-request-id"))
                if not is_retryable(failure.code, reply.status):
                    raise failure
                wait = _retry_after(reply.headers, payload)
            if isinstance(failure, APIConnectionError) and not replayable:
                raise failure
            if attempt >= self.max_retries:
                raise failure
            if wait is None:
                # No hint: exponential backoff with jitter, within the same bound.
                wait = min(self.max_retry_wait, 0.5 * (2 ** attempt)) * (0.5 + random.random() / 2)
            elif wait > self.max_retry_wait:
                # The server asked for longer than this client waits: say so now rather than sleep for it.
                raise failure
            time.sleep(wait)
            attempt += 1

    def _json(self, method, path, **options):
        return self.request(method, path, **options).json()

    # -- generic resources -------------------------------------------------------------------------------------------

    def path(self, kind_plural, project=None, name=None):
        """The path of a collection or object: /apis/<group>/v1[/namespaces/<project>]/<plural>[/<name>]."""
        parts = ["/apis", self.group, "v1"]
        if project is not None:
            parts += ["namespaces", urllib.parse.quote(project, safe="")]
        parts.append(kind_plural)
        if name is not None:
            parts.append(urllib.parse.quote(name, safe=""))
        return "/".join(parts)

    def create(self, kind_plural, project, body, *, dry_run=False, idempotency_key=None):
        """Creates an object (POST). Every create carries an Idempotency-Key, made once and kept across retries."""
        body = dict(body)
        body.setdefault("apiVersion", "%s/v1" % self.group)
        key = idempotency_key or str(uuid.uuid4())
        return self._json("POST", self.path(kind_plural, project), json_body=body, idempotency_key=key,
                          query={"dryRun": "All" if dry_run else None})

    def get(self, kind_plural, project, name):
        return self._json("GET", self.path(kind_plural, project, name))

    def list(self, kind_plural, project=None, *, label_selector=None, field_selector=None, limit=500):
        """Every object of the collection (following `continue` pages), as a list of dicts."""
        items, token = [], None
        while True:
            page = self._json("GET", self.path(kind_plural, project), query={
                "labelSelector": label_selector, "fieldSelector": field_selector, "limit": limit, "continue": token})
            items.extend(page.get("items") or [])
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return items

    def delete(self, kind_plural, project, name):
        return self._json("DELETE", self.path(kind_plural, project, name))

    def patch(self, kind_plural, project, name, patch):
        """A JSON merge patch (RFC 7386) of the object."""
        return self._json("PATCH", self.path(kind_plural, project, name), json_body=patch,
                          content_type="application/merge-patch+json")

    # -- helpers of kinds --------------------------------------------------------------------------------------------

    def sandbox(self, project, name):
        return Sandbox(self, project, name)

    def job(self, project, name):
        return Job(self, project, name)

    def function(self, project, name):
        return Function(self, project, name)

    def upload_blob(self, data, project=None):
        """Stores bytes in /blobs/v1 (docs/blobs.md) and returns their reference "sha256:<hex>"."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        self.request("PUT", "/blobs/v1/" + digest, body=data, content_type="application/octet-stream",
                     query={"project": project})
        return digest

    def read_blob(self, digest):
        return self.request("GET", "/blobs/v1/" + digest).body


class ExecResult:
    """A foreground command's end: exit_code, stdout, stderr (text), and the rest of the server's answer."""

    def __init__(self, answer):
        self.raw = answer
        self.id = answer.get("id")
        self.exit_code = answer.get("exitCode")
        self.stdout = answer.get("stdout", "")
        self.stderr = answer.get("stderr", "")
        self.duration_ms = answer.get("durationMs")
        self.signal = answer.get("signal")
        self.timed_out = bool(answer.get("timedOut", False))
        self.truncated = bool(answer.get("truncated", False))

    def __repr__(self):
        return "ExecResult(exit_code=%r, stdout=%r, stderr=%r)" % (self.exit_code, self.stdout, self.stderr)


class Sandbox(Handle):
    """A Sandbox's commands and files (docs/sandboxes.md, "Commands and files")."""

    def __init__(self, client, project, name):
        super().__init__(client, project, name)
        self._base = client.path("sandboxes", project, name)

    def exec(self, argv, stdin=None, timeout=None, *, env=None, working_dir=None):
        """Runs argv (no shell unless asked: ["sh", "-c", line]) in the foreground; an ExecResult.

        Not sent again when no answer came (the command may have run); a refusal the server marks retryable
        (SandboxStarting) is.
        """
        command = {"command": list(argv)}
        if stdin is not None:
            command["stdin"] = stdin.decode("utf-8") if isinstance(stdin, bytes) else stdin
        if env:
            command["env"] = dict(env)
        if working_dir is not None:
            command["workingDir"] = working_dir
        # The answer comes when the command ends, and a client that stops waiting kills it (docs/sandboxes.md):
        # wait for the command's own timeout (the server's default, 10 minutes, when none is given), and then some.
        if timeout is not None:
            command["timeout"] = _duration(timeout)
        command_seconds = _COMMAND_TIMEOUT_DEFAULT if timeout is None else _seconds(timeout)
        http_timeout = max(self.client.timeout, command_seconds + 30.0)
        answer = self.client._json("POST", self._base + "/commands", json_body=command, timeout=http_timeout,
                                   replayable=False)
        return ExecResult(answer)

    def read_file(self, path):
        """A file's bytes (a directory answers its JSON listing)."""
        return self.client.request("GET", self._base + "/files", query={"path": path}).body

    def write_file(self, path, data):
        """Writes data (bytes or text) as the file, its parents made."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        self.client.request("PUT", self._base + "/files", query={"path": path}, body=data,
                            content_type="application/octet-stream")

    def delete_file(self, path):
        self.client.request("DELETE", self._base + "/files", query={"path": path})


class Job(Handle):
    """A Job's logs (docs/live.md)."""

    def logs(self, index=0, attempt=None, tail_lines=None):
        """The log text of one index's run (docs/live.md, "Logs"); its latest attempt unless one is named."""
        path = self.client.path("jobs", self.project, self.name) + "/log"
        reply = self.client.request("GET", path, query={"index": index, "attempt": attempt, "tailLines": tail_lines})
        return reply.body.decode("utf-8", errors="replace")


__all__ = ["Client", "ExecResult", "Sandbox", "Job", "NodusError"]
