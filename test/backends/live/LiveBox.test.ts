/**
 * A Sandbox's box on a live host, through the capacity port (`box`), with a real in-process agent and real bubblewrap:
 * commands in the foreground and the background (output, stdin, kill), files, the box's activity, what untrusted code
 * in it cannot see or reach, and /workspace saved by a snapshot and restored into the next box.
 */
import { Effect } from "effect"
import { chmodSync, existsSync, mkdtempSync, writeFileSync } from "node:fs"
import { connect, createServer, type Server } from "node:net"
import { networkInterfaces, tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Agent } from "../../../src/backends/live/Agent.ts"
import { LiveCapacity } from "../../../src/backends/live/LiveCapacity.ts"
import type { BoxReply, BoxRequest, ProgramRequest, WorkloadProgram } from "../../../src/core/capacity/Capacity.ts"
import { variantsOf } from "../../../src/core/capacity/Offering.ts"
import { removeTree } from "../../support/RemoveTree.ts"
import { makeLiveHost } from "./LiveHost.ts"

const GiB = 1024 ** 3
const owner = "sandbox-uid"

const workload: WorkloadProgram = {
  image: "tools",
  argv: [],
  workingDir: "/workspace",
  env: [{ name: "GREETING", value: "hello" }],
  secrets: [],
  egress: "Deny",
  memoryBytes: undefined,
  init: undefined,
  checkpoint: { paths: ["/workspace"], maxBytes: GiB },
  sandbox: true
}

const program = (restoreFromSeq?: number): ProgramRequest => ({
  restoreFromSeq,
  resumeFromUnits: undefined,
  checkpointIntervalMs: undefined,
  keepWarmMs: 0,
  env: {},
  annotations: {},
  workload,
  service: true
})

let dir: string
let capacity: LiveCapacity
let agent: Agent
let listener: Server
let port: number

const until = async (what: string, check: () => boolean) => {
  for (let polls = 0; polls < 2_000; polls++) {
    if (check()) return
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
  throw new Error(`${what} did not happen within 10 s`)
}

const facts = (attempt: string) => Effect.runSync(capacity.port.facts(owner, attempt))!

const start = async (attempt: string, number: number, restoreFromSeq?: number) => {
  const variant = variantsOf(capacity.catalog("demo")[0]!)[0]!
  Effect.runSync(
    capacity.port.acquire({ owner, namespace: "demo", attempt, index: 0, number, variant, recovery: false })
  )
  Effect.runSync(capacity.port.start(owner, attempt, program(restoreFromSeq)))
  await until(`${attempt} running`, () => facts(attempt).phase === "Running")
}

const box = (attempt: string, request: BoxRequest) => Effect.runPromise(capacity.port.box!(owner, attempt, request))

let commands = 0
const exec = (
  attempt: string,
  argv: ReadonlyArray<string>,
  fields: Partial<Extract<BoxRequest, { _tag: "Exec" }>> = {}
) =>
  box(attempt, {
    _tag: "Exec",
    command: `c${++commands}`,
    argv,
    env: {},
    workingDir: undefined,
    stdin: undefined,
    keepStdin: false,
    timeoutMs: 10_000,
    background: false,
    ...fields
  })

const text = (base64: string | undefined) => Buffer.from(base64 ?? "", "base64").toString("utf8")

const commandOf = (reply: BoxReply) => {
  if (reply._tag !== "Command") throw new Error(`expected a command, got ${JSON.stringify(reply)}`)
  return reply.state
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "nodus-live-box-"))
  chmodSync(dir, 0o711)
  // What the control plane keeps on this host: no box may read it.
  writeFileSync(join(dir, "admin-token"), "control-plane-secret")
  ;({ capacity, agent } = await makeLiveHost({
    dir,
    node: "node-a",
    cpus: 4,
    now: () => Date.now(),
    env: { GREETING: "hello" },
    hidden: [dir]
  }))
  await agent.connect()
  // (A prober that closes at once resets its connection: nothing to report.)
  listener = createServer((socket) => socket.on("error", () => undefined).end("reached\n"))
  // On every address of the host, loopback and its interfaces': a box under egress Deny reaches none of them.
  await new Promise<void>((resolve) => listener.listen(0, "0.0.0.0", resolve))
  port = (listener.address() as { port: number }).port
  await start("box-1", 1)
})

afterAll(async () => {
  await agent.stop()
  listener.close()
  await removeTree(dir)
})

