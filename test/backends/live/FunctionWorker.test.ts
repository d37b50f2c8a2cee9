/**
 * A Function's warm worker on a live host, through the capacity port (`start` a program whose workload is a worker,
 * then `box` Call requests), with the real LiveCapacity, an in-process agent, real bubblewrap and the host's python3:
 * code archives (tar.gz and zip) extracted in the box, calls answered as Results (returns and raises, scrubbed), a
 * module that does not import ending the run before it was Running, a missing interpreter refused, a worker lost under
 * a call answering Refused (never a Result), hostile archives refused, and what the worker cannot see.
 */
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import { createHash } from "node:crypto"
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Agent, interpreterOf } from "../../../src/backends/live/Agent.ts"
import { detectIsolation } from "../../../src/backends/live/Isolation.ts"
import { LiveCapacity, type ServerInput } from "../../../src/backends/live/LiveCapacity.ts"
import type {
  BoxReply,
  BoxRequest,
  ProgramRequest,
  WorkerProgram,
  WorkloadProgram
} from "../../../src/core/capacity/Capacity.ts"
import { variantsOf } from "../../../src/core/capacity/Offering.ts"
import { inProcessLink } from "../../../src/server/LiveBackend.ts"
import { memoryCheckpoints } from "./MemoryCheckpoints.ts"

const GiB = 1024 ** 3
const token = "tok-3f81c2d9a7"

const handlers = String.raw`
import os, threading

def double(x):
    print("doubling", x)
    return 2 * x

def boom():
    raise ValueError("bad input " + os.environ["API_TOKEN"])

def probe(path):
    try:
        with open(path) as file:
            return "read: " + file.read()
    except OSError as error:
        return type(error).__name__

class Tools:
    def hang(self):
        threading.Event().wait()
    def die(self):
        os.kill(os.getpid(), 9)

class Model:
    def __init__(self):
        self.scale = 10
    def predict(self, x):
        return x * self.scale
`

let dir = ""
let capacity: LiveCapacity
let agent: Agent
/** Blobs the test's "server" holds, by reference (sha256:<hex>). */
const blobs = new Map<string, Buffer>()
const logs: Array<string> = []
const agentReplies = new Map<string, BoxReply>()

/** Makes an archive with the host's python3 (tarfile or zipfile) from `files`, and stores it as a blob. */
const archive = (
  kind: "tar.gz" | "zip",
  files: Readonly<Record<string, string>>,
  links: Readonly<Record<string, string>> = {}
): string => {
  const out = join(dir, `archive-${blobs.size}.${kind}`)
  const script = String.raw`
import io, json, sys, tarfile, zipfile
out, kind, files, links = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
if kind == "zip":
    with zipfile.ZipFile(out, "w") as bundle:
        for name, text in files.items():
            bundle.writestr(name, text)
        for name, target in links.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (0o120777 << 16)
            bundle.writestr(info, target)
else:
    with tarfile.open(out, "w:gz") as bundle:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            bundle.addfile(info, io.BytesIO(data))
        for name, target in links.items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            bundle.addfile(info)
`
  const made = spawnSync("/usr/bin/python3", ["-c", script, out, kind, JSON.stringify(files), JSON.stringify(links)], {
    encoding: "utf8"
  })
  if (made.status !== 0) throw new Error(made.stderr)
  const bytes = readFileSync(out)
  const reference = `sha256:${createHash("sha256").update(bytes).digest("hex")}`
  blobs.set(reference, bytes)
  return reference
}

const sources = { "app/__init__.py": "", "app/handlers.py": handlers }

/** The host userland's Python minor (what a box's python3 is), e.g. "3.11". */
const hostMinor = spawnSync("/usr/bin/python3", ["-c", "import sys; print('%d.%d' % sys.version_info[:2])"], {
  encoding: "utf8"
}).stdout.trim()

