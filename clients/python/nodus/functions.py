"""Calling a Function (spec: Function, FunctionCall): `.spawn()` creates a FunctionCall, `.remote()` waits for its
result, `.map()` makes one call per input in batches of up to 1,000, each batch one request to
`POST .../functions/{name}/map` (docs/functions.md, "Map batches"): all its calls created or none, with one
Idempotency-Key kept across the batch's retries. A map reads its calls' ends from one watch of its label
`<group>/map=<mapId>` (spec: Generic operations, `watch=true`), not a long poll per call (docs/clients.md, "Waiting
for a result").

The server admits and stores FunctionCalls (a missing Function is 404 FunctionNotFound) and answers
`GET .../functioncalls/{name}/result?timeout=<duration>` (the long poll `.get()` uses), but no Function machine runs
calls yet (docs/functions.md): a call ends only when its status is written.
"""

import base64
import collections
import json
import queue
import random
import sys
import threading
import time
import uuid

from .errors import APIConnectionError, APITimeoutError, NotFoundError, RemoteError
from ._handle import Handle, _duration

#: The most calls one map sends per batch (spec: FunctionCallBatchTooLarge above it).
MAP_BATCH = 1000
#: The most JSON one map batch request carries (the server reads at most 3 MiB of a body; 1,000 inline inputs of
#: up to 64 KiB would be far more), so a batch also ends before it would pass this.
MAP_BATCH_BYTES = 2 * 1024 * 1024
#: A JSON input larger than this (base64) goes as a blob (spec: inline payloads are at most 64 KiB).
INLINE_MAX = 64 * 1024
#: How long one long poll of a result asks the server to hold it.
POLL_SECONDS = 55
#: How long one watch of a map asks the server to keep it open (then it is listed and watched again); with bookmarks
#: (every 30 s by default) a watch silent for WATCH_IDLE seconds is taken for lost.
WATCH_SECONDS = 300
WATCH_IDLE = 90.0

_ENDED = ("Succeeded", "Failed", "Cancelled")


def python_minor():
    """The caller's interpreter as the Function's `python` field spells it ("3.12"): pickles do not cross minors."""
    return "%d.%d" % sys.version_info[:2]


class Function(Handle):
    """A Function of a project, to call."""

    def _input(self, args, kwargs):
        raw = json.dumps({"args": list(args), "kwargs": dict(kwargs)}).encode("utf-8")
        encoded = base64.b64encode(raw).decode("ascii")
        if len(encoded) <= INLINE_MAX:
            return {"encoding": "JSON", "inline": encoded}
        return {"encoding": "JSON", "blob": self.client.upload_blob(raw, project=self.project)}

    def _call(self, args, kwargs):
        spec = {"function": self.name, "input": self._input(args, kwargs)}
        body = {
            "kind": "FunctionCall",
            "metadata": {
                "generateName": "%s-" % self.name,
                "annotations": {"%s/python" % self.client.group: python_minor()},
            },
            "spec": spec,
        }
        return self.client.create("functioncalls", self.project, body)

    def spawn(self, *args, **kwargs):
        """Creates a FunctionCall with these arguments (JSON) and returns its handle at once."""
        return FunctionCall(self.client, self.project, self._call(args, kwargs)["metadata"]["name"])

    def remote(self, *args, **kwargs):
        """Calls the Function and waits for its return value (raises RemoteError if it raised)."""
        return self.spawn(*args, **kwargs).get()

    def map(self, inputs, order_outputs=True, return_exceptions=False):
        """Calls the Function once per input (a tuple is spread as positional arguments), in batches of up to 1,000.

        Yields the results in input order (or as calls finish when order_outputs is False); with return_exceptions,
        a RemoteError is yielded instead of raised.
        """
        map_id = uuid.uuid4().hex[:16]
        follower = _MapFollower(self.client, self.project, map_id, order_outputs, return_exceptions)
        try:
            batch, size, start, total = [], 0, 0, 0
            for index, item in enumerate(inputs):
                args = item if isinstance(item, tuple) else (item,)
                payload = self._input(args, {})
                payload_size = len(json.dumps(payload)) + 1
                if total == 0:
                    # Listed and watched before the first batch is sent: no call's end can be missed.
                    follower.start()
                if batch and (len(batch) == MAP_BATCH or size + payload_size > MAP_BATCH_BYTES):
                    follower.created(start, len(batch), self._send_batch(batch, map_id, start))
                    batch, size, start = [], 0, index
                batch.append(payload)
                size += payload_size
                total += 1
            if batch:
                follower.created(start, len(batch), self._send_batch(batch, map_id, start))
            yield from follower.results(total)
        finally:
            follower.close()

    def _send_batch(self, payloads, map_id, start_index):
        """Creates one batch of a map in one request (all or none); its calls as created, in input order."""
        body = {
            "apiVersion": "%s/v1" % self.client.group,
            "kind": "FunctionCallBatch",
            "metadata": {"annotations": {"%s/python" % self.client.group: python_minor()}},
            "mapId": map_id,
            "startIndex": start_index,
            "inputs": payloads,
        }
        path = self.client.path("functions", self.project, self.name) + "/map"
        # One key per batch, kept across its retries: a retried batch is never created twice.
        created = self.client._json("POST", path, json_body=body, idempotency_key=str(uuid.uuid4()))
        return (created or {}).get("items", [])