describe("commands", () => {
  it("runs a foreground command and answers its exit code, stdout and stderr", async () => {
    const state = commandOf(await exec("box-1", ["sh", "-c", "echo $GREETING from $(pwd); echo oops >&2; exit 3"]))
    expect(state).toMatchObject({ phase: "Exited", exitCode: 3, timedOut: false })
    expect(text(state.stdout)).toBe("hello from /workspace\n")
    expect(text(state.stderr)).toBe("oops\n")
  })

  it("passes stdin, env and a working directory", async () => {
    const state = commandOf(
      await exec("box-1", ["sh", "-c", "cat; echo \" $EXTRA $(pwd)\""], {
        stdin: Buffer.from("piped").toString("base64"),
        env: { EXTRA: "more" },
        workingDir: "/tmp"
      })
    )
    expect(text(state.stdout)).toBe("piped more /tmp\n")
  })

  it("says 127 for a command that does not exist", async () => {
    const state = commandOf(await exec("box-1", ["no-such-command"]))
    expect(state.exitCode).toBe(127)
    expect(text(state.stderr)).toContain("command not found")
  })

  it("ends a command at its exit even when something it started keeps its output open", async () => {
    const started = performance.now()
    const state = commandOf(await exec("box-1", ["sh", "-c", "sleep 30 & echo started"]))
    expect(state).toMatchObject({ phase: "Exited", exitCode: 0 })
    expect(text(state.stdout)).toBe("started\n")
    expect(performance.now() - started).toBeLessThan(10_000)
  })

  it("says so when the working directory does not exist (126), not that the command was not found", async () => {
    const state = commandOf(await exec("box-1", ["true"], { workingDir: "/workspace/nowhere" }))
    expect(state.exitCode).toBe(126)
    expect(text(state.stderr)).toContain("no such working directory")
  })

  it("kills a command at its timeout", async () => {
    const state = commandOf(await exec("box-1", ["sleep", "30"], { timeoutMs: 200 }))
    expect(state).toMatchObject({ phase: "Exited", timedOut: true, signal: "SIGKILL" })
  })

  it("runs a background command: its state, its output as it comes, stdin, and kill; the box is Busy meanwhile", async () => {
    const started = commandOf(
      await exec("box-1", ["sh", "-c", "while read line; do echo \"got $line\"; done"], {
        background: true,
        keepStdin: true,
        command: "bg"
      })
    )
    expect(started.phase).toBe("Running")
    await until("the box busy", () => facts("box-1").activity?.busy === true)
    expect(
      (await box("box-1", {
        _tag: "Stdin",
        command: "bg",
        data: Buffer.from("one\ntwo\n").toString("base64"),
        close: false
      }))._tag
    ).toBe("Done")
    let output = ""
    let offset = 0
    while (!output.includes("got two")) {
      const reply = await box("box-1", { _tag: "Output", command: "bg", offset, waitMs: 2_000 })
      if (reply._tag !== "Output") throw new Error(JSON.stringify(reply))
      output += text(reply.data)
      offset = reply.offset + Buffer.from(reply.data, "base64").length
    }
    expect(output).toBe("got one\ngot two\n")
    expect((await box("box-1", { _tag: "Kill", command: "bg", signal: "SIGKILL" }))._tag).toBe("Done")
    let state = commandOf(await box("box-1", { _tag: "Command", command: "bg" }))
    for (let polls = 0; state.phase !== "Exited" && polls < 200; polls++) {
      await new Promise((resolve) => setTimeout(resolve, 10))
      state = commandOf(await box("box-1", { _tag: "Command", command: "bg" }))
    }
    expect(state).toMatchObject({ phase: "Exited", signal: "SIGKILL" })
    await until("the box idle", () => facts("box-1").activity?.busy === false)
    expect(facts("box-1").activity?.lastAt).toBeGreaterThan(0)
    const gone = await box("box-1", { _tag: "Stdin", command: "bg", data: "", close: true })
    expect(gone).toMatchObject({ _tag: "Refused", code: "NotFound" })
  })
})

describe("stdin backpressure", () => {
  it("refuses more stdin while a command has not read what came before (StdinBackpressure), and takes it once it has", async () => {
    const started = commandOf(
      await exec("box-1", ["sh", "-c", "sleep 0.5; cat > /dev/null"], {
        background: true,
        keepStdin: true,
        command: "slow-reader"
      })
    )
    expect(started.phase).toBe("Running")
    const chunk = Buffer.alloc(512 * 1024, 120).toString("base64")
    let refused: BoxReply | undefined
    for (let writes = 0; writes < 16 && refused === undefined; writes++) {
      const reply = await box("box-1", { _tag: "Stdin", command: "slow-reader", data: chunk, close: false })
      if (reply._tag === "Refused") refused = reply
    }
    expect(refused).toMatchObject({ _tag: "Refused", code: "StdinBackpressure" })
    // Once the command reads, the buffer drains and stdin is taken again.
    await new Promise((resolve) => setTimeout(resolve, 1_000))
    expect((await box("box-1", { _tag: "Stdin", command: "slow-reader", data: chunk, close: true }))._tag).toBe("Done")
  })
})

