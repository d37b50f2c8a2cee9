/**
 * The bubblewrap box of a workload program (src/backends/live/Isolation.ts, docs/isolation.md), with the real bwrap:
 * the program's output, exit and environment; the area's directories; secret files that never touch the host's disk;
 * what the box cannot see (hidden paths, /root, /work, the host's processes; the host's loopback and own addresses
 * under every egress, Open reaching out only through its proxy);
 * memory limits and OOM kills; stopping; and the pure bwrapArguments.
 */
import { spawnSync } from "node:child_process"
import { randomBytes } from "node:crypto"
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmdirSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync
} from "node:fs"
import { createServer, type Server } from "node:net"
import { networkInterfaces, tmpdir } from "node:os"
import { join } from "node:path"
import { afterEach, beforeEach, describe, expect, it } from "vitest"
import { type RunningProxy, startEgressProxy } from "../../../src/backends/live/EgressProxy.ts"
import {
  bwrapArguments,
  detectIsolation,
  type HostView,
  type IsolatedProgram,
  type Outcome,
  runIsolated
} from "../../../src/backends/live/Isolation.ts"
import * as Limits from "../../../src/core/Limits.ts"
import { type ConnectRules, loopbackRanges, parseRange, publicOnly } from "../../../src/core/PublicAddress.ts"

const support = detectIsolation()
const MiB = 1024 * 1024

let root = ""
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), "nodus-isolation-"))
  chmodSync(root, 0o711) // bwrap runs as nobody and must get through to the area
})
afterEach(() => rmSync(root, { recursive: true, force: true }))

const program = (argv: ReadonlyArray<string>, overrides: Partial<IsolatedProgram> = {}): IsolatedProgram => ({
  argv,
  env: {},
  workingDir: undefined,
  secretFiles: [],
  egress: "Deny",
  memoryBytes: undefined,
  area: join(root, "area"),
  logPath: join(root, "program.log"),
  ...overrides
})

const run = async (
  argv: ReadonlyArray<string>,
  overrides: Partial<IsolatedProgram> = {},
  hidden: ReadonlyArray<string> = []
): Promise<{ readonly outcome: Outcome; readonly log: string; readonly cgroups: ReadonlyArray<string> }> => {
  const running = runIsolated(program(argv, overrides), { support, hidden })
  const outcome = await running.exited
  return { outcome, log: readFileSync(join(root, "program.log"), "utf8"), cgroups: running.cgroups }
}

const sh = (script: string) => ["sh", "-c", script]
const bash = (script: string) => ["bash", "-c", script]

describe("detectIsolation", () => {
  it("finds bubblewrap, a writable memory cgroup, a pids cgroup, and no problems on this host", () => {
    expect(support.bwrap).toBeDefined()
    expect(support.memoryLimits).not.toBe("none")
    expect(support.pidsCgroup).toBeDefined()
    expect(support.problems).toEqual([])
  })

  it("removes the runs' cgroups a killed process left (empty and old), and leaves a new one alone", () => {
    const made = [support.cgroup!, support.pidsCgroup!].flatMap((dir) =>
      ["stale", "fresh"].map((age) => join(dir, `nodus-run-test-${age}-${randomBytes(4).toString("hex")}`))
    )
    for (const dir of made) mkdirSync(dir)
    const old = new Date(Date.now() - 10 * 60_000)
    for (const dir of made.filter((dir) => dir.includes("-stale-"))) utimesSync(dir, old, old)
    detectIsolation()
    try {
      expect(made.filter((dir) => existsSync(dir))).toEqual(made.filter((dir) => dir.includes("-fresh-")))
    } finally {
      for (const dir of made) if (existsSync(dir)) rmdirSync(dir)
    }
  })
})

