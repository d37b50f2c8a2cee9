/**
 * A scripted Functions server for both clients' `map` tests (docs/clients.md, "Waiting for a result"): the map batch
 * route, the result long poll, a label-selected list of FunctionCalls and their watch (spec: Generic operations,
 * `watch=true`), over one change log, as the API server keeps one (docs/api-machinery.md, "Lists and watches").
 *
 * A call's input decides how it ends, at once when its batch is created: a number n Succeeds with 2n (inline), the
 * string "big" Succeeds with "big!" stored as a blob, "boom" Fails with ValueError, "gone" is deleted before it ends,
 * "never" does not end.
 * Call 1 ends before call 0, so a map that yields as calls end yields 1 before 0. A watch may be made to end after
 * `watchEvents` events, the way the script's `watchEnd` says: the server ending it (timeoutSeconds), the connection
 * dropped, or an ERROR event with a 410 Expired Status; the client then lists and watches again.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"

export interface MapStubOptions {
  /** Events a watch sends before it ends (default: it does not); 0: it ends at once, every time. */
  readonly watchEvents?: number
  readonly watchEnd?: "end" | "drop" | "expire"
  /** Batch requests answered 503 Unavailable (retryable) before they are served. */
  readonly failBatches?: number
}

export interface MapStub {
  readonly url: string
  /** Every request: method and URL. */
  readonly seen: Array<{ readonly method: string; readonly url: string }>
  /** Every map batch request's body and Idempotency-Key. */
  readonly posts: Array<{ readonly path: string; readonly key: string | undefined; readonly body: any }>
  /** Watch requests, and how many events each one sent. */
  readonly watches: Array<{ readonly resourceVersion: string | null; sent: number }>
  readonly close: () => Promise<void>
}

interface Change {
  readonly resourceVersion: number
  readonly type: "ADDED" | "MODIFIED" | "DELETED"
  readonly object: any
}

const blobDigest = "sha256:" + "b".repeat(64)