describe("files", () => {
  it("writes (parents made), reads, lists and deletes files, in the box's own view", async () => {
    expect(
      (await box("box-1", {
        _tag: "WriteFile",
        path: "/workspace/notes/a.txt",
        data: Buffer.from("first").toString("base64")
      }))._tag
    ).toBe("Done")
    // A relative path is the working directory's.
    const read = await box("box-1", { _tag: "ReadFile", path: "notes/a.txt", maxBytes: 1024 })
    expect(read).toMatchObject({ _tag: "File", size: 5 })
    expect(text((read as { data: string }).data)).toBe("first")
    const listing = await box("box-1", { _tag: "ReadFile", path: "/workspace/notes", maxBytes: 1024 })
    expect(listing).toMatchObject({ _tag: "Directory", entries: [{ name: "a.txt", size: 5, type: "file" }] })
    expect(await box("box-1", { _tag: "ReadFile", path: "/workspace/notes/a.txt", maxBytes: 2 })).toMatchObject({
      _tag: "Refused",
      code: "FileTooLarge"
    })
    expect((await box("box-1", { _tag: "DeleteFile", path: "/workspace/notes" }))._tag).toBe("Done")
    expect(await box("box-1", { _tag: "ReadFile", path: "/workspace/notes/a.txt", maxBytes: 1024 })).toMatchObject({
      _tag: "Refused",
      code: "NotFound"
    })
  })

  it("refuses what the box's user may not touch", async () => {
    expect(await box("box-1", { _tag: "ReadFile", path: "/etc/shadow", maxBytes: 1024 })).toMatchObject({
      _tag: "Refused",
      code: "Forbidden"
    })
    expect(await box("box-1", { _tag: "WriteFile", path: "/usr/bin/evil", data: "" })).toMatchObject({
      _tag: "Refused",
      code: "Forbidden"
    })
  })
})

describe("isolation of untrusted code", () => {
  it("sees no host process and no control-plane file, and does not run as root", async () => {
    const state = commandOf(
      await exec("box-1", [
        "sh",
        "-c",
        [
          "echo uid=$(id -u)",
          "echo pids=$(ls /proc | grep -c '^[0-9]')",
          `cat ${join(dir, "admin-token")} 2>/dev/null && echo READ-CONTROL-PLANE`,
          `ls ${dir} 2>/dev/null && echo LISTED-CONTROL-PLANE`,
          "true"
        ].join("; ")
      ])
    )
    const out = text(state.stdout)
    expect(out).toMatch(/^uid=1000$/mu)
    // bwrap's init, the supervisor, this shell and ls: a handful, never the host's.
    expect(Number(/^pids=(\d+)$/mu.exec(out)?.[1])).toBeLessThan(10)
    expect(out).not.toContain("READ-CONTROL-PLANE")
    expect(out).not.toContain("LISTED-CONTROL-PLANE")
  })

  it("runs under no_new_privs and a seccomp filter that refuses namespaces and the kernel's administration", async () => {
    const state = commandOf(
      await exec("box-1", ["sh", "-c", "grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status; unshare -U true"])
    )
    const out = text(state.stdout)
    expect(out).toMatch(/^NoNewPrivs:\s+1$/mu)
    // 2: a filter is in force (SECCOMP_MODE_FILTER).
    expect(out).toMatch(/^Seccomp:\s+2$/mu)
    expect(state.exitCode).not.toBe(0)
    // EPERM is the filter's answer (user namespaces refused by --disable-userns alone would be ENOSPC).
    expect(text(state.stderr)).toContain("Operation not permitted")
  })

  it("cannot reach a host port over loopback (egress Deny: no network at all)", async () => {
    const state = commandOf(await exec("box-1", ["bash", "-c", `exec 3<>/dev/tcp/127.0.0.1/${port} && echo REACHED`]))
    expect(state.exitCode).not.toBe(0)
    expect(text(state.stdout)).not.toContain("REACHED")
  })
})

/** Whether this process (on the host, outside any box) can open a TCP connection to `host:port`. */
const hostConnects = (host: string, portNumber: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect({ host, port: portNumber, timeout: 2_000 })
    socket.on("connect", () => (socket.destroy(), resolve(true)))
    socket.on("error", () => resolve(false))
    socket.on("timeout", () => (socket.destroy(), resolve(false)))
  })

