/**
 * What the live benches share: JSON calls to a bench server with its admin token, waiting for a condition, percentiles
 * shown one line per measure, and the anchor every live bench prints beside its numbers — `true` in a box with nodus's
 * own bubblewrap arguments (backends/live/Isolation.ts, egress Deny).
 */
import { request } from "node:http"
import { join } from "node:path"
import { detectIsolation, runIsolated } from "../src/backends/live/Isolation.ts"
import { benchToken } from "./Server.ts"

export const call = (
  url: URL,
  method: string,
  path: string,
  body?: unknown,
  contentType = "application/json"
): Promise<{ status: number; text: string }> =>
  new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body)
    const headers = {
      authorization: `Bearer ${benchToken}`,
      ...(payload === undefined ? {} : { "content-type": contentType })
    }
    const req = request(new URL(path, url), { method, headers }, (res) => {
      let text = ""
      res.setEncoding("utf8").on("data", (chunk: string) => (text += chunk)).on("end", () =>
        resolve({ status: res.statusCode ?? 0, text }))
    })
    req.on("error", reject)
    req.end(payload)
  })

export const get = async (url: URL, path: string) => {
  const reply = await call(url, "GET", path)
  return reply.status === 200 ? JSON.parse(reply.text) : undefined
}

/** Polls `check` every `everyMs` until it holds; answers when (performance.now()) it first did. */
export const until = async (what: string, check: () => Promise<boolean>, timeoutMs: number, everyMs = 50) => {
  const deadline = performance.now() + timeoutMs
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`${what}: not within ${timeoutMs / 1000} s`)
    await new Promise((resolve) => setTimeout(resolve, everyMs))
  }
  return performance.now()
}

export const percentile = (values: ReadonlyArray<number>, p: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!
}

export const show = (label: string, values: ReadonlyArray<number>) =>
  values.length === 0
    ? console.log(`${label.padEnd(48)} none`)
    : console.log(
      `${label.padEnd(48)} p50 ${shown(percentile(values, 50))} ms   p99 ${
        shown(percentile(values, 99))
      } ms   (n=${values.length})`
    )

/** Milliseconds with a tenth, or a hundredth below one (a pipe's round trip). */
const shown = (ms: number) => (ms < 1 ? ms.toFixed(2) : ms.toFixed(1)).padStart(7)

const support = detectIsolation()

/** One `true` in nodus's box, timed from the start to its exit. */
export const timeBox = async (root: string, index: number): Promise<number> => {
  const area = join(root, `box-${index}`)
  const started = performance.now()
  const program = runIsolated(
    {
      argv: ["true"],
      env: {},
      workingDir: undefined,
      secretFiles: [],
      egress: "Deny",
      memoryBytes: undefined,
      area,
      logPath: join(area, "log")
    },
    { support, hidden: [] }
  )
  const outcome = await program.exited
  if (outcome.exitCode !== 0) throw new Error(`a bare box exited ${outcome.exitCode ?? outcome.signal}`)
  return performance.now() - started
}

/** Watches a collection and calls `seen(name, phase, at)` for every event (at: performance.now() on arrival). */
export const watchPhases = (
  url: URL,
  collection: string,
  seen: (name: string, phase: string | undefined, at: number) => void
) => {
  const req = request(
    new URL(`${collection}?watch=true`, url),
    { headers: { authorization: `Bearer ${benchToken}` } },
    (res) => {
      let buffer = ""
      res.setEncoding("utf8").on("data", (chunk: string) => {
        const at = performance.now()
        buffer += chunk
        for (let newline = buffer.indexOf("\n"); newline >= 0; newline = buffer.indexOf("\n")) {
          const line = buffer.slice(0, newline)
          buffer = buffer.slice(newline + 1)
          if (line.trim() === "") continue
          const event = JSON.parse(line) as { object?: { metadata?: { name?: string }; status?: { phase?: string } } }
          const name = event.object?.metadata?.name
          if (name !== undefined) seen(name, event.object?.status?.phase, at)
        }
      })
    }
  )
  req.end()
  return () => req.destroy()
}

/**
 * A project for a bench, with credits: a PostgreSQL store starts with none (docs/billing.md), so the operator grants.
 */
export const benchProject = async (url: URL, project: string, reason: string) => {
  const created = await call(url, "POST", "/api/v1/namespaces", {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: project }
  })
  if (created.status !== 201) throw new Error(`namespace: ${created.status} ${created.text}`)
  const grant = {
    apiVersion: "nodus.dev/v1",
    kind: "CreditGrant",
    metadata: { generateName: "bench-" },
    spec: { amountUSD: "1000", source: "Admin", reason }
  }
  const granted = await call(url, "POST", "/apis/nodus.dev/v1/operator/creditgrants", grant)
  if (granted.status !== 201) throw new Error(`credit grant: ${granted.status} ${granted.text}`)
}
