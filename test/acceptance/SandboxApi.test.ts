/**
 * Acceptance: a Sandbox's commands and files API over HTTP on a live host (docs/sandboxes.md, "Commands and files"),
 * what the other acceptance files leave out: the 409s of a Sandbox not Running (SandboxStarting, SandboxNotRunning)
 * with their fixes, 429 StdinBackpressure, 413 FileTooLarge, paths (`..`, symlinks) that stay in the box's view, a
 * followed log that streams before the command exits, a dry run's estimate, one Sandbox's files and processes out of
 * another's reach, and a secret that reaches the box's env but never status, events, the store or the server's logs.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { createHash } from "node:crypto"
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { vi } from "vitest"
import { eventually } from "../support/Eventually.ts"
import { request, startTestServer, type TestServer } from "../support/TestServer.ts"

let server: TestServer
const namespace = "api"
const secretValue = "api-s3cr3t-9d2e71"
/** Every line the server (and its in-process agent) logged while this file ran. */
const logged: Array<string> = []
let spies: ReadonlyArray<{ readonly mockRestore: () => void }> = []

const sandboxes = `/apis/nodus.dev/v1/namespaces/${namespace}/sandboxes`
const at = (name: string) => `${sandboxes}/${name}`
const commandAt = (name: string, id: string) => `${at(name)}/commands/${id}`
const fileAt = (name: string, path: string) => `${at(name)}/files?path=${encodeURIComponent(path)}`

const sandbox = (name: string, spec: Record<string, unknown> = {}) => ({
  apiVersion: "nodus.dev/v1",
  kind: "Sandbox",
  metadata: { name },
  spec: { image: "debian:12", ...spec }
})

const create = async (name: string, spec: Record<string, unknown> = {}) => {
  const created = await request(server, "POST", sandboxes, { body: sandbox(name, spec) })
  assert.strictEqual(created.status, 201, created.text)
  return created.body
}

const phaseOf = async (name: string) =>
  (await request(server, "GET", at(name))).body?.status?.phase as string | undefined

const inPhase = (name: string, phase: string) =>
  eventually(`${name} is ${phase}`, async () => (await phaseOf(name)) === phase, { timeoutMs: 30_000 })

const exec = (name: string, command: ReadonlyArray<string>, extra: Record<string, unknown> = {}) =>
  request(server, "POST", `${at(name)}/commands`, { body: { command, ...extra } })

/** A foreground command that must succeed: its stdout. */
const run = async (name: string, script: string) => {
  const reply = await exec(name, ["sh", "-c", script])
  assert.strictEqual(reply.status, 200, reply.text)
  return reply.body.stdout as string
}

const bytes = (body: string) => ({ raw: body, contentType: "application/octet-stream" })

/** The Status a refusal answers: its code, reason and fix (every error to a client has one). */
const assertRefused = (
  reply: { readonly status: number; readonly text: string; readonly body: any },
  status: number,
  reason: string
) => {
  assert.strictEqual(reply.status, status, reply.text)
  assert.strictEqual(reply.body?.kind, "Status", reply.text)
  assert.strictEqual(reply.body.reason, reason, reply.text)
  assert.isString(reply.body.fix)
  return reply.body
}

/** Every file under `dir` this process may read (the host's view), missing or unreadable ones skipped. */
const filesUnder = (dir: string): ReadonlyArray<string> => {
  let entries
  try {
    entries = readdirSync(dir, { withFileTypes: true })
  } catch {
    return []
  }
  return entries.flatMap((entry) => {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) return filesUnder(path)
    return entry.isFile() ? [path] : []
  })
}

/** The host pid of the process whose command line (NUL-separated, as /proc has it) is `cmdline`. */
const hostPidOf = (cmdline: string): string | undefined =>
  readdirSync("/proc").filter((entry) => /^[0-9]+$/u.test(entry)).find((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, "utf8") === cmdline
    } catch {
      return false
    }
  })