describe("bounds", () => {
  it("sees its disk quota at /workspace (the default, 10 GiB), not the host's disk", async () => {
    const state = commandOf(await exec("box-1", ["df", "-B1", "--output=size", "/workspace"]))
    const size = Number(text(state.stdout).trim().split("\n").pop())
    expect(size).toBeGreaterThan(9 * GiB)
    expect(size).toBeLessThanOrEqual(10 * GiB)
  })
})

describe("egress Deny beyond loopback", () => {
  it("cannot reach the host's own interface addresses nor a public address, and is refused at once rather than hanging", async () => {
    const hostAddresses = Object.values(networkInterfaces()).flat()
      .flatMap((
        address
      ) => (address !== undefined && !address.internal && address.family === "IPv4" ? [address.address] : []))
    // What the box is refused is there: the host itself reaches the listener on each of its addresses.
    for (const address of hostAddresses) expect(await hostConnects(address, port)).toBe(true)
    // Public literals need no DNS; with no route in the box's network namespace they fail without waiting on a network.
    const targets = [
      ...hostAddresses.map((address) => `${address}/${port}`),
      "1.1.1.1/80",
      "8.8.8.8/53",
      "2606:4700:4700::1111/443"
    ]
    const script = targets.map((target) =>
      `(exec 3<>/dev/tcp/${target}) && echo "REACHED ${target}" || echo "refused ${target}"`
    )
    const state = commandOf(
      await exec("box-1", ["bash", "-c", [...script, "echo; cat /proc/net/dev"].join("; ")], { timeoutMs: 5_000 })
    )
    const out = text(state.stdout)
    expect(state.timedOut).toBe(false)
    expect(out).not.toContain("REACHED")
    for (const target of targets) {
      expect(out).toContain(`refused ${target}\n`)
      // No route at all (ENETUNREACH), rather than a connection attempt that a firewall drops or refuses.
      expect(text(state.stderr)).toContain(`/dev/tcp/${target}: Network is unreachable`)
    }
    // The box's network namespace has loopback and nothing else: no interface to route through.
    const interfaces = out.split("\n").flatMap((line) => /^\s*([^\s:|]+):/u.exec(line)?.slice(1) ?? [])
    expect(interfaces).toEqual(["lo"])
  })
})

describe("egress AllowList", () => {
  it("reaches the run's proxy through the supervisor's forwarder, which refuses names not on the list", async () => {
    const variant = variantsOf(capacity.catalog("demo")[0]!)[0]!
    Effect.runSync(
      capacity.port.acquire({
        owner,
        namespace: "demo",
        attempt: "allow-1",
        index: 0,
        number: 1,
        variant,
        recovery: false
      })
    )
    Effect.runSync(
      capacity.port.start(owner, "allow-1", {
        ...program(),
        workload: { ...workload, egress: "AllowList", allow: ["allowed.example"] }
      })
    )
    await until("allow-1 running", () => facts("allow-1").phase === "Running")
    const connect = "printf 'CONNECT denied.example:443 HTTP/1.1\\r\\nHost: denied.example:443\\r\\n\\r\\n' >&3"
    const state = commandOf(
      await exec("allow-1", [
        "bash",
        "-c",
        `echo proxy=$HTTPS_PROXY; exec 3<>/dev/tcp/127.0.0.1/3128 && ${connect} && head -1 <&3`
      ])
    )
    const out = text(state.stdout)
    expect(out).toContain("proxy=http://127.0.0.1:3128")
    expect(out).toMatch(/^HTTP\/1\.1 403/mu)
    Effect.runSync(capacity.port.release(owner, "allow-1", 0))
    await until("allow-1 ended", () => facts("allow-1").phase === "Ended")
  })
})

describe("/workspace continuity", () => {
  it("saves /workspace in a snapshot on stop and restores it into the next box", async () => {
    await exec("box-1", [
      "sh",
      "-c",
      "mkdir -p /workspace/project && echo kept > /workspace/project/file && echo gone > /tmp/scratch"
    ])
    Effect.runSync(capacity.port.checkpoint(owner, "box-1", 1))
    await until("the snapshot saved", () => facts("box-1").suspend?.state === "Saved")
    const seq = facts("box-1").checkpoint!.seq
    Effect.runSync(capacity.port.release(owner, "box-1", 0))
    await until("box-1 ended", () => facts("box-1").phase === "Ended")
    expect(facts("box-1").outcome).toEqual({ type: "Stopped" })
    expect(await box("box-1", { _tag: "ReadFile", path: "/workspace", maxBytes: 1 })).toMatchObject({
      _tag: "Refused",
      code: "SandboxNotRunning"
    })

    await start("box-2", 2, seq)
    const state = commandOf(
      await exec("box-2", ["sh", "-c", "cat /workspace/project/file; cat /tmp/scratch 2>/dev/null || echo no-scratch"])
    )
    expect(text(state.stdout)).toBe("kept\nno-scratch\n")
  })
})