describe("the program", () => {
  it("appends its stdout and stderr to the log", async () => {
    writeFileSync(join(root, "program.log"), "before\n")
    const { outcome, log } = await run(sh("echo to-stdout; echo to-stderr >&2"))
    expect(outcome).toEqual({ exitCode: 0, signal: undefined, oomKilled: false })
    expect(log).toBe("before\nto-stdout\nto-stderr\n")
  })

  it("reports its own exit code", async () => {
    const { outcome } = await run(sh("exit 3"))
    expect(outcome).toEqual({ exitCode: 3, signal: undefined, oomKilled: false })
  })

  it("sees exactly the environment it was given, with PATH and HOME when absent (and PWD from bwrap)", async () => {
    const { log } = await run(["env"], { env: { GREETING: "hello world", EMPTY: "" } })
    const env = Object.fromEntries(
      log.trim().split("\n").map((line) => [line.slice(0, line.indexOf("=")), line.slice(line.indexOf("=") + 1)])
    )
    expect(env).toEqual({
      GREETING: "hello world",
      EMPTY: "",
      PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
      HOME: "/platform/work",
      PWD: "/platform/work"
    })
  })

  it("keeps a PATH and a HOME it was given", async () => {
    const { log } = await run(["env"], { env: { PATH: "/usr/bin", HOME: "/tmp" } })
    expect(log).toContain("PATH=/usr/bin\n")
    expect(log).toContain("HOME=/tmp\n")
  })

  it("starts in /platform/work, or in its own working directory, made when missing", async () => {
    expect((await run(["pwd"])).log).toBe("/platform/work\n")
    rmSync(join(root, "program.log"))
    expect((await run(["pwd"], { workingDir: "/platform/state/deep/dir" })).log).toBe("/platform/state/deep/dir\n")
    expect(statSync(join(root, "area", "state", "deep", "dir")).isDirectory()).toBe(true)
  })

  it("reports a signal that killed it by name", async () => {
    const { outcome } = await run(sh("kill -TERM $$"))
    expect(outcome).toEqual({ exitCode: undefined, signal: "SIGTERM", oomKilled: false })
  })
})

describe("the area", () => {
  it("binds outputs writable: what the program writes lands in <area>/outputs", async () => {
    const { outcome } = await run(sh("echo result > /platform/outputs/result.txt && echo state > /platform/state/s"))
    expect(outcome.exitCode).toBe(0)
    expect(readFileSync(join(root, "area", "outputs", "result.txt"), "utf8")).toBe("result\n")
    expect(readFileSync(join(root, "area", "state", "s"), "utf8")).toBe("state\n")
  })

  it("binds inputs read-only", async () => {
    mkdirSync(join(root, "area", "inputs"), { recursive: true })
    writeFileSync(join(root, "area", "inputs", "data.txt"), "input data\n")
    const { outcome, log } = await run(sh("cat /platform/inputs/data.txt; touch /platform/inputs/new"))
    expect(outcome.exitCode).not.toBe(0)
    expect(log).toContain("input data\n")
    expect(log).toContain("Read-only file system")
    expect(readdirSync(join(root, "area", "inputs"))).toEqual(["data.txt"])
  })
})

describe("secret files", () => {
  it("appear at /run/secrets/<name>, mode 0400, intact, and nowhere in the area", async () => {
    const content = randomBytes(100_000) // more than a pipe holds at once
    const { outcome, log } = await run(
      sh("stat -c %a /run/secrets/token; base64 -w0 /run/secrets/token; cp /run/secrets/token /platform/outputs/copy"),
      { secretFiles: [{ name: "token", content }] }
    )
    expect(outcome.exitCode).toBe(0)
    const [mode, base64] = log.split("\n")
    expect(mode).toBe("400")
    expect(base64).toBe(content.toString("base64"))
    // the program's own copy is the only one: bwrap wrote the file in the box's /run, a tmpfs
    const files = readdirSync(join(root, "area"), { recursive: true, withFileTypes: true }).filter((entry) =>
      entry.isFile()
    )
    expect(files.map((entry) => entry.name)).toEqual(["copy"])
  })

  it("appear as /run/secrets/<secret>/<key> when named so, as Kubernetes mounts a Secret", async () => {
    const { outcome, log } = await run(
      sh("stat -c %a /run/secrets/db /run/secrets/db/password; cat /run/secrets/db/password"),
      {
        secretFiles: [{ name: "db/password", content: Buffer.from("pw") }]
      }
    )
    expect(outcome.exitCode).toBe(0)
    expect(log).toBe("500\n400\npw")
  })

  it("refuses a name that is not a file name or <directory>/<file>", () => {
    for (const name of ["../x", "a/b/c", "a/..", ""]) {
      expect(() =>
        runIsolated(program(["true"], { secretFiles: [{ name, content: new Uint8Array() }] }), { support, hidden: [] })
      )
        .toThrow(/is not a file name or <directory>\/<file>/u)
    }
  })
})