class FunctionCall(Handle):
    """A handle on one FunctionCall."""

    def object(self):
        return self.client.get("functioncalls", self.project, self.name)

    def done(self):
        return (self.object().get("status") or {}).get("phase") in ("Succeeded", "Failed", "Cancelled")

    def cancel(self):
        return self.client.patch("functioncalls", self.project, self.name, {"spec": {"state": "Cancelled"}})

    def get(self, timeout=None):
        """Waits (long polls) until the call ends and returns its value; APITimeoutError if `timeout` passes first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        path = self.client.path("functioncalls", self.project, self.name) + "/result"
        while True:
            left = POLL_SECONDS if deadline is None else max(0.0, min(POLL_SECONDS, deadline - time.monotonic()))
            call = self.client._json("GET", path, query={"timeout": _duration(int(left))}, timeout=left + 30.0)
            if ((call or {}).get("status") or {}).get("phase") in _ENDED:
                return _outcome(self.client, call)
            if deadline is not None and time.monotonic() >= deadline:
                raise APITimeoutError("FunctionCall %s did not end within %gs" % (self.name, timeout))

    def _decode(self, payload):
        return _decode(self.client, payload)


def _decode(client, payload):
    """A stored payload's value: JSON inline (base64) or in a blob."""
    if not payload:
        return None
    if payload.get("encoding", "JSON") != "JSON":
        raise NotImplementedError("this client reads JSON results only (got %s)" % payload.get("encoding"))
    raw = base64.b64decode(payload["inline"]) if "inline" in payload else client.read_blob(payload["blob"])
    return json.loads(raw.decode("utf-8"))


def _outcome(client, call):
    """An ended call's value; raises RemoteError for a Failed or Cancelled one."""
    status = call.get("status") or {}
    phase = status.get("phase")
    if phase == "Succeeded":
        return _decode(client, status.get("result"))
    error = status.get("error") or {}
    raise RemoteError(error.get("message") or status.get("message") or "the call %s" % phase.lower(),
                      payload=call, remote_type=error.get("type"), remote_traceback=error.get("traceback"))


class _Ended:
    """What a watch's reading thread puts last: why the watch ended (None when the server ended it)."""

    def __init__(self, error):
        self.error = error


class _Watch:
    """One watch, read on a thread of its own into `events` (so a slow consumer of the map never makes the server
    drop a slow watcher), ended by a _Ended. Opening it has the client's retries; its errors are raised here."""

    def __init__(self, client, path, selector, version):
        self.events = queue.Queue()
        self._response = client.request("GET", path, query={
            "watch": "true", "labelSelector": selector, "resourceVersion": version, "allowWatchBookmarks": "true",
            "timeoutSeconds": WATCH_SECONDS}, timeout=WATCH_IDLE, stream=True)
        threading.Thread(target=self._read, name="nodus-map-watch", daemon=True).start()

    def _read(self):
        error = None
        try:
            for line in self._response.lines():
                if line.strip():
                    self.events.put(json.loads(line.decode("utf-8")))
        except Exception as broke:  # noqa: BLE001 - whatever ends the read (a drop, a shutdown, a bad line) ends the watch
            error = APIConnectionError("the watch broke off: %r" % broke)
        finally:
            self._response.close()
            self.events.put(_Ended(error))

    def close(self):
        self._response.shutdown()


