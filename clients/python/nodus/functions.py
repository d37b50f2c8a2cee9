"""Calling a Function (spec: Function, FunctionCall): `.spawn()` creates a FunctionCall, `.remote()` waits for its
result, `.map()` makes one call per input in batches of up to 1,000, each batch one request to
`POST .../functions/{name}/map` (docs/functions.md, "Map batches"): all its calls created or none, with one
Idempotency-Key kept across the batch's retries.

The server admits and stores FunctionCalls (a missing Function is 404 FunctionNotFound) and answers
`GET .../functioncalls/{name}/result?timeout=<duration>` (the long poll `.get()` uses), but no Function machine runs
calls yet (docs/functions.md): a call ends only when its status is written.
"""

import base64
import json
import sys
import time
import uuid

from .errors import APITimeoutError, RemoteError
from .client import Handle, _duration

#: The most calls one map sends per batch (spec: FunctionCallBatchTooLarge above it).
MAP_BATCH = 1000
#: The most JSON one map batch request carries (the server reads at most 3 MiB of a body; 1,000 inline inputs of
#: up to 64 KiB would be far more), so a batch also ends before it would pass this.
MAP_BATCH_BYTES = 2 * 1024 * 1024
#: A JSON input larger than this (base64) goes as a blob (spec: inline payloads are at most 64 KiB).
INLINE_MAX = 64 * 1024
#: How long one long poll of a result asks the server to hold it.
POLL_SECONDS = 55


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
        handles = []
        batch, size, start = [], 0, 0
        for index, item in enumerate(inputs):
            args = item if isinstance(item, tuple) else (item,)
            payload = self._input(args, {})
            payload_size = len(json.dumps(payload)) + 1
            if batch and (len(batch) == MAP_BATCH or size + payload_size > MAP_BATCH_BYTES):
                handles += self._send_batch(batch, map_id, start)
                batch, size, start = [], 0, index
            batch.append(payload)
            size += payload_size
        if batch:
            handles += self._send_batch(batch, map_id, start)
        pending = list(handles)
        while pending:
            if order_outputs:
                handle = pending.pop(0)
            else:
                handle = next((h for h in pending if h.done()), pending[0])
                pending.remove(handle)
            try:
                yield handle.get()
            except RemoteError as error:
                if not return_exceptions:
                    raise
                yield error

    def _send_batch(self, payloads, map_id, start_index):
        """Creates one batch of a map in one request (all or none); its calls' handles, in input order."""
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
        return [FunctionCall(self.client, self.project, call["metadata"]["name"]) for call in (created or {}).get("items", [])]


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
            status = (call or {}).get("status") or {}
            phase = status.get("phase")
            if phase == "Succeeded":
                return self._decode(status.get("result"))
            if phase in ("Failed", "Cancelled"):
                error = status.get("error") or {}
                raise RemoteError(error.get("message") or status.get("message") or "the call %s" % phase.lower(),
                                  payload=call, remote_type=error.get("type"), remote_traceback=error.get("traceback"))
            if deadline is not None and time.monotonic() >= deadline:
                raise APITimeoutError("FunctionCall %s did not end within %gs" % (self.name, timeout))

    def _decode(self, payload):
        if not payload:
            return None
        if payload.get("encoding", "JSON") != "JSON":
            raise NotImplementedError("this client reads JSON results only (got %s)" % payload.get("encoding"))
        raw = base64.b64decode(payload["inline"]) if "inline" in payload else self.client.read_blob(payload["blob"])
        return json.loads(raw.decode("utf-8"))