describe("what the box cannot see", () => {
  let hiddenDir = ""
  let hiddenFile = ""
  beforeEach(() => {
    const suffix = randomBytes(6).toString("hex")
    hiddenDir = `/etc/nodus-test-hidden-${suffix}`
    hiddenFile = `/etc/nodus-test-hidden-file-${suffix}`
    mkdirSync(hiddenDir)
    writeFileSync(join(hiddenDir, "credentials"), "top secret\n", { mode: 0o644 })
    writeFileSync(hiddenFile, "top secret file\n", { mode: 0o644 })
  })
  afterEach(() => {
    rmSync(hiddenDir, { recursive: true, force: true })
    rmSync(hiddenFile, { force: true })
  })

  it("masks hidden paths under a bound directory: a directory reads empty, a file reads nothing", async () => {
    const script = `ls -A ${hiddenDir}; cat ${hiddenDir}/credentials; cat ${hiddenFile}; echo done`
    const { log } = await run(sh(script), {}, [hiddenDir, hiddenFile])
    expect(log).not.toContain("top secret")
    expect(log).toContain("No such file or directory")
    expect(log).toContain("done")
  })

  it("sees them without the mask (the test reads what it hides)", async () => {
    const { log } = await run(sh(`cat ${hiddenDir}/credentials ${hiddenFile}`))
    expect(log).toBe("top secret\ntop secret file\n")
  })

  it("shows only the userland: no /root, /work, /home or /var", async () => {
    const { log } = await run(["ls", "-A", "/"])
    const userland = ["usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc"]
      .filter((name) => lstatSync(`/${name}`, { throwIfNoEntry: false }) !== undefined)
    expect(log.trim().split("\n").sort()).toEqual([...userland, "dev", "platform", "proc", "run", "tmp"].sort())
    const probe = await run(sh("for p in /root /work /home /var; do test -e $p && echo VISIBLE $p; done; true"))
    expect(probe.log).not.toContain("VISIBLE")
  })

  it("cannot read root-only host files of the userland (bwrap runs as nobody)", async () => {
    const { outcome, log } = await run(["cat", "/etc/shadow"])
    expect(outcome.exitCode).not.toBe(0)
    expect(log).toContain("Permission denied")
  })

  it("sees only its own processes, pid 1 being bwrap's init", async () => {
    const { log } = await run(["ps", "-eo", "pid=,comm="])
    const processes = log.trim().split("\n").map((line) => line.trim().split(/\s+/u))
    expect(processes).toContainEqual(["1", "bwrap"])
    expect(new Set(processes.map(([, command]) => command))).toEqual(new Set(["bwrap", "ps"]))
  })

  it("runs as uid 1000 without capabilities, with the hostname nodus", async () => {
    const { log } = await run(sh("id -u; id -g; hostname; grep CapEff /proc/self/status"))
    expect(log).toBe("1000\n1000\nnodus\nCapEff:\t0000000000000000\n")
  })
})