class _MapFollower:
    """Follows the calls of one map through one watch of its label `<group>/map=<mapId>` and gives their results, in
    input order (by mapIndex) or as they end.

    A watch that ends (timeoutSeconds, a dropped connection, 410 Expired) is resumed with a new listing and a watch
    from its version, as client-go's reflector does (docs/api-machinery.md, "Lists and watches"): the listing catches
    up on what ended meanwhile; an index gives its result once, however often its end is seen. Watches that end with
    no event count as retries, at most `max_retries` in a row (spec: Errors, "Client retries are finite"). A call gone
    before it ended (a DELETED event, or missing from a listing made after it was created) is NotFoundError, as
    `get` would say.
    """

    def __init__(self, client, project, map_id, order_outputs, return_exceptions):
        self.client = client
        self.map_id = map_id
        self.path = client.path("functioncalls", project)
        self.selector = "%s/map=%s" % (client.group, map_id)
        self.ordered = order_outputs
        self.return_exceptions = return_exceptions
        self.total = None
        self.settled = set()     # indexes whose result is decided
        self.held = {}           # ended calls waiting for an earlier index (in order)
        self.ready = collections.deque()  # results to give, in the order they are given: (value, None) or (None, error)
        self.next = 0
        self.given = 0
        self.answered = {}       # name -> (index, resourceVersion it was answered at), from the batch answers
        self.last_list = (0, set())
        self.watch = None
        self.first = None

    def start(self):
        self.first = self._list()
        self.watch = _Watch(self.client, self.path, self.selector, self.first[0])

    def close(self):
        if self.watch is not None:
            self.watch.close()

    def _list(self):
        """Every call of the map, page by page: (the first page's resourceVersion, which every page reports, items)."""
        items, token, version = [], None, None
        while True:
            page = self.client._json("GET", self.path, query={"labelSelector": self.selector, "limit": 500, "continue": token})
            meta = page.get("metadata") or {}
            version = version or meta.get("resourceVersion")
            items.extend(page.get("items") or [])
            token = meta.get("continue")
            if not token:
                return version or "0", items

    def _index(self, call):
        spec = (call or {}).get("spec") or {}
        index = spec.get("mapIndex")
        if spec.get("mapId") != self.map_id or not isinstance(index, int) or isinstance(index, bool) or index < 0:
            return None
        return index if self.total is None or index < self.total else None

    def _deleted(self, call, name):
        return None, NotFoundError("FunctionCall %s was deleted before it ended" % name, status_code=404,
                                   code="NotFound", payload=call)

    def _settle(self, index, decide):
        """Decides an index once (later sightings of its end are dropped) and queues what may be given now."""
        if index in self.settled:
            return
        self.settled.add(index)
        outcome = decide()
        if not self.ordered:
            self.ready.append(outcome)
            return
        self.held[index] = outcome
        while self.next in self.held:
            self.ready.append(self.held.pop(self.next))
            self.next += 1

    def _ended(self, call):
        try:
            return _outcome(self.client, call), None
        except RemoteError as error:
            return None, error

    def _observe(self, call, gone):
        """A call as a watch event or a listing shows it: decided once it ended, or once it is `gone` unended."""
        index = self._index(call)
        if index is None or index in self.settled:
            return
        if ((call.get("status") or {}).get("phase")) in _ENDED:
            self._settle(index, lambda: self._ended(call))
        elif gone:
            self._settle(index, lambda: self._deleted(call, (call.get("metadata") or {}).get("name")))

    def _missing(self, named):
        """Known calls missing from the last listing though created before it: deleted (their DELETED came first)."""
        version, names = self.last_list
        for name, (index, created) in named:
            if created <= version and name not in names:
                self._settle(index, lambda name=name: self._deleted(None, name))

    def _listed(self, listed):
        version, items = listed
        self.last_list = (int(version), set((item.get("metadata") or {}).get("name") for item in items))
        for item in items:
            self._observe(item, False)
        self._missing(list(self.answered.items()))

    def created(self, start, count, calls):
        """One batch's answer: the calls it created (a replayed batch answers them as they are now)."""
        found, named = set(), []
        for call in calls:
            index = self._index(call)
            if index is None:
                continue
            found.add(index)
            meta = call.get("metadata") or {}
            try:
                version = int(meta.get("resourceVersion"))
            except (TypeError, ValueError):
                version = float("inf")
            self.answered[meta.get("name")] = (index, version)
            named.append((meta.get("name"), (index, version)))
            self._observe(call, False)
        self._missing(named)
        # A batch is created whole: an index its (replayed) answer lacks was deleted since.
        for index in range(start, start + count):
            if index not in found:
                self._settle(index, lambda index=index: self._deleted(None, "%s[%d]" % (self.map_id, index)))

    def _give(self):
        while self.ready:
            value, error = self.ready.popleft()
            self.given += 1
            if error is not None and not self.return_exceptions:
                raise error
            yield error if error is not None else value

    def results(self, total):
        """Every result, from the watch (resumed as it ends) until each of the `total` calls gave one."""
        self.total = total
        if total == 0:
            return
        self._listed(self.first)
        yield from self._give()
        fruitless = 0
        while self.given < total:
            events, broke = 0, None
            while self.given < total:
                event = self.watch.events.get()
                if isinstance(event, _Ended):
                    broke = event.error
                    break
                kind = event.get("type")
                # An ERROR (410 Expired: the version left the change log, or this watcher fell behind) ends the watch.
                if kind == "ERROR":
                    break
                events += 1
                if kind in ("ADDED", "MODIFIED", "DELETED") and isinstance(event.get("object"), dict):
                    self._observe(event["object"], kind == "DELETED")
                    yield from self._give()
            self.watch.close()
            if self.given >= total:
                return
            if events:
                fruitless = 0
            else:
                fruitless += 1
                if fruitless > self.client.max_retries:
                    raise broke or APIConnectionError("the watch of map %s ended %d times in a row without an event"
                                                      % (self.map_id, fruitless))
                time.sleep(min(self.client.max_retry_wait, 0.5 * 2 ** (fruitless - 1)) * (0.5 + random.random() / 2))
            listed = self._list()
            self._listed(listed)
            yield from self._give()
            self.watch = _Watch(self.client, self.path, self.selector, listed[0])
