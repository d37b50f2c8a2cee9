/**
 * Runs the nodus Python client (clients/python) in a real python3, and a scripted HTTP stub for the answers a test
 * server cannot give on demand. Each script ends by printing one JSON line; `report(fn)` in the prelude prints what
 * `fn` returned, or the NodusError it raised with every field the spec gives a client error.
 */
import { assert } from "@effect/vitest"
import { createServer, type IncomingHttpHeaders, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { join } from "node:path"
import { ApiError } from "../../src/core/meta/ApiError.ts"
import type { ErrorCode } from "../../src/core/meta/ErrorCodes.ts"
import { statusBody } from "../../src/http/Respond.ts"
import { pythonPath, run, show } from "../acceptance/Clients.ts"

const clientPath = join(import.meta.dirname, "..", "..", "clients", "python")

const prelude = `
import json, sys
import nodus

def error(e):
    payload = e.payload if isinstance(e.payload, dict) else {}
    return {"error": type(e).__name__, "bases": [c.__name__ for c in type(e).__mro__], "status_code": e.status_code,
            "code": e.code, "request_id": e.request_id, "body_request_id": payload.get("requestId"),
            "payload_reason": payload.get("reason"), "message": e.message, "fix": e.fix, "causes": e.causes,
            "retry_after": e.retry_after}

def report(fn):
    try:
        out = {"ok": fn()}
    except nodus.NodusError as e:
        out = error(e)
    print(json.dumps(out))
`

/** Runs `script` (after the prelude) with clients/python on the path; its last stdout line, parsed. */
export const py = async (script: string, env: Record<string, string> = {}): Promise<any> => {
  const result = await run(pythonPath, ["-c", `${prelude}\n${script}`], {
    timeoutMs: 60_000,
    env: {
      PYTHONPATH: clientPath,
      PYTHONDONTWRITEBYTECODE: "1",
      // Nothing from the environment running the tests: each test says where its client goes.
      NODUS_URL: "",
      NODUS_TOKEN: "",
      NODUS_CA: "",
      KUBECONFIG: "/nonexistent/kubeconfig",
      ...env
    }
  })
  assert.strictEqual(result.code, 0, show(result))
  const last = result.stdout.trim().split("\n").at(-1) ?? ""
  return JSON.parse(last)
}

/** A Status body exactly as the server renders one (src/http/Respond.ts), with its request id. */
export const recordedStatus = (
  code: ErrorCode,
  message: string,
  extra: { readonly retryAfterSeconds?: number; readonly fix?: string } = {}
) => {
  const requestId = `req-recorded-${code}`
  const body = statusBody(new ApiError({ code, message, ...extra }), {
    requestId,
    docsBase: "http://127.0.0.1/docs/errors"
  }) as Record<string, unknown>
  return { status: body["code"] as number, requestId, body }
}

export interface Seen {
  readonly method: string
  readonly url: string
  readonly headers: IncomingHttpHeaders
}

/** What the stub does with one request: an answer, dropping the connection, or never answering. */
export type StubAnswer =
  | { readonly status: number; readonly headers?: Record<string, string>; readonly body?: unknown }
  | "drop"
  | "hang"

export interface Stub {
  readonly url: string
  /** Every request so far, in order. */
  readonly seen: Array<Seen>
  readonly close: () => Promise<void>
}

/** An HTTP server answering request n (from 0) with `answer(n)`; it records every request. */
export const startStub = async (answer: (index: number, seen: Seen) => StubAnswer): Promise<Stub> => {
  const seen: Array<Seen> = []
  const server = createServer((request, response: ServerResponse) => {
    const entry = { method: request.method ?? "", url: request.url ?? "", headers: request.headers }
    seen.push(entry)
    request.resume()
    request.on("end", () => {
      const reply = answer(seen.length - 1, entry)
      if (reply === "hang") return
      if (reply === "drop") {
        request.socket.destroy()
        return
      }
      const text = reply.body === undefined
        ? ""
        : typeof reply.body === "string"
        ? reply.body
        : JSON.stringify(reply.body)
      response.writeHead(reply.status, {
        "content-type": typeof reply.body === "string" ? "text/plain" : "application/json",
        ...reply.headers
      })
      response.end(text)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    close: () => {
      server.closeAllConnections()
      return new Promise((resolve) => server.close(() => resolve()))
    }
  }
}

/** A stub's answer carrying a recorded Status, with the headers the server sends beside it (Respond.ts). */
export const statusAnswer = (
  recorded: ReturnType<typeof recordedStatus>,
  headers: Record<string, string> = {}
): StubAnswer => {
  const retryAfter = (recorded.body["details"] as { retryAfterSeconds?: number } | undefined)?.retryAfterSeconds
  return {
    status: recorded.status,
    headers: {
      "x-request-id": recorded.requestId,
      ...(retryAfter === undefined ? {} : { "retry-after": String(retryAfter) }),
      ...headers
    },
    body: recorded.body
  }
}