describe("egress", () => {
  let server: Server
  let connections = 0
  let proxy: RunningProxy | undefined
  beforeEach(async () => {
    connections = 0
    server = createServer((socket) => {
      connections++
      socket.end("hello from the host\n")
    })
    // Every interface: the box must not reach it by the host's own non-loopback address either.
    await new Promise<void>((resolve) => server.listen(0, "0.0.0.0", resolve))
  })
  afterEach(async () => {
    await proxy?.close()
    proxy = undefined
    await new Promise<void>((resolve) => server.close(() => resolve()))
  })

  const port = () => (server.address() as { port: number }).port
  const connect = (address = "127.0.0.1") => ["bash", "-c", `exec 3<>/dev/tcp/${address}/${port()} && head -n 1 <&3`]
  /** The host's first non-loopback address: a connect from the box has no route to it, so no packet is sent. */
  const ownAddress = Object.values(networkInterfaces()).flat().find((entry) =>
    entry !== undefined && !entry.internal && entry.family === "IPv4"
  )?.address
  /** Open as the agent runs it: the run's proxy on the host, any host, public addresses and the rules' exceptions. */
  const proxied = async (rules: ConnectRules): Promise<Partial<IsolatedProgram>> => {
    const socket = join(root, "proxy.sock")
    proxy = await startEgressProxy({ socket, allow: "any", logPath: join(root, "program.log"), rules })
    return { egress: { proxy: socket, node: process.execPath } }
  }
  /** A CONNECT through the box's forwarder, and the answer's first lines. */
  const throughProxy = (authority: string) =>
    bash(
      `exec 3<>/dev/tcp/127.0.0.1/3128 && printf 'CONNECT ${authority} HTTP/1.1\\r\\n\\r\\n' >&3 && head -n 4 <&3 | tr -d '\\r'`
    )

  it("Deny: a connect to the host's 127.0.0.1 fails", async () => {
    const { outcome } = await run(connect(), { egress: "Deny" })
    expect(outcome.exitCode).not.toBe(0)
    expect(connections).toBe(0)
  })

  it("Open: a direct connect to the host's 127.0.0.1, or to its own non-loopback address, finds no route", async () => {
    const open = await proxied({ exceptions: loopbackRanges })
    expect((await run(connect(), open)).outcome.exitCode).not.toBe(0)
    if (ownAddress !== undefined) expect((await run(connect(ownAddress), open)).outcome.exitCode).not.toBe(0)
    expect(connections).toBe(0)
  })

  it("Open: through the proxy, a loopback server is refused without the operator's exception, by address or name", async () => {
    const { outcome, log } = await run(
      bash(`${throughProxy(`127.0.0.1:${port()}`)[2]}; ${throughProxy(`localhost:${port()}`)[2]}`),
      await proxied(publicOnly)
    )
    expect(outcome.exitCode).toBe(0)
    expect(log).toContain("127.0.0.1 is not a public address")
    expect(log).toMatch(/localhost resolves to (127\.0\.0\.1|::1), which is not a public address/u)
    expect(connections).toBe(0)
  })

  it("Open: through the proxy, the host's own non-loopback address is refused", async () => {
    if (ownAddress === undefined) return
    const { log } = await run(throughProxy(`${ownAddress}:${port()}`), await proxied(publicOnly))
    expect(log).toContain(`${ownAddress} is not a public address`)
    expect(connections).toBe(0)
  })

  it("Open: a program that reads ALL_PROXY tunnels raw TCP through the proxy's SOCKS5, under the same rule", async () => {
    const viaSocks = bash(
      `echo "all_proxy=$ALL_PROXY"; curl -sS --max-time 10 -x "$ALL_PROXY" telnet://127.0.0.1:${port()} </dev/null`
    )
    const allowed = await run(viaSocks, await proxied({ exceptions: [parseRange("127.0.0.1/32")!] }))
    expect(allowed.log).toContain("all_proxy=socks5h://127.0.0.1:3128")
    expect(allowed.log).toContain("hello from the host")
    expect(connections).toBe(1)
    await proxy?.close()
    const refused = await run(viaSocks, await proxied(publicOnly))
    expect(refused.outcome.exitCode).not.toBe(0)
    expect(refused.log).toContain("127.0.0.1 is not a public address")
    expect(connections).toBe(1)
  })

  it("Open: through the proxy, a loopback server is reached where the operator's exception names it", async () => {
    const { outcome, log } = await run(
      throughProxy(`127.0.0.1:${port()}`),
      await proxied({ exceptions: [parseRange("127.0.0.1/32")!] })
    )
    expect(outcome.exitCode).toBe(0)
    expect(log).toContain("HTTP/1.1 200 Connection established")
    expect(log).toContain("hello from the host")
    expect(connections).toBe(1)
  })
})