beforeAll(async () => {
  const capture = (...args: ReadonlyArray<unknown>) => void logged.push(args.map(String).join(" "))
  spies = (["log", "error", "warn", "info", "debug"] as const).map((method) =>
    vi.spyOn(console, method).mockImplementation(capture)
  )
  server = await startTestServer({ local: true })
  assert.strictEqual(
    (await request(server, "POST", "/api/v1/namespaces", { body: { metadata: { name: namespace } } })).status,
    201
  )
  const secret = await request(server, "POST", `/apis/nodus.dev/v1/namespaces/${namespace}/secrets`, {
    body: {
      apiVersion: "nodus.dev/v1",
      kind: "Secret",
      metadata: { name: "token" },
      spec: { data: { API_TOKEN: secretValue } }
    }
  })
  assert.strictEqual(secret.status, 201, secret.text)
  // Its main process prints the secret: what a box prints is its caller's, never the server's logs or status.
  await create("box", {
    secrets: ["token"],
    command: ["sh", "-c", "echo main sees $API_TOKEN; echo main warns $API_TOKEN >&2; exec sleep 3600"]
  })
  await inPhase("box", "Running")
})

afterAll(async () => {
  await server?.stop()
  for (const spy of spies) spy.mockRestore()
})

describe("a Sandbox not Running refuses its box's requests with a fix", () => {
  it("SandboxStarting (409, retry after 1 s) while it waits for capacity", async () => {
    // No host has 512 vCPUs: it stays Pending, and its box takes nothing yet.
    await create("waiting", { resources: { cpu: "512" } })
    await inPhase("waiting", "Pending")
    for (
      const reply of [
        await exec("waiting", ["true"]),
        await request(server, "GET", fileAt("waiting", "/workspace")),
        await request(server, "PUT", fileAt("waiting", "/workspace/a"), bytes("a"))
      ]
    ) {
      const body = assertRefused(reply, 409, "SandboxStarting")
      assert.include(body.message, "Pending")
      assert.strictEqual(body.details.retryAfterSeconds, 1)
      assert.strictEqual(reply.headers.get("retry-after"), "1")
      assert.include(body.fix, "phase is Running")
    }
    assert.strictEqual((await request(server, "DELETE", at("waiting"))).status, 200)
  })

  it("SandboxNotRunning (409) while spec.state is Stopped, saying how to start it", async () => {
    await create("dormant", { state: "Stopped" })
    await inPhase("dormant", "Stopped")
    for (
      const reply of [
        await exec("dormant", ["true"]),
        await request(server, "GET", fileAt("dormant", "/workspace")),
        await request(server, "POST", `${commandAt("dormant", "cmd-none")}/kill`)
      ]
    ) {
      const body = assertRefused(reply, 409, "SandboxNotRunning")
      assert.include(body.message, "Stopped")
      assert.include(body.fix, "spec.state")
      assert.isUndefined(reply.headers.get("retry-after") ?? undefined)
    }
    assert.strictEqual((await request(server, "DELETE", at("dormant"))).status, 200)
  })
})