export const startMapStub = async (options: MapStubOptions = {}): Promise<MapStub> => {
  const seen: MapStub["seen"] = []
  const posts: MapStub["posts"] = []
  const watches: MapStub["watches"] = []
  const log: Array<Change> = []
  const calls = new Map<string, any>()
  const listeners = new Set<() => void>()
  let failures = options.failBatches ?? 0
  let version = 0

  const record = (type: Change["type"], object: any) => {
    version++
    const stored = { ...object, metadata: { ...object.metadata, resourceVersion: String(version) } }
    if (type === "DELETED") calls.delete(stored.metadata.name)
    else calls.set(stored.metadata.name, stored)
    log.push({ resourceVersion: version, type, object: stored })
    for (const listener of listeners) listener()
    return stored
  }
  const argOf = (payload: { inline: string }) =>
    JSON.parse(Buffer.from(payload.inline, "base64").toString("utf8")).args[0]
  const ended = (call: any) => {
    const arg = argOf(call.spec.input)
    if (arg === "never") return call
    if (arg === "gone") return record("DELETED", call)
    const status = arg === "boom"
      ? { phase: "Failed", error: { type: "ValueError", message: "boom", traceback: "Traceback: …" } }
      : arg === "big"
      ? { phase: "Succeeded", result: { encoding: "JSON", blob: blobDigest } }
      : {
        phase: "Succeeded",
        result: { encoding: "JSON", inline: Buffer.from(JSON.stringify(Number(arg) * 2)).toString("base64") }
      }
    return record("MODIFIED", { ...call, status })
  }

  const json = (response: ServerResponse, status: number, body: unknown) => {
    response.writeHead(status, { "content-type": "application/json" })
    response.end(JSON.stringify(body))
  }
  const selected = (object: any, selector: string | null) =>
    selector === null || `nodus.dev/map=${object.metadata.labels?.["nodus.dev/map"]}` === selector

  const watch = (url: URL, response: ServerResponse) => {
    const entry = { resourceVersion: url.searchParams.get("resourceVersion"), sent: 0 }
    watches.push(entry)
    const selector = url.searchParams.get("labelSelector")
    let position = log.findIndex((change) => change.resourceVersion > Number(entry.resourceVersion ?? 0))
    if (position < 0) position = log.length
    response.writeHead(200, { "content-type": "application/json" })
    response.flushHeaders()
    if (options.watchEvents === 0) return void response.end()
    const pump = () => {
      while (position < log.length) {
        const change = log[position++]!
        if (!selected(change.object, selector)) continue
        if (options.watchEvents !== undefined && entry.sent >= options.watchEvents) {
          listeners.delete(pump)
          // The connection closes mid-body (what was written reaches the client first; no last chunk follows).
          if (options.watchEnd === "drop") response.socket?.end()
          else if (options.watchEnd === "expire") {
            response.end(
              JSON.stringify({
                type: "ERROR",
                object: {
                  kind: "Status",
                  apiVersion: "v1",
                  status: "Failure",
                  reason: "Expired",
                  code: 410,
                  message: "too old resource version"
                }
              }) + "\n"
            )
          } else response.end()
          return
        }
        entry.sent++
        response.write(JSON.stringify({ type: change.type, object: change.object }) + "\n")
      }
    }
    listeners.add(pump)
    response.on("close", () => listeners.delete(pump))
    pump()
  }

  const handle = (request: IncomingMessage, response: ServerResponse, text: string) => {
    const url = new URL(request.url ?? "/", "http://stub")
    if (request.method === "POST" && url.pathname.endsWith("/map")) {
      const batch = JSON.parse(text)
      posts.push({ path: url.pathname, key: request.headers["idempotency-key"] as string | undefined, body: batch })
      if (failures-- > 0) {
        return json(response, 503, {
          kind: "Status",
          apiVersion: "v1",
          status: "Failure",
          reason: "Unavailable",
          code: 503,
          message: "unavailable",
          details: { retryAfterSeconds: 0 }
        })
      }
      const created = batch.inputs.map((payload: { inline: string }, index: number) => {
        const mapIndex = batch.startIndex + index
        return record("ADDED", {
          apiVersion: "nodus.dev/v1",
          kind: "FunctionCall",
          metadata: {
            name: `call-${batch.mapId}-${mapIndex}`,
            namespace: "p",
            labels: { "nodus.dev/map": batch.mapId }
          },
          spec: { function: "double", input: payload, mapId: batch.mapId, mapIndex },
          status: { phase: "Pending" }
        })
      })
      // The answer names the calls as created; their ends follow in the log one by one, call 1's before call 0's, so
      // that watches which end early leave some ends to the listing and some to the next watch.
      json(response, 201, {
        apiVersion: "nodus.dev/v1",
        kind: "FunctionCallList",
        metadata: { resourceVersion: String(version) },
        items: created
      })
      const order = created.length > 1 ? [created[1], created[0], ...created.slice(2)] : created
      order.forEach((call: any, at: number) =>
        setTimeout(() => ended(call), Math.floor(at / (options.watchEvents === undefined ? 20 : 1)))
      )
      return
    }
    if (request.method === "POST") {
      const body = JSON.parse(text)
      const created = record("ADDED", {
        ...body,
        metadata: { name: `call-single-${version}`, namespace: "p" },
        status: { phase: "Pending" }
      })
      json(response, 201, created)
      ended(created)
      return
    }
    if (url.pathname.startsWith("/blobs/v1/")) {
      response.writeHead(200, { "content-type": "application/octet-stream" })
      return response.end(JSON.stringify("big!"))
    }
    if (url.pathname.endsWith("/result")) {
      const call = calls.get(url.pathname.split("/").at(-2)!)
      return call === undefined
        ? json(response, 404, {
          kind: "Status",
          apiVersion: "v1",
          status: "Failure",
          reason: "NotFound",
          code: 404,
          message: "not found"
        })
        : json(response, 200, call)
    }
    if (url.searchParams.get("watch") === "true") return watch(url, response)
    const selector = url.searchParams.get("labelSelector")
    const items = [...calls.values()].filter((call) => selected(call, selector))
    return json(response, 200, {
      apiVersion: "nodus.dev/v1",
      kind: "FunctionCallList",
      metadata: { resourceVersion: String(version) },
      items
    })
  }

  const server = createServer((request, response) => {
    seen.push({ method: request.method ?? "", url: request.url ?? "" })
    let text = ""
    request.on("data", (chunk: Buffer) => (text += chunk.toString("utf8")))
    request.on("end", () => handle(request, response, text))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    posts,
    watches,
    close: () => {
      server.closeAllConnections()
      return new Promise((resolve) => server.close(() => resolve()))
    }
  }
}