const until = async (what: string, check: () => boolean) => {
  // A bound so that the test stops by itself; never a measure of speed.
  for (let polls = 0; polls < 6_000; polls++) {
    if (check()) return
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
  throw new Error(`${what} did not happen within a minute`)
}

const facts = (owner: string, attempt = "a-1") => Effect.runSync(capacity.port.facts(owner, attempt))!

const workload = (
  worker: Partial<WorkerProgram>,
  code: string | undefined,
  fields: Partial<WorkloadProgram> = {}
): WorkloadProgram => ({
  image: "python",
  argv: [],
  workingDir: undefined,
  env: [],
  secrets: [],
  egress: "Deny",
  memoryBytes: undefined,
  init: undefined,
  inputs: code === undefined ? [] : [{ name: "code", blob: code }],
  worker: {
    python: undefined,
    module: "app.handlers",
    concurrency: 1,
    codeInput: code === undefined ? undefined : "code",
    ...worker
  },
  ...fields
})

const program = (workload: WorkloadProgram): ProgramRequest => ({
  restoreFromSeq: undefined,
  resumeFromUnits: undefined,
  checkpointIntervalMs: undefined,
  keepWarmMs: 0,
  env: {},
  annotations: {},
  workload,
  service: true
})

/** Starts the owner's attempt a-1 with the workload; answers once it is Running or Ended. */
const start = async (owner: string, work: WorkloadProgram) => {
  const variant = variantsOf(capacity.catalog("demo")[0]!)[0]!
  Effect.runSync(
    capacity.port.acquire({ owner, namespace: "demo", attempt: "a-1", index: 0, number: 1, variant, recovery: false })
  )
  Effect.runSync(capacity.port.start(owner, "a-1", program(work)))
  await until(`${owner} running or ended`, () => facts(owner).phase === "Running" || facts(owner).phase === "Ended")
  return facts(owner)
}

const stop = async (owner: string) => {
  Effect.runSync(capacity.port.release(owner, "a-1", 0))
  await until(`${owner} ended`, () => facts(owner).phase === "Ended")
}

const box = (owner: string, request: BoxRequest) => Effect.runPromise(capacity.port.box!(owner, "a-1", request))

let calls = 0
const json = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64")
const callOf = (input: unknown, method?: string): BoxRequest => ({
  _tag: "Call",
  call: `call-${++calls}.1`,
  encoding: "JSON",
  input: json(input),
  method,
  timeoutMs: 60_000
})

const resultOf = (reply: BoxReply) => {
  if (reply._tag !== "Result") throw new Error(`expected a Result, got ${JSON.stringify(reply)}`)
  return reply.outcome
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "nodus-function-worker-"))
  chmodSync(dir, 0o711)
  // What the control plane keeps on this host: no worker may read it.
  writeFileSync(join(dir, "admin-token"), "control-plane-secret")
  capacity = await Effect.runPromise(LiveCapacity.make({
    now: () => Date.now(),
    // As the server's: a blob input's bytes if the project may read it, and the program does not start otherwise.
    resolve: (_namespace, work) => {
      const inputs = new Map<string, ServerInput>()
      for (const input of work.inputs ?? []) {
        if (!("blob" in input)) continue
        const bytes = blobs.get(input.blob)
        if (bytes === undefined) {
          return Effect.fail({
            message: `input ${input.name}: blob ${input.blob} is not stored, or project demo may not read it`
          })
        }
        inputs.set(input.name, {
          sha256: input.blob.slice("sha256:".length),
          open: async function*() {
            yield bytes
          }
        })
      }
      return Effect.succeed({ env: { API_TOKEN: token }, secretFiles: [], secretValues: [token], inputs })
    },
    appendLog: (_owner, _attempt, text) => logs.push(text),
    storeOutput: async () => ({ sha256: "0".repeat(64), sizeBytes: 0 }),
    checkpoints: memoryCheckpoints()
  }))
  const isolation = detectIsolation()
  // What the agent itself answers each call (by the call's id), as it sends it: the server may answer a call of a
  // run that ended before the agent's reply arrives, and the agent's answer must be right on its own.
  const link = inProcessLink(capacity, { pool: "test", namespace: undefined })
  const asked = new Map<number, string>()
  agent = new Agent({
    link: {
      ...link,
      sync: async (request) => {
        for (const reply of request.replies ?? []) {
          const call = asked.get(reply.id)
          if (call !== undefined) agentReplies.set(call, reply.reply)
        }
        const response = await link.sync(request)
        if (response._tag === "Desired") {
          for (const call of response.desired.calls ?? []) {
            if (call.request._tag === "Call") asked.set(call.id, call.request.call)
          }
        }
        return response
      }
    },
    hello: {
      node: "node-a",
      hostname: "node-a",
      agentVersion: "test",
      capacity: { cpus: 16, memoryBytes: 8 * GiB, diskBytes: 100 * GiB, gpus: [] },
      isolation: {
        bubblewrap: isolation.bwrap !== undefined,
        memoryLimits: isolation.memoryLimits !== "none",
        problems: isolation.problems
      }
    },
    dataDir: join(dir, "agent"),
    runsDir: join(dir, "runs"),
    support: isolation,
    hidden: [dir],
    now: () => Date.now()
  })
  await agent.connect()
})