describe("memory limits", () => {
  /** The run had its memory and pids cgroups, and both are gone (other processes' runs may share the parent). */
  const removed = (cgroups: ReadonlyArray<string>) => {
    expect(cgroups).toHaveLength(2)
    expect(cgroups.filter((dir) => existsSync(dir))).toEqual([])
  }

  it("kill a program that exceeds its limit, reported as oomKilled, and the cgroup is removed", async () => {
    const { outcome, cgroups } = await run(["python3", "-c", "b = bytearray(512 * 1024 * 1024)"], {
      memoryBytes: 32 * MiB
    })
    expect(outcome).toEqual({ exitCode: undefined, signal: "SIGKILL", oomKilled: true })
    removed(cgroups)
  })

  it("hold the program's children too (the box joins its cgroup before the program starts)", async () => {
    const { outcome, cgroups } = await run(sh("head -c 600M /dev/zero | tail; echo survived"), {
      memoryBytes: 32 * MiB
    })
    expect(outcome.oomKilled).toBe(true)
    removed(cgroups)
  })

  it("hold a program that names no limit to one vCPU's default (it is killed above it)", async () => {
    const { outcome, cgroups } = await run([
      "python3",
      "-c",
      `b = bytearray(${Limits.boxMemoryBytesPerCpu + 256 * MiB})`
    ])
    expect(outcome).toEqual({ exitCode: undefined, signal: "SIGKILL", oomKilled: true })
    removed(cgroups)
  })

  it("leave a program within its limit alone: a plain non-zero exit is not an OOM kill", async () => {
    const { outcome, cgroups } = await run(["python3", "-c", "b = bytearray(8 * 1024 * 1024); raise SystemExit(5)"], {
      memoryBytes: 64 * MiB
    })
    expect(outcome).toEqual({ exitCode: 5, signal: undefined, oomKilled: false })
    removed(cgroups)
  })
})

describe("process limits", () => {
  /** Forks children that wait, up to `wanted`, until a fork is refused: prints how many it made, then ends them. */
  const forkUpTo = (wanted: number) => [
    "python3",
    "-c",
    `
import os, signal
children = []
try:
    while len(children) < ${wanted}:
        pid = os.fork()
        if pid == 0:
            signal.pause()
            os._exit(0)
        children.append(pid)
except OSError as error:
    print("refused", error.errno)
print(len(children))
for pid in children:
    os.kill(pid, signal.SIGKILL)
`
  ]

  it("stop a fork bomb at the box's limit, and the host can still make processes", async () => {
    const { outcome, log } = await run(forkUpTo(3_000), { pidsMax: 64 })
    expect(outcome.exitCode).toBe(0)
    const [refused, made] = log.trim().split("\n")
    expect(refused).toBe("refused 11") // EAGAIN: the pids cgroup's answer
    expect(Number(made)).toBeLessThan(64)
    expect(spawnSync("true").status).toBe(0)
  })

  it("hold a box that names no limit to one vCPU's default", async () => {
    const { log } = await run(forkUpTo(3_000))
    const [refused, made] = log.trim().split("\n")
    expect(refused).toBe("refused 11")
    expect(Number(made)).toBeLessThan(Limits.boxPidsPerCpu)
  })
})

describe("stop", () => {
  const marker = () => `nodus-test-${randomBytes(6).toString("hex")}`
  /** The pids whose command line holds `pattern`, bwrap's included (the script it runs names the marker). */
  const pids = (pattern: string) =>
    spawnSync("pgrep", ["-f", pattern], { encoding: "utf8" }).stdout.trim().split("\n").filter(Boolean)
  /** Waits until the program's processes run (their command lines start with the marker): a stop must find them. */
  const started = async (mark: string, count: number) => {
    while (pids(`^${mark}`).length < count) await new Promise((resolve) => setTimeout(resolve, 10))
  }

  it("SIGTERMs the program, which ends by it", async () => {
    const mark = marker()
    const running = runIsolated(program(["bash", "-c", `exec -a ${mark} sleep 1000`]), { support, hidden: [] })
    await started(mark, 1)
    running.stop(60_000)
    expect(await running.exited).toEqual({ exitCode: undefined, signal: "SIGTERM", oomKilled: false })
    expect(pids(mark)).toEqual([])
  })

  it("SIGKILLs the whole box after the grace when the program ignores SIGTERM, children included", async () => {
    const mark = marker()
    const script = `trap "" TERM; (exec -a ${mark}-child sleep 1000) & exec -a ${mark} sleep 1000`
    const running = runIsolated(program(["bash", "-c", script]), { support, hidden: [] })
    await started(mark, 2)
    running.stop(100)
    expect(await running.exited).toEqual({ exitCode: undefined, signal: "SIGKILL", oomKilled: false })
    expect(pids(mark)).toEqual([])
  })

  it("kills a box stopped before it started", async () => {
    const mark = marker()
    const running = runIsolated(program(["bash", "-c", `exec -a ${mark} sleep 1000`]), { support, hidden: [] })
    running.stop(60_000)
    expect((await running.exited).signal).toBe("SIGKILL")
    expect(pids(mark)).toEqual([])
  })
})