describe("commands over HTTP", () => {
  it("follows a command's log while it runs, then to its exit", async () => {
    // It prints, then waits for a line on stdin: it cannot exit before the test has seen its first output.
    const started = await exec("box", ["sh", "-c", "echo first; read line; echo \"got $line\""], { background: true })
    assert.strictEqual(started.status, 201, started.text)
    const id = started.body.id as string
    const response = await fetch(`${server.url}${commandAt("box", id)}/log?follow=true`, {
      headers: { authorization: `Bearer ${server.token}` },
      signal: AbortSignal.timeout(20_000)
    })
    assert.strictEqual(response.status, 200)
    const reader = response.body!.getReader()
    const decoder = new TextDecoder()
    let seen = ""
    let ended = false
    const readUntil = async (what: string) => {
      while (!seen.includes(what) && !ended) {
        const chunk = await reader.read()
        if (chunk.done) ended = true
        else seen += decoder.decode(chunk.value, { stream: true })
      }
    }
    await readUntil("first\n")
    assert.strictEqual(seen, "first\n")
    assert.isFalse(ended)
    assert.strictEqual((await request(server, "GET", commandAt("box", id))).body.phase, "Running")
    assert.strictEqual((await request(server, "POST", `${commandAt("box", id)}/stdin`, bytes("go\n"))).status, 200)
    await readUntil("\u0000never")
    assert.strictEqual(seen, "first\ngot go\n")
    assert.deepInclude((await request(server, "GET", commandAt("box", id))).body, { phase: "Exited", exitCode: 0 })
  })

  it("415 UnsupportedMediaType for a command body that is not JSON, as a Function's map answers", async () => {
    for (const contentType of ["text/plain", "application/x-www-form-urlencoded", "application/octet-stream"]) {
      const reply = await request(server, "POST", `${at("box")}/commands`, {
        raw: JSON.stringify({ command: ["touch", "/workspace/by-form"] }),
        contentType
      })
      const body = assertRefused(reply, 415, "UnsupportedMediaType")
      assert.include(body.message, contentType)
    }
    assert.strictEqual(await run("box", "test -e /workspace/by-form && echo ran || echo not run"), "not run\n")
    // JSON with parameters is taken.
    const json = await request(server, "POST", `${at("box")}/commands`, {
      raw: JSON.stringify({ command: ["echo", "json"] }),
      contentType: "application/json; charset=utf-8"
    })
    assert.strictEqual(json.body.stdout, "json\n", json.text)
  })

  it("lists the box's commands, running and exited; a foreground command whose client goes is killed, a background one runs on", async () => {
    const list = async () => {
      const reply = await request(server, "GET", `${at("box")}/commands`)
      assert.strictEqual(reply.status, 200, reply.text)
      return reply.body.items as ReadonlyArray<Record<string, any>>
    }
    const background = await exec("box", ["sleep", "1002"], { background: true })
    assert.strictEqual(background.status, 201, background.text)
    // A foreground command whose client gives up while it runs.
    const client = new AbortController()
    const foreground = fetch(`${server.url}${at("box")}/commands`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.token}`, "content-type": "application/json" },
      body: JSON.stringify({ command: ["sleep", "1001"] }),
      signal: client.signal
    }).catch((error: Error) => error)
    let running: Record<string, any> | undefined
    await eventually(
      "the foreground sleep is listed Running",
      async () =>
        (running = (await list()).find((command) =>
          command.command.join(" ") === "sleep 1001" && command.phase === "Running"
        )) !== undefined,
      { timeoutMs: 20_000 }
    )
    await eventually("the sleep runs on the host", () => hostPidOf("sleep\u00001001\u0000") !== undefined, {
      timeoutMs: 15_000
    })
    client.abort()
    assert.instanceOf(await foreground, Error)
    await eventually(
      "the foreground sleep is killed",
      async () => (await list()).find((command) => command.id === running!.id)?.signal === "SIGKILL",
      { timeoutMs: 20_000 }
    )
    assert.isUndefined(hostPidOf("sleep\u00001001\u0000"), "the sleep is gone from the host")
    // The background one, and the Sandbox's main process, run on; the listing has them, oldest first.
    const items = await list()
    const ids = items.map((command) => command.id)
    assert.deepInclude(items.find((command) => command.id === background.body.id), {
      phase: "Running",
      command: ["sleep", "1002"]
    })
    assert.strictEqual(items.find((command) => command.id === "main")?.phase, "Running")
    assert.isBelow(ids.indexOf(background.body.id), ids.indexOf(running!.id))
    assert.strictEqual((await request(server, "POST", `${commandAt("box", background.body.id)}/kill`)).status, 200)
    await eventually(
      "the background sleep is Exited",
      async () => (await list()).find((command) => command.id === background.body.id)?.phase === "Exited",
      { timeoutMs: 20_000 }
    )
  })

  it(
    "a command's output past its bound: the answer says it is truncated and how much was dropped, the log read too",
    async () => {
      const total = 20_000_000
      const reply = await exec("box", ["sh", "-c", `yes 0123456789abcde | head -c ${total}`])
      assert.strictEqual(reply.status, 200, reply.text.slice(0, 300))
      assert.isTrue(reply.body.truncated)
      // It keeps the last 16 MiB of a command (less when its box or its host holds more): the rest is dropped, and
      // said.
      const dropped = reply.body.droppedBytes as number
      assert.isAtLeast(dropped, total - 16 * 1024 * 1024)
      // The answer carries the last 4 MiB of stdout.
      assert.strictEqual(reply.body.stdout.length, 4 * 1024 * 1024)
      assert.isTrue(reply.body.stdout.endsWith("0123456789abcde\n0123456789abcde\n"), reply.body.stdout.slice(-40))
      assert.strictEqual((await request(server, "GET", commandAt("box", reply.body.id))).body.droppedBytes, dropped)
      const log = await fetch(`${server.url}${commandAt("box", reply.body.id)}/log`, {
        headers: { authorization: `Bearer ${server.token}` }
      })
      assert.strictEqual(log.headers.get("nodus-output-dropped-bytes"), String(dropped))
      assert.strictEqual((await log.arrayBuffer()).byteLength, total - dropped)
    },
    60_000
  )

  it("429 StdinBackpressure while a command has not read its stdin; 409 once its stdin is closed", async () => {
    const started = await exec("box", ["sleep", "600"], { background: true })
    assert.strictEqual(started.status, 201, started.text)
    const stdin = `${commandAt("box", started.body.id)}/stdin`
    const chunk = "x".repeat(512 * 1024)
    let refused: Awaited<ReturnType<typeof request>> | undefined
    // More than 1 MiB unread is refused: at most three writes of 512 KiB, past the pipe's own buffer.
    for (let writes = 0; writes < 16 && refused === undefined; writes++) {
      const reply = await request(server, "POST", stdin, bytes(chunk))
      if (reply.status !== 200) refused = reply
    }
    assert.isDefined(refused, "every write was taken")
    const body = assertRefused(refused!, 429, "StdinBackpressure")
    assert.strictEqual(body.details.retryAfterSeconds, 1)
    assert.strictEqual(refused!.headers.get("retry-after"), "1")
    assert.include(body.fix, "retry")

    // It reads to the end, then runs on: its stdin is closed, the command is not.
    const reader = await exec("box", ["sh", "-c", "cat > /dev/null; exec sleep 600"], { background: true })
    const readerStdin = `${commandAt("box", reader.body.id)}/stdin?close=true`
    assert.strictEqual((await request(server, "POST", readerStdin, bytes("last"))).status, 200)
    assertRefused(await request(server, "POST", readerStdin, bytes("more")), 409, "Conflict")
    for (const id of [started.body.id, reader.body.id]) {
      assert.strictEqual((await request(server, "POST", `${commandAt("box", id)}/kill`)).status, 200)
    }
  })
})

describe("files over HTTP", () => {
  const limit = 16 * 1024 * 1024

  it("a path that names no readable file is the client's mistake (4xx with the field and a fix), never a 5xx", async () => {
    // Each says it is a file of 0 bytes, and refuses to be read as one (EIO, EINVAL).
    for (const path of ["/proc/self/mem", "/proc/self/pagemap"]) {
      const refused = assertRefused(await request(server, "GET", fileAt("box", path)), 422, "Invalid")
      assert.strictEqual(refused.details.causes[0].field, "path", JSON.stringify(refused))
      assert.include(refused.fix, "cat")
    }
    // A /proc file that reads as text comes whole.
    const status = await request(server, "GET", fileAt("box", "/proc/self/status"))
    assert.strictEqual(status.status, 200, status.text)
    assert.include(status.text, "Pid:")
  })

  it("413 FileTooLarge for a PUT above 16 MiB (nothing written) and for a GET of a larger file", async () => {
    const put = await request(server, "PUT", fileAt("box", "/workspace/huge"), bytes("y".repeat(limit + 1)))
    const body = assertRefused(put, 413, "FileTooLarge")
    assert.include(body.message, String(limit))
    assertRefused(await request(server, "GET", fileAt("box", "/workspace/huge")), 404, "NotFound")
    // At the bound exactly, it is taken.
    assert.strictEqual(
      (await request(server, "PUT", fileAt("box", "/workspace/edge"), bytes("z".repeat(limit)))).status,
      200
    )
    assert.strictEqual(
      await run("box", "stat -c %s /workspace/edge; head -c 1 /dev/zero >> /workspace/edge"),
      `${limit}\n`
    )
    assertRefused(await request(server, "GET", fileAt("box", "/workspace/edge")), 413, "FileTooLarge")
    await run("box", "rm /workspace/edge")
    // (A 16 MiB file crosses the box's channel as base64 in JSON lines: seconds on a busy 2-core machine.)
  }, 60_000)

  it("resolves `..` and symlinks in the box's view: no path reaches a host file", async () => {
    // A host file beside the server's data: its directory exists on the host, not in the box.
    const hostFile = join(server.directory, "host-only.txt")
    writeFileSync(hostFile, "host-marker")
    // `..` above the root is the root (the box's): the host path is not there.
    for (const path of [`/workspace/../../..${hostFile}`, `../../../../../../..${hostFile}`]) {
      const read = await request(server, "GET", fileAt("box", path))
      assert.notInclude(read.text, "host-marker")
      assertRefused(read, 404, "NotFound")
    }
    // A relative symlink climbing far enough to leave the box's /workspace on the host would reach the host's root if
    // the server followed it on the host; in the box it is the box's root.
    await run(
      "box",
      `ln -s ../../../../../../../../../.. /workspace/up; ln -s ${server.directory} /workspace/dir; ln -s ${hostFile} /workspace/file`
    )
    for (const path of [`/workspace/up${hostFile}`, "/workspace/file", "/workspace/dir/host-only.txt"]) {
      const read = await request(server, "GET", fileAt("box", path))
      assert.notInclude(read.text, "host-marker", path)
      assertRefused(read, 404, "NotFound")
    }
    // Writes through them land in the box (or nowhere), never on the host.
    const planted = [
      `/workspace/up${server.directory}/planted-up`,
      "/workspace/dir/planted-dir",
      `/workspace/../..${server.directory}/planted-dots`
    ]
    for (const path of planted) await request(server, "PUT", fileAt("box", path), bytes("planted"))
    for (const name of ["planted-up", "planted-dir", "planted-dots"]) {
      assert.isFalse(existsSync(join(server.directory, name)), name)
    }
    assert.strictEqual(readFileSync(hostFile, "utf8"), "host-marker")
    // What `..` named is the box's own /tmp, which a command in the box reads back.
    assert.strictEqual(
      (await request(server, "PUT", fileAt("box", "/workspace/../tmp/dots"), bytes("in the box"))).status,
      200
    )
    assert.strictEqual(await run("box", "cat /tmp/dots"), "in the box")
    await run("box", "rm -f /workspace/up /workspace/dir /workspace/file")
  })
})

describe("a dry run of a Sandbox", () => {
  it("carries the estimate a create would, and creates nothing", async () => {
    const dry = await request(server, "POST", `${sandboxes}?dryRun=All`, {
      body: sandbox("planned", { lifecycle: { idleTimeout: "10m", maxLifetime: "2h" } })
    })
    assert.strictEqual(dry.status, 201, dry.text)
    assert.match(dry.headers.get("etag") ?? "", /^"dryrun\./u)
    const estimate = dry.body.status.estimate
    assert.match(estimate.rateUSDPerHour, /^[0-9]+(\.[0-9]+)?$/u)
    assert.isString(estimate.holdUSD)
    assert.strictEqual(estimate.placementPreview.offering, "local")
    // p50 is one start idle until its idleTimeout, p90 its whole maxLifetime (docs/kinds/Sandbox.md, "Estimate").
    const rate = Number(estimate.rateUSDPerHour)
    assert.isAbove(rate, 0)
    assert.closeTo(Number(estimate.costUSD.p50), rate * (10 / 60), 0.000001)
    assert.closeTo(Number(estimate.costUSD.p90), rate * 2, 0.000001)
    assert.include(estimate.warnings.map((warning: { code: string }) => warning.code), "UsageDependent")
    assert.isUndefined(estimate.blockingReasons)
    assertRefused(await request(server, "GET", at("planned")), 404, "NotFound")
    const created = await request(server, "POST", sandboxes, {
      body: sandbox("planned", { state: "Stopped", lifecycle: { idleTimeout: "10m", maxLifetime: "2h" } })
    })
    assert.strictEqual(created.status, 201, created.text)
    assert.deepStrictEqual(created.body.status.estimate.costUSD, estimate.costUSD)
    assert.strictEqual((await request(server, "DELETE", at("planned"))).status, 200)
  })

  it("whose first hold is above maxCostUSD: the dry run lists BudgetExceeded, the create is refused with it", async () => {
    const capped = sandbox("capped", { maxCostUSD: "0.000001" })
    const dry = await request(server, "POST", `${sandboxes}?dryRun=All`, { body: capped })
    assert.strictEqual(dry.status, 201, dry.text)
    assert.deepStrictEqual(dry.body.status.estimate.blockingReasons.map((reason: { code: string }) => reason.code), [
      "BudgetExceeded"
    ])
    const refused = await request(server, "POST", sandboxes, { body: capped })
    assert.include(assertRefused(refused, 402, "BudgetExceeded").fix, "maxCostUSD")
    assertRefused(await request(server, "GET", at("capped")), 404, "NotFound")
  })

  it("of one no host can take: a warning that it would wait, and nothing blocks it", async () => {
    const dry = await request(server, "POST", `${sandboxes}?dryRun=All`, {
      body: sandbox("huge", { resources: { cpu: "512" } })
    })
    assert.strictEqual(dry.status, 201, dry.text)
    assert.deepStrictEqual(dry.body.status.estimate.warnings.map((warning: { code: string }) => warning.code), [
      "NoMatchingOffering"
    ])
    assert.isUndefined(dry.body.status.estimate.rateUSDPerHour)
  })
})

describe("isolation between Sandboxes, and of a secret", () => {
  it("one Sandbox sees neither another's files nor its processes", async () => {
    await create("neighbour")
    await inPhase("neighbour", "Running")
    await run("neighbour", "echo neighbour-data > /workspace/neighbour-marker")
    const sleeper = await exec("neighbour", ["sleep", "86399"], { background: true })
    assert.strictEqual(sleeper.status, 201, sleeper.text)
    // Where the neighbour's /workspace is on the host (runs' areas are outside the data directory, where the local
    // backend puts them: docs/live.md, "Isolation"), and its sleep's host pid.
    const runsDir = join(
      tmpdir(),
      `nodus-runs-${createHash("sha256").update(resolve(join(server.directory, "data"))).digest("hex").slice(0, 12)}`
    )
    const marker = filesUnder(runsDir).find((path) => path.endsWith("/workspace/neighbour-marker"))
    assert.isDefined(marker, `the neighbour's /workspace is under ${runsDir}`)
    // (The box's process starts a moment after the answer: the supervisor spawns it.)
    let hostPid: string | undefined
    await eventually(
      "the neighbour's sleep runs on this host",
      () => (hostPid = hostPidOf("sleep\u000086399\u0000")) !== undefined,
      { timeoutMs: 10_000 }
    )
    const probe = await run(
      "box",
      [
        `cat ${marker} 2>/dev/null && echo READ-NEIGHBOUR-FILE`,
        `ls ${dirname(marker!)} >/dev/null 2>&1 && echo LISTED-NEIGHBOUR`,
        "find /workspace /tmp /run -name neighbour-marker 2>/dev/null",
        // (The pattern matches neither its own grep's command line nor this script's.)
        "grep -l '8639[9]' /proc/[0-9]*/cmdline 2>/dev/null",
        `kill -0 ${hostPid} 2>/dev/null && echo SIGNALLED-NEIGHBOUR`,
        // (The box's own pids are a handful, far below the host's.)
        `[ -e /proc/${hostPid} ] && echo SAW-NEIGHBOUR-PID`,
        "true"
      ].join("; ")
    )
    assert.strictEqual(probe, "")
    // The same probes in the neighbour itself find its own (so their silence above means something).
    assert.match(
      await run("neighbour", "grep -l '8639[9]' /proc/[0-9]*/cmdline; find /workspace -name neighbour-marker"),
      /^\/proc\/[0-9]+\/cmdline\n\/workspace\/neighbour-marker\n$/u
    )
    // Through the API, a command id is the box's own: the neighbour's is not found in this one.
    assertRefused(await request(server, "GET", commandAt("box", sleeper.body.id)), 404, "NotFound")
    assertRefused(await request(server, "POST", `${commandAt("box", sleeper.body.id)}/kill`), 404, "NotFound")
    assert.strictEqual((await request(server, "GET", commandAt("neighbour", sleeper.body.id))).body.phase, "Running")
    assert.strictEqual((await request(server, "DELETE", at("neighbour"))).status, 200)
  })

  it("a secret is the box's env, and never in status, events, the store or the server's logs", async () => {
    assert.strictEqual(await run("box", "printenv API_TOKEN"), `${secretValue}\n`)
    const object = await request(server, "GET", at("box"))
    assert.notInclude(object.text, secretValue)
    assert.notInclude(
      (await request(server, "GET", `/apis/nodus.dev/v1/namespaces/${namespace}/attempts`)).text,
      secretValue
    )
    const events = await request(server, "GET", `/api/v1/namespaces/${namespace}/events`)
    assert.include(events.text, "box")
    assert.notInclude(events.text, secretValue)
    const outbox = await server.streamed()
    assert.isAbove(outbox.length, 0)
    assert.notInclude(JSON.stringify(outbox), secretValue)
    const stored = await server.withStore((store) =>
      Effect.forEach(
        ["sandboxes", "attempts", "events"],
        (resource) =>
          Effect.map(Effect.orDie(store.list({ resource, namespace })), (page) => JSON.stringify(page.items))
      )
    )
    for (const items of stored) assert.notInclude(items, secretValue)
    // The main process printed it on stdout and stderr: its output is there for the caller, and stays the box's.
    const main = await request(server, "GET", `${commandAt("box", "main")}/log`)
    for (const line of [`main sees ${secretValue}\n`, `main warns ${secretValue}\n`]) assert.include(main.text, line)
    const logs = filesUnder(join(server.directory, "data", "logs"))
    for (const path of logs) {
      if (statSync(path).size < 64 * 1024 * 1024) assert.notInclude(readFileSync(path, "utf8"), secretValue, path)
    }
    // The capture sees what the server's runtime logs (Effect's logger writes through this process's console).
    Effect.runSync(Effect.logWarning("capture check"))
    assert.isTrue(logged.some((line) => line.includes("capture check")))
    for (const line of logged) assert.notInclude(line, secretValue)
  })
})