describe("warm boxes", () => {
  it("a Sandbox of the common shape takes a box started ahead: its env, working directory, main process and snapshot applied", async () => {
    const warmDir = mkdtempSync(join(tmpdir(), "nodus-live-warm-"))
    chmodSync(warmDir, 0o711)
    const { capacity: warmCapacity, agent: warmAgent } = await makeLiveHost({
      dir: warmDir,
      node: "node-w",
      cpus: 4,
      now: () => Date.now(),
      env: { GREETING: "warm hello" },
      warmBoxes: 1
    })
    try {
      await warmAgent.connect()
      await until("a warm box is up", () => warmAgent.warmReady() === 1)
      const variant = variantsOf(warmCapacity.catalog("demo")[0]!)[0]!
      const start = async (attempt: string, number: number, restoreFromSeq?: number) => {
        Effect.runSync(
          warmCapacity.port.acquire({ owner, namespace: "demo", attempt, index: 0, number, variant, recovery: false })
        )
        const main = {
          ...workload,
          argv: ["sh", "-c", "echo main ran > /tmp/main; sleep 600"],
          workingDir: "/workspace/app"
        }
        Effect.runSync(warmCapacity.port.start(owner, attempt, { ...program(restoreFromSeq), workload: main }))
        await until(
          `${attempt} running`,
          () => Effect.runSync(warmCapacity.port.facts(owner, attempt))!.phase === "Running"
        )
      }
      const run = (attempt: string, argv: ReadonlyArray<string>) =>
        Effect.runPromise(
          warmCapacity.port.box!(owner, attempt, {
            _tag: "Exec",
            command: `w${++commands}`,
            argv,
            env: {},
            workingDir: undefined,
            stdin: undefined,
            keepStdin: false,
            timeoutMs: 10_000,
            background: false
          })
        )
      await start("warm-1", 1)
      // It took the warm box (whose area it now has), and another is started in its place.
      expect(existsSync(warmAgent.areaOf(`${owner}/warm-1`))).toBe(false)
      await until("the pool refilled", () => warmAgent.warmReady() === 1)
      let state = commandOf(
        await run("warm-1", [
          "sh",
          "-c",
          "echo $GREETING in $(pwd); sleep 0.2; cat /tmp/main; echo kept > /workspace/app/file"
        ])
      )
      expect(text(state.stdout)).toBe("warm hello in /workspace/app\nmain ran\n")
      expect(await Effect.runPromise(warmCapacity.port.box!(owner, "warm-1", { _tag: "Command", command: "main" })))
        .toMatchObject({ _tag: "Command", state: { phase: "Running" } })
      Effect.runSync(warmCapacity.port.checkpoint(owner, "warm-1", 1))
      await until(
        "the snapshot saved",
        () => Effect.runSync(warmCapacity.port.facts(owner, "warm-1"))!.suspend?.state === "Saved"
      )
      const seq = Effect.runSync(warmCapacity.port.facts(owner, "warm-1"))!.checkpoint!.seq
      Effect.runSync(warmCapacity.port.release(owner, "warm-1", 0))
      await until("warm-1 ended", () => Effect.runSync(warmCapacity.port.facts(owner, "warm-1"))!.phase === "Ended")
      await start("warm-2", 2, seq)
      state = commandOf(await run("warm-2", ["cat", "/workspace/app/file"]))
      expect(text(state.stdout)).toBe("kept\n")
    } finally {
      await warmAgent.stop()
      await removeTree(warmDir)
    }
  })
})

describe("the supervisor's channel", () => {
  it("cannot be reopened from the box: its stdout is a socket, not a pipe /proc would hand out", async () => {
    const state = commandOf(
      await exec("box-2", ["sh", "-c", "head -c 15 /proc/2/cmdline; echo; echo forged > /proc/2/fd/1"])
    )
    expect(text(state.stdout)).toBe("/run/nodus/node\n")
    expect(text(state.stderr)).toContain("No such device or address")
    expect(text(commandOf(await exec("box-2", ["echo", "still here"])).stdout)).toBe("still here\n")
  })
})