describe("bwrapArguments", () => {
  const host: HostView = {
    userland: [
      { path: "/usr", symlink: undefined },
      { path: "/bin", symlink: "usr/bin" },
      { path: "/etc", symlink: undefined }
    ],
    hidden: new Map([
      ["/etc/nodus", { realPath: "/etc/nodus", directory: true }],
      ["/etc/agent.key", { realPath: "/etc/agent.key", directory: false }],
      ["/bin/tool", { realPath: "/usr/bin/tool", directory: false }],
      ["/var/lib/nodus", { realPath: "/var/lib/nodus", directory: true }]
    ]),
    gpuShared: ["/dev/nvidiactl", "/dev/nvidia-uvm"]
  }
  const hidden = [...host.hidden.keys(), "/etc/absent"]
  const args = (overrides: Partial<IsolatedProgram> = {}) =>
    bwrapArguments(program(["python3", "main.py"], { area: "/areas/run-1", ...overrides }), { hidden, host })
  const hasPair = (list: ReadonlyArray<string>, ...pair: ReadonlyArray<string>) =>
    list.some((_, index) => pair.every((item, offset) => list[index + offset] === item))

  it("is pure: the same input gives the same arguments", () => {
    expect(args()).toEqual(args())
  })

  it("never shares the host's network: a proxied box binds its proxy's socket instead", () => {
    const proxied = args({ egress: { proxy: "/areas/run-1.proxy.sock", node: "/usr/bin/node" } })
    for (const list of [args({ egress: "Deny" }), proxied]) {
      expect(list).not.toContain("--share-net")
      expect(list).toContain("--unshare-all")
    }
    expect(hasPair(proxied, "--bind", "/areas/run-1.proxy.sock", "/run/nodus/proxy.sock")).toBe(true)
  })

  it("masks hidden paths where the box sees them, and only those", () => {
    const list = args()
    expect(hasPair(list, "--tmpfs", "/etc/nodus", "--remount-ro", "/etc/nodus")).toBe(true)
    expect(hasPair(list, "--ro-bind", "/dev/null", "/etc/agent.key")).toBe(true)
    expect(hasPair(list, "--ro-bind", "/dev/null", "/usr/bin/tool")).toBe(true)
    expect(list.join(" ")).not.toContain("/var/lib/nodus")
    expect(list.join(" ")).not.toContain("/etc/absent")
    // masks come after the binds they cover
    expect(list.indexOf("/etc/nodus")).toBeGreaterThan(list.lastIndexOf("/etc"))
  })

  it("binds the userland read-only, remakes its symlinks, and binds the area", () => {
    const list = args()
    expect(hasPair(list, "--ro-bind", "/usr", "/usr")).toBe(true)
    expect(hasPair(list, "--symlink", "usr/bin", "/bin")).toBe(true)
    expect(hasPair(list, "--bind", "/areas/run-1/outputs", "/platform/outputs")).toBe(true)
    expect(hasPair(list, "--ro-bind", "/areas/run-1/inputs", "/platform/inputs")).toBe(true)
  })

  it("binds a run's GPUs and the driver's shared nodes into /dev, and nothing of the kind without GPUs", () => {
    const list = args({ devices: ["/dev/nvidia3"] })
    for (const device of ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia3"]) {
      expect(hasPair(list, "--dev-bind", device, device)).toBe(true)
    }
    // after the box's own /dev, which they would otherwise be hidden under
    expect(list.indexOf("/dev/nvidia3")).toBeGreaterThan(list.indexOf("--dev"))
    expect(hasPair(args({ devices: ["/tmp/fake/nvidia1"] }), "--dev-bind", "/tmp/fake/nvidia1", "/dev/nvidia1")).toBe(
      true
    )
    expect(args().join(" ")).not.toContain("nvidia")
  })

  it("ends with the command after --", () => {
    expect(args().slice(-3)).toEqual(["--", "python3", "main.py"])
  })
})

describe("runIsolated without bubblewrap", () => {
  it("throws, naming the package to install", () => {
    expect(() => runIsolated(program(["true"]), { support: { ...support, bwrap: undefined }, hidden: [] }))
      .toThrow(/apt-get install bubblewrap/u)
  })
})