afterAll(async () => {
  await agent.stop()
  rmSync(dir, { recursive: true, force: true })
})

describe("a Function's worker on a live host", () => {
  it("a tar.gz code archive on the host's python3.<minor>: Running once imported, calls answered as Results", async () => {
    const code = archive("tar.gz", sources)
    const started = await start("fn-tar", workload({ python: hostMinor, qualname: "double" }, code))
    expect(started.phase).toBe("Running")
    expect(started.bootedAt).toBeDefined()
    expect(started.inputs).toEqual([{ name: "code", sha256: code.slice("sha256:".length) }])
    const outcome = resultOf(await box("fn-tar", callOf({ args: [21], kwargs: {} })))
    expect(outcome).toEqual({ ok: true, encoding: "JSON", result: Buffer.from("42").toString("base64") })
    // What the function prints is the run's log, as a Job's output is.
    await until("the print in the log", () => logs.join("").includes("doubling 21"))
    // The worker takes calls only; a call goes to workers only.
    expect(await box("fn-tar", { _tag: "ReadFile", path: "/etc/hostname", maxBytes: 100 })).toMatchObject({
      _tag: "Refused",
      code: "Invalid"
    })
    await stop("fn-tar")
    expect(facts("fn-tar").outcome).toEqual({ type: "Stopped" })
  })

  it("a worker whose egress is an AllowList runs behind its forwarder, on the same pipes", async () => {
    const started = await start(
      "fn-allow",
      workload({ qualname: "double" }, archive("tar.gz", sources), { egress: "AllowList", allow: ["pypi.org"] })
    )
    expect(started.phase).toBe("Running")
    expect(resultOf(await box("fn-allow", callOf({ args: [5], kwargs: {} })))).toEqual({
      ok: true,
      encoding: "JSON",
      result: Buffer.from("10").toString("base64")
    })
    await stop("fn-allow")
  })

  it("a raised exception is a Result with ok false, scrubbed of the secrets the worker was given", async () => {
    const started = await start("fn-boom", workload({ qualname: "boom" }, archive("tar.gz", sources)))
    expect(started.phase).toBe("Running")
    const outcome = resultOf(await box("fn-boom", callOf({ args: [], kwargs: {} })))
    expect(outcome.ok).toBe(false)
    if (outcome.ok) return
    expect(outcome.error.type).toBe("ValueError")
    expect(outcome.error.message).toBe("bad input [redacted]")
    expect(outcome.error.traceback).toContain("in boom")
    expect(JSON.stringify(outcome)).not.toContain(token)
    await stop("fn-boom")
  })

  it("a zip code archive and a class: made once, calls name its methods", async () => {
    const started = await start("fn-zip", workload({ cls: "Model" }, archive("zip", sources)))
    expect(started.phase).toBe("Running")
    expect(resultOf(await box("fn-zip", callOf({ args: [4], kwargs: {} }, "predict")))).toEqual({
      ok: true,
      encoding: "JSON",
      result: Buffer.from("40").toString("base64")
    })
    await stop("fn-zip")
  })

  it("a module that does not import ends the run Failed with the import error, never Running", async () => {
    const ended = await start(
      "fn-missing",
      workload({ module: "app.missing", qualname: "f" }, archive("tar.gz", sources))
    )
    expect(ended.phase).toBe("Ended")
    expect(ended.bootedAt).toBeUndefined()
    expect(ended.outcome).toMatchObject({
      type: "Failed",
      message: expect.stringMatching(/ModuleNotFoundError: No module named 'app.missing'/u)
    })
  })

  it("an interpreter minor the host lacks is refused, naming it", async () => {
    const bins = ["/usr/local/bin", "/usr/bin", "/bin"]
    const minor = Array.from({ length: 30 }, (_, index) => `3.${index + 6}`).find((candidate) =>
      bins.every((bin) => !existsSync(join(bin, `python${candidate}`)))
    )!
    const ended = await start("fn-python", workload({ python: minor, qualname: "double" }, archive("tar.gz", sources)))
    expect(ended.phase).toBe("Ended")
    expect(ended.bootedAt).toBeUndefined()
    expect(ended.outcome).toMatchObject({ type: "Failed", message: expect.stringContaining(`no python${minor}`) })
    // And a version that names no interpreter is refused as such (never a path into the userland).
    expect(interpreterOf("3.11/../../bin/sh").problem).toMatch(/not a Python 3 minor version/u)
  })

  it("a worker killed under a call answers Refused, never a Result; whether a call runs is the run's activity", async () => {
    const started = await start("fn-lost", workload({ cls: "Tools", concurrency: 2 }, archive("tar.gz", sources)))
    expect(started.phase).toBe("Running")
    const hang = callOf({ args: [], kwargs: {} }, "hang")
    const hanging = box("fn-lost", hang)
    await until("the worker busy", () => facts("fn-lost").activity?.busy === true)
    // The worker's process is killed (SIGKILL) while the first call runs: neither call finished on it.
    const die = callOf({ args: [], kwargs: {} }, "die")
    for (const reply of await Promise.all([hanging, box("fn-lost", die)])) expect(reply._tag).toBe("Refused")
    // The port's answer may be the server's (the run ended first); the agent's own answers say the worker was lost.
    const ids = [hang, die].map((request) => (request._tag === "Call" ? request.call : ""))
    await until("the agent's answers", () => ids.every((id) => agentReplies.has(id)))
    for (const id of ids) {
      expect(agentReplies.get(id)).toMatchObject({
        _tag: "Refused",
        code: "Unavailable",
        message: expect.stringContaining("the worker was lost")
      })
    }
    await until("the run ended", () => facts("fn-lost").phase === "Ended")
    expect(facts("fn-lost").outcome).toMatchObject({ type: "Failed" })
  })

  it("a code archive whose member leads out of its directory is refused before the worker is Running", async () => {
    for (
      const [owner, code] of [
        ["fn-dotdot", archive("tar.gz", { ...sources, "../escape.py": "x = 1" })],
        ["fn-absolute", archive("tar.gz", { ...sources, "/tmp/escape.py": "x = 1" })],
        ["fn-link", archive("zip", sources, { "app/out": "../../../etc" })]
      ] as const
    ) {
      const ended = await start(owner, workload({ qualname: "double" }, code))
      expect(ended.phase).toBe("Ended")
      expect(ended.bootedAt).toBeUndefined()
      expect(ended.outcome).toMatchObject({
        type: "Failed",
        message: expect.stringContaining("leads out of its directory")
      })
    }
  })

  it("the worker cannot read the control plane's data directory", async () => {
    const started = await start("fn-probe", workload({ qualname: "probe" }, archive("tar.gz", sources)))
    expect(started.phase).toBe("Running")
    const outcome = resultOf(await box("fn-probe", callOf({ args: [join(dir, "admin-token")], kwargs: {} })))
    expect(outcome.ok).toBe(true)
    if (!outcome.ok) return
    const said = JSON.parse(Buffer.from(outcome.result, "base64").toString()) as string
    expect(said).not.toContain("control-plane-secret")
    expect(said).toBe("FileNotFoundError")
    await stop("fn-probe")
  })

  it("a Call to a run that is not a worker is Invalid", async () => {
    const started = await start("job", { ...workload({}, undefined), argv: ["sleep", "600"], worker: undefined })
    expect(started.phase).toBe("Running")
    expect(await box("job", callOf({ args: [], kwargs: {} }))).toMatchObject({ _tag: "Refused", code: "Invalid" })
    await stop("job")
  })

  it("a code blob the project cannot read: the worker does not start, and says which", async () => {
    const ended = await start("fn-noblob", workload({ qualname: "double" }, `sha256:${"e".repeat(64)}`))
    expect(ended.outcome).toMatchObject({
      type: "Failed",
      message: expect.stringContaining(`input code: blob sha256:${"e".repeat(64)}`)
    })
  })
})
