/**
 * One workload program (a Job's index) run as a real process in a bubblewrap box (docs/isolation.md). The code is
 * untrusted customer code, so the box gets new user, mount, PID, IPC, UTS and network namespaces (under every egress
 * policy: Open and AllowList reach out only through the run's proxy on the host), no
 * capabilities, a root of its own in which only the host's userland is visible read-only, its run's area at
 * /platform/*, its secret files at /run/secrets (never on the host's disk) and, where the host allows, cgroups that
 * bound its memory (whose OOM kills the outcome reports) and its processes.
 *
 * Plain TypeScript over node:child_process and node:fs: the live driver wraps it in its own effects.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { randomBytes } from "node:crypto"
import {
  accessSync,
  appendFileSync,
  chownSync,
  closeSync,
  constants as fsConstants,
  existsSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  rmdirSync,
  statSync,
  writeFileSync
} from "node:fs"
import { constants as osConstants } from "node:os"
import { basename, dirname, isAbsolute, join } from "node:path"
import type { Readable, Writable } from "node:stream"
import * as Limits from "../../core/Limits.ts"
import { supervisorScript } from "./BoxSupervisor.ts"
import { detectDiskQuotas, type DiskQuotas } from "./DiskQuota.ts"
import { forwarderScript, proxyPort, proxySocketInBox } from "./EgressProxy.ts"
import { seccompFilter } from "./Seccomp.ts"

/**
 * Egress through the run's proxy (EgressProxy.ts; Open and AllowList): no network of its own, the proxy's socket bound
 * in, and a forwarder run by the host's node (bound read-only) listening on 127.0.0.1:3128, which HTTPS_PROXY and
 * ALL_PROXY name.
 */
export interface ProxiedEgress {
  /** The host path of the proxy's Unix socket. */
  readonly proxy: string
  /** The node binary that runs the forwarder. */
  readonly node: string
}

export interface IsolatedProgram {
  /** Command and arguments; argv[0] is looked up on the box's PATH. */
  readonly argv: ReadonlyArray<string>
  /** The whole environment of the program: nothing comes from the host but PATH and HOME when absent. */
  readonly env: Readonly<Record<string, string>>
  /** Inside the box; /platform/work when undefined; created when missing. */
  readonly workingDir: string | undefined
  /** Each appears as /run/secrets/<name>, mode 0400, and is never written to the host's disk. */
  readonly secretFiles: ReadonlyArray<{ readonly name: string; readonly content: Uint8Array }>
  /** Deny: a network namespace of its own with nothing in it; proxied: the same, and the run's proxy's socket. */
  readonly egress: "Deny" | ProxiedEgress
  /** Exceeding it kills the program and the outcome says oomKilled; undefined: one vCPU's default (Limits). */
  readonly memoryBytes: number | undefined
  /** The most processes and threads the box holds at once; undefined: one vCPU's default (Limits.boxPidsPerCpu). */
  readonly pidsMax?: number | undefined
  /** Host directory private to this run (created when missing): work/, state/, outputs/ and inputs/. */
  readonly area: string
  /** Host file to which the program's stdout and stderr are appended as they come. */
  readonly logPath: string
  /**
   * A Sandbox's box (BoxSupervisor.ts): the host's node (bound read-only) runs the supervisor as the box's first
   * process, `argv` is its optional main process, the area's workspace is /workspace, and the supervisor's stdin and
   * stdout are the agent's `control` pipes.
   */
  readonly box?: { readonly node: string } | undefined
  /**
   * The program's stdin and stdout are the `control` pipes (a Function's worker, PythonWorker.ts) instead of nothing
   * and the log; its stderr still goes to the log.
   */
  readonly pipes?: boolean | undefined
  /**
   * The GPUs given to the run, as host device nodes (/dev/nvidia<minor>), each seen at /dev/<its name>; the driver's
   * shared nodes (HostView.gpuShared) come with the first. A box without them sees no GPU at all (docs/live.md,
   * "GPUs").
   */
  readonly devices?: ReadonlyArray<string> | undefined
  /** Host directories (in the area) seen read-only at absolute paths of the box: Volume mounts (spec: VolumeMount). */
  readonly mounts?: ReadonlyArray<{ readonly dir: string; readonly at: string }> | undefined
}

export interface Outcome {
  readonly exitCode: number | undefined
  readonly signal: string | undefined
  readonly oomKilled: boolean
}

export interface RunningProgram {
  /** The host pid of bwrap, which lives as long as the box (the program's own pid is known only inside). */
  readonly pid: number
  /** Rejects only when the box could not be put in its memory cgroup (it is killed then). */
  readonly exited: Promise<Outcome>
  /**
   * SIGTERM now, SIGKILL after graceMs if still running (the whole box: bwrap --die-with-parent and the PID namespace
   * make sure nothing survives).
   */
  readonly stop: (graceMs: number) => void
  /** A box's supervisor, or a program with `pipes`: requests in, messages out (BoxSupervisor.ts, PythonWorker.ts). */
  readonly control?: { readonly input: Writable; readonly output: Readable } | undefined
  /** The box's own cgroup directories (memory, pids), removed once it exited. */
  readonly cgroups: ReadonlyArray<string>
}

export interface IsolationSupport {
  readonly bwrap: string | undefined
  readonly memoryLimits: "cgroup2" | "cgroup1" | "none"
  readonly problems: ReadonlyArray<string>
  /** The cgroup directory under which each run's memory cgroup is made (ours); undefined when memoryLimits is none. */
  readonly cgroup: string | undefined
  /**
   * The cgroup directory under which each run's pids cgroup is made (ours: cgroup v1's pids hierarchy, or v2's
   * `cgroup`); undefined where the host has no pids controller we can use (a problem says so).
   */
  readonly pidsCgroup: string | undefined
  /**
   * How a box's writable space is held to its quota: a filesystem of its own (loop), or a polled usage (DiskQuota.ts).
   */
  readonly diskQuotas: DiskQuotas
  /**
   * The host user bwrap runs as when we are root. A root bwrap maps the box's uid to host root, and the box could
   * then read every root-only file of the userland it sees (/etc/shadow, /etc/ssl/private); as nobody it cannot.
   */
  readonly runAs: { readonly uid: number; readonly gid: number } | undefined
}

/**
 * What bwrapArguments must know of the host's filesystem, read by viewHost, so that bwrapArguments stays pure.
 */
export interface HostView {
  /**
   * The userland entries this host has. A symlink (a merged /usr's /bin -> usr/bin) is made a symlink inside too, so
   * every host file has one path in the box and one mask hides it.
   */
  readonly userland: ReadonlyArray<{ readonly path: string; readonly symlink: string | undefined }>
  /**
   * Each hidden path that exists, by the path as given: where it really is (an alias through a symlink is masked
   * where it leads) and whether it is a directory (an empty read-only tmpfs masks it) or a file (/dev/null does).
   */
  readonly hidden: ReadonlyMap<string, { readonly realPath: string; readonly directory: boolean }>
  /** The NVIDIA driver's device nodes every GPU program needs (control, unified memory), those this host has. */
  readonly gpuShared: ReadonlyArray<string>
}

const missingBwrap = "bubblewrap is missing: install the Debian package bubblewrap (apt-get install bubblewrap)"
const boxPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
const userlandPaths = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"]
/** What nvidia-container-toolkit gives every GPU container besides its GPUs' own nodes. */
const gpuSharedNodes = ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"]
/** Where this process moves on cgroup v2, so that its own cgroup can hand the memory controller to the runs'. */
const supervisorLeaf = "nodus-supervisor"
/** nobody/nogroup on Debian: owns nothing the box could use. */
const nobody = { uid: 65534, gid: 65534 }
/** Where each directory of the area is seen in the box; inputs alone is read-only. */
const areaMounts = [
  { dir: "work", at: "/platform/work", writable: true },
  { dir: "state", at: "/platform/state", writable: true },
  { dir: "outputs", at: "/platform/outputs", writable: true },
  { dir: "inputs", at: "/platform/inputs", writable: false }
] as const
/** A box's /workspace (a Sandbox's; what its snapshots save). */
const workspaceMount = { dir: "workspace", at: "/workspace", writable: true } as const
/**
 * The descriptors runIsolated hands bwrap after stdio: the options (kept off the host's command line, where any
 * host user could read the environment), the box's pid out, the go-ahead in (the box waits until it is in its
 * memory cgroup), then one per secret file, then the seccomp filter.
 */
const fd = { options: 3, info: 4, block: 5, firstSecret: 6 } as const

// ---------------------------------------------------------------------------------------------------------------------
// Detection

/** What this host offers; every shortfall is a line of `problems`. */
export const detectIsolation = (): IsolationSupport => {
  const runAs = process.getuid?.() === 0 ? nobody : undefined
  const found = findOnPath("bwrap")
  const bwrapProblem = found === undefined ? missingBwrap : probeBwrap(found, runAs)
  const memory = detectMemory()
  const pids = detectPids(memory)
  for (const dir of [memory.cgroup, pids.cgroup]) if (dir !== undefined) sweepCgroups(dir)
  const disk = detectDiskQuotas()
  return {
    bwrap: bwrapProblem === undefined ? found : undefined,
    memoryLimits: memory.memoryLimits,
    cgroup: memory.cgroup,
    pidsCgroup: pids.cgroup,
    diskQuotas: disk.diskQuotas,
    runAs,
    problems: [bwrapProblem, memory.problem, pids.problem, disk.problem].filter((problem) => problem !== undefined)
  }
}

const findOnPath = (name: string): string | undefined =>
  [...(process.env["PATH"] ?? "").split(":").filter(isAbsolute), "/usr/bin"]
    .map((dir) => join(dir, name))
    .find((path) => {
      try {
        accessSync(path, fsConstants.X_OK)
        return true
      } catch {
        return false
      }
    })

/** bwrap can be installed and still unable to make a box (user namespaces off, an AppArmor rule): try one. */
const probeBwrap = (bwrap: string, runAs: IsolationSupport["runAs"]): string | undefined => {
  const box = ["--unshare-all", "--unshare-user", "--disable-userns", "--ro-bind", "/", "/", "true"]
  const probe = spawnSync(bwrap, box, {
    env: { PATH: boxPath },
    cwd: "/",
    encoding: "utf8",
    ...runAs
  })
  if (probe.status === 0) return undefined
  return `bubblewrap at ${bwrap} cannot make a box: ${(probe.stderr || probe.error?.message || "").trim()}`
}

type MemoryDetection = {
  readonly memoryLimits: IsolationSupport["memoryLimits"]
  readonly cgroup: string | undefined
  readonly problem: string | undefined
}

const detectMemory = (): MemoryDetection => {
  const own = ownMemoryCgroup()
  if (own === undefined) return noMemoryLimits("no memory cgroup controller found for this process")
  try {
    const dir = own.version === "cgroup2" ? delegateMemory(own.dir) : own.dir
    probeChildren(dir)
    return { memoryLimits: own.version, cgroup: dir, problem: undefined }
  } catch (error) {
    return noMemoryLimits(`cannot make child cgroups in ${own.dir} (${messageOf(error)})`)
  }
}

const noMemoryLimits = (why: string): MemoryDetection => ({
  memoryLimits: "none",
  cgroup: undefined,
  problem: `memory limits are off (programs run without one): ${why}`
})

/** Our memory cgroup: /proc/self/cgroup lines are `hierarchy:controllers:path`, v2's is `0::path`. */
const ownMemoryCgroup = (): { readonly version: "cgroup1" | "cgroup2"; readonly dir: string } | undefined => {
  const v1 = ownV1Cgroup("memory")
  if (v1 !== undefined) return { version: "cgroup1", dir: v1 }
  const v2 = cgroupLines().find(([hierarchy, controllers]) => hierarchy === "0" && controllers === "")
  if (v2 === undefined) return undefined
  const dir = join("/sys/fs/cgroup", v2.slice(2).join(":"))
  const controllers = controllersOf(dir)
  return controllers.includes("memory") ? { version: "cgroup2", dir } : undefined
}

/**
 * v2 limits a child only when its parent delegates the memory controller (and the pids one, where it has it), and a
 * cgroup that delegates may hold no processes: we move into a leaf of our own first (systemd's rule for delegated
 * cgroups), and the runs' cgroups are made beside it. Fails (EBUSY) while other processes sit in our cgroup.
 */
const delegateMemory = (own: string): string => {
  const dir = basename(own) === supervisorLeaf ? dirname(own) : own
  const control = join(dir, "cgroup.subtree_control")
  const wanted = ["memory", ...(controllersOf(dir).includes("pids") ? ["pids"] : [])]
  const delegated = readFileSync(control, "utf8").trim().split(" ")
  if (wanted.every((controller) => delegated.includes(controller))) return dir
  if (dir === own) {
    mkdirSync(join(dir, supervisorLeaf), { recursive: true })
    writeFileSync(join(dir, supervisorLeaf, "cgroup.procs"), String(process.pid))
  }
  writeFileSync(control, wanted.map((controller) => `+${controller}`).join(" "))
  return dir
}

const cgroupLines = () => readFileSync("/proc/self/cgroup", "utf8").trim().split("\n").map((line) => line.split(":"))

/** Our cgroup in a v1 hierarchy, /sys/fs/cgroup/<controller>/<path>: the line whose controllers name it. */
const ownV1Cgroup = (controller: string): string | undefined => {
  const line = cgroupLines().find(([, controllers]) => controllers?.split(",").includes(controller))
  return line === undefined ? undefined : join("/sys/fs/cgroup", controller, line.slice(2).join(":"))
}

/** Throws unless we can make (and remove) a child cgroup in `dir`. */
const probeChildren = (dir: string) => {
  const probe = join(dir, `nodus-probe-${process.pid}`)
  mkdirSync(probe)
  rmdirSync(probe)
}

const controllersOf = (dir: string) => readOrEmpty(join(dir, "cgroup.controllers")).trim().split(" ")

/** A run's cgroup empty this long was left by a process that died before its box's exit (SIGKILL): it goes. */
const staleCgroupMs = 60_000

/**
 * Removes the runs' cgroups a killed process left (empty, and older than any a live one is still filling: a run's
 * box joins its cgroup within milliseconds of its making, and other processes may share our cgroup).
 */
const sweepCgroups = (dir: string) => {
  for (const name of readdirSync(dir).filter((entry) => entry.startsWith(runCgroupPrefix))) {
    const path = join(dir, name)
    try {
      if (
        Date.now() - statSync(path).mtimeMs > staleCgroupMs && readOrEmpty(join(path, "cgroup.procs")).trim() === ""
      ) rmdirSync(path)
    } catch {
      // in use after all, or gone meanwhile
    }
  }
}

type PidsDetection = { readonly cgroup: string | undefined; readonly problem: string | undefined }

/**
 * Where each run's pids cgroup is made: on v2, the memory cgroup's parent when it delegates pids too; on v1, our own
 * cgroup of the pids hierarchy (/sys/fs/cgroup/pids), where we must be able to make children.
 */
const detectPids = (memory: MemoryDetection): PidsDetection => {
  const off = (why: string): PidsDetection => ({
    cgroup: undefined,
    problem: `process limits are off (a fork bomb can take every pid of the host): ${why}`
  })
  if (memory.memoryLimits === "cgroup2") {
    const subtree = readOrEmpty(join(memory.cgroup!, "cgroup.subtree_control")).trim().split(" ")
    return subtree.includes("pids")
      ? { cgroup: memory.cgroup, problem: undefined }
      : off(`${memory.cgroup} does not delegate the pids controller`)
  }
  const dir = ownV1Cgroup("pids")
  if (dir === undefined) return off("no pids cgroup controller found for this process")
  try {
    probeChildren(dir)
    return { cgroup: dir, problem: undefined }
  } catch (error) {
    return off(`cannot make child cgroups in ${dir} (${messageOf(error)})`)
  }
}

// ---------------------------------------------------------------------------------------------------------------------
// The box, as bwrap arguments

/** The bwrap argv (without the bwrap binary): pure, over what `host` says of the host's filesystem. */
export const bwrapArguments = (
  program: IsolatedProgram,
  options: { readonly hidden: ReadonlyArray<string>; readonly host: HostView }
): ReadonlyArray<string> => [...boxOptions(program, options), "--", ...commandOf(program)]

/** The program's argv, behind the egress forwarder when its egress goes through a proxy. */
const commandOf = (program: IsolatedProgram): ReadonlyArray<string> => {
  const forward = typeof program.egress !== "string"
  if (program.box !== undefined) return [forwarderNode, "-e", supervisorScript(forward), "--", ...program.argv]
  return forward ? [forwarderNode, "-e", forwarderScript, "--", ...program.argv] : program.argv
}

const forwarderNode = "/run/nodus/node"

/** Everything before the command: runIsolated hands these to bwrap through a descriptor. */
const boxOptions = (
  program: IsolatedProgram,
  options: { readonly hidden: ReadonlyArray<string>; readonly host: HostView }
): ReadonlyArray<string> => [
  ...namespaceOptions,
  ...userlandOptions(options.host),
  ...["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/run"],
  ...deviceOptions(program.devices ?? [], options.host),
  ...areaOptions(program.area, program.box !== undefined),
  ...volumeOptions(program.mounts ?? []),
  ...maskOptions(options.hidden, options.host),
  ...secretOptions(program.secretFiles),
  ...workingDirOptions(program.workingDir ?? "/platform/work"),
  ...nodeOptions(program),
  ...proxyOptions(program.egress),
  ...environmentOptions(typeof program.egress === "string" ? program.env : { ...proxyEnv, ...program.env }),
  ...["--info-fd", String(fd.info), "--block-fd", String(fd.block)],
  // The filter comes after the secret files' descriptors (Seccomp.ts): on a host whose system calls nodus does not
  // know, the box goes without one (docs/isolation.md).
  ...(boxFilter === undefined ? [] : ["--seccomp", String(fd.firstSecret + program.secretFiles.length)])
]

/** The box's seccomp filter (Seccomp.ts), made once: it is the same for every box of this host. */
const boxFilter = seccompFilter()

/** The host's node, for the egress forwarder (Open, AllowList) or a box's supervisor. */
const nodeOptions = (program: IsolatedProgram): ReadonlyArray<string> => {
  const node = typeof program.egress === "string" ? program.box?.node : program.egress.node
  return node === undefined ? [] : ["--dir", "/run/nodus", "--ro-bind", node, forwarderNode]
}

/** What a proxied box gets besides a Deny one: the proxy's socket. */
const proxyOptions = (egress: IsolatedProgram["egress"]): ReadonlyArray<string> =>
  typeof egress === "string" ? [] : ["--bind", egress.proxy, proxySocketInBox]

/**
 * Clients find the forwarder through the usual variables (lower case too: curl reads only those for http): HTTP for
 * http and https, SOCKS5 with names resolved by the proxy (socks5h) for whatever else reads ALL_PROXY — one port.
 */
const proxyEnv: Readonly<Record<string, string>> = Object.fromEntries([
  ...["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"].map((name) => [name, `http://127.0.0.1:${proxyPort}`]),
  ...["ALL_PROXY", "all_proxy"].map((name) => [name, `socks5h://127.0.0.1:${proxyPort}`])
])

/**
 * Every box has a network namespace of its own, whatever its egress: the host's (its loopback services, the store's
 * database, the API port, abstract Unix sockets) is never shared.
 */
const namespaceOptions: ReadonlyArray<string> = [
  // --unshare-all only tries the user namespace; --disable-userns needs it, and keeps the program from making
  // namespaces of its own (a common path to kernel bugs)
  ...["--unshare-all", "--unshare-user", "--disable-userns"],
  ...["--die-with-parent", "--new-session", "--cap-drop", "ALL", "--uid", "1000", "--gid", "1000"],
  ...["--hostname", "nodus"]
]

const userlandOptions = (host: HostView): ReadonlyArray<string> =>
  host.userland.flatMap(({ path, symlink }) =>
    symlink === undefined ? ["--ro-bind", path, path] : ["--symlink", symlink, path]
  )

/** The run's GPUs and the driver's shared nodes, bound into the box's otherwise minimal /dev. */
const deviceOptions = (devices: ReadonlyArray<string>, host: HostView): ReadonlyArray<string> =>
  devices.length === 0
    ? []
    : [...host.gpuShared, ...devices].flatMap((device) => ["--dev-bind", device, `/dev/${basename(device)}`])

const areaOptions = (area: string, box: boolean): ReadonlyArray<string> => {
  if (!isAbsolute(area)) throw new Error(`area ${JSON.stringify(area)} is not an absolute path`)
  return mountsOf(box).flatMap(({ dir, at, writable }) => [writable ? "--bind" : "--ro-bind", join(area, dir), at])
}

/** Volume mounts, read-only; the paths were admitted (absolute, no system path), and are checked again here. */
const volumeOptions = (mounts: NonNullable<IsolatedProgram["mounts"]>): ReadonlyArray<string> =>
  mounts.flatMap(({ dir, at }) => {
    if (!isAbsolute(dir) || !isAbsolute(at) || at.split("/").includes("..")) {
      throw new Error(`mount ${JSON.stringify(at)} is not an absolute path`)
    }
    return ["--ro-bind", dir, at]
  })

const mountsOf = (
  box: boolean
): ReadonlyArray<{ readonly dir: string; readonly at: string; readonly writable: boolean }> =>
  box ? [...areaMounts, workspaceMount] : areaMounts

/** A hidden path is masked where the box would see it: under a directory of the userland it binds. */
const maskOptions = (hidden: ReadonlyArray<string>, host: HostView): ReadonlyArray<string> => {
  const bound = host.userland.filter(({ symlink }) => symlink === undefined).map(({ path }) => path)
  return hidden.flatMap((path) => {
    const entry = host.hidden.get(path)
    if (entry === undefined || !bound.some((dir) => isWithin(entry.realPath, dir))) return []
    const at = entry.realPath
    return entry.directory ? ["--tmpfs", at, "--remount-ro", at] : ["--ro-bind", "/dev/null", at]
  })
}

const isWithin = (path: string, dir: string) => path === dir || path.startsWith(`${dir}/`)

/** A secret's name: a file, or a directory and a file (`<secret>/<key>`, as Kubernetes mounts a Secret). */
const secretSegment = /^[A-Za-z0-9._-]+$/u

const secretOptions = (secrets: IsolatedProgram["secretFiles"]): ReadonlyArray<string> => {
  if (secrets.length === 0) return []
  const dirs = new Set<string>()
  const files = secrets.flatMap(({ name }, index) => {
    const segments = name.split("/")
    if (
      segments.length > 2 ||
      segments.some((segment) => !secretSegment.test(segment) || segment === "." || segment === "..")
    ) {
      throw new Error(`secret file name ${JSON.stringify(name)} is not a file name or <directory>/<file>`)
    }
    if (segments.length === 2) dirs.add(segments[0]!)
    return ["--perms", "0400", "--file", String(fd.firstSecret + index), `/run/secrets/${name}`]
  })
  return [
    ...["--perms", "0500", "--dir", "/run/secrets"],
    ...[...dirs].flatMap((dir) => ["--perms", "0500", "--dir", `/run/secrets/${dir}`]),
    ...files
  ]
}

const workingDirOptions = (dir: string): ReadonlyArray<string> => {
  if (!isAbsolute(dir)) throw new Error(`working directory ${JSON.stringify(dir)} is not an absolute path`)
  return ["--dir", dir, "--chdir", dir]
}

/** bwrap adds PWD (the working directory) itself. */
const environmentOptions = (env: IsolatedProgram["env"]): ReadonlyArray<string> => [
  "--clearenv",
  ...Object.entries({ PATH: boxPath, HOME: "/platform/work", ...env })
    .flatMap(([name, value]) => ["--setenv", name, value])
]

/** What bwrapArguments needs of this host: its userland entries and what each hidden path is. */
export const viewHost = (hidden: ReadonlyArray<string>): HostView => ({
  userland: userlandPaths.flatMap((path): HostView["userland"] => {
    const stat = lstatOrUndefined(path)
    if (stat?.isSymbolicLink()) return [{ path, symlink: readlinkSync(path) }]
    return stat?.isDirectory() ? [{ path, symlink: undefined }] : []
  }),
  hidden: new Map(hidden.flatMap((path) => {
    if (!existsSync(path)) return [] // a dangling symlink included: nothing to see
    const realPath = realpathSync(path)
    return [[path, { realPath, directory: statSync(realPath).isDirectory() }] as const]
  })),
  gpuShared: gpuSharedNodes.filter((node) => existsSync(node))
})

// ---------------------------------------------------------------------------------------------------------------------
// Running

/** Starts the program in its box; throws when the host has no usable bwrap or the run cannot be prepared. */
export const runIsolated = (
  program: IsolatedProgram,
  options: { readonly support: IsolationSupport; readonly hidden: ReadonlyArray<string> }
): RunningProgram => {
  const { support, hidden } = options
  if (support.bwrap === undefined) {
    const why = support.problems.find((problem) => problem.includes("bubblewrap")) ?? missingBwrap
    throw new Error(`cannot isolate the program: ${why}`)
  }
  const serialized = serializeOptions(boxOptions(program, { hidden, host: viewHost(hidden) }))
  prepareArea(program.area, support.runAs, program.box !== undefined)
  const cgroup = createCgroup(support, boundsOf(program))
  try {
    return supervise(startBwrap(support, program, serialized), program, cgroup)
  } catch (error) {
    for (const dir of dirsOf(cgroup)) rmdirSync(dir)
    throw error
  }
}

const startBwrap = (support: IsolationSupport, program: IsolatedProgram, serialized: Buffer): ChildProcess => {
  const log = openSync(program.logPath, "a")
  try {
    const child = spawn(support.bwrap!, ["--args", String(fd.options), "--", ...commandOf(program)], {
      stdio: [
        hasControl(program) ? "pipe" : "ignore",
        hasControl(program) ? "pipe" : log,
        log,
        "pipe",
        "pipe",
        "pipe",
        ...program.secretFiles.map(() => "pipe" as const),
        ...(boxFilter === undefined ? [] : ["pipe" as const])
      ],
      env: {},
      cwd: "/",
      ...support.runAs
    })
    if (child.pid === undefined) {
      child.on("error", () => undefined) // reported by the throw below
      throw new Error(`cannot start ${support.bwrap}`)
    }
    // A bwrap that fails early reads none of these; its failure is in the log and its exit code.
    for (const stream of extraStreams(child)) stream.on("error", () => undefined)
    extraStream(child, fd.options).end(serialized)
    program.secretFiles.forEach(({ content }, index) => extraStream(child, fd.firstSecret + index).end(content))
    if (boxFilter !== undefined) extraStream(child, fd.firstSecret + program.secretFiles.length).end(boxFilter)
    return child
  } finally {
    closeSync(log) // bwrap holds its own copy
  }
}

/**
 * Lets the box go once it is in its cgroup, and stops it on request. bwrap's info gives the host pid of the box's
 * init (pid 1 inside): killing it kills everything in the box's PID namespace.
 */
const supervise = (child: ChildProcess, program: IsolatedProgram, cgroup: RunCgroup): RunningProgram => {
  let boxPid: number | undefined
  let stopping = false
  let failure: Error | undefined
  let killTimer: NodeJS.Timeout | undefined
  const killBox = () => {
    signalQuietly(boxPid, "SIGKILL")
    signalQuietly(child.pid, "SIGKILL")
  }
  readAll(extraStream(child, fd.info)).then((info) => {
    if (info === "") return // bwrap failed before making the box: its exit says so
    try {
      boxPid = (JSON.parse(info) as { readonly "child-pid": number })["child-pid"]
      // Until the go-ahead, bwrap has not set the box to die with it: a stop this early kills the box outright.
      if (stopping) return killBox()
      for (const dir of dirsOf(cgroup)) writeFileSync(join(dir, "cgroup.procs"), String(boxPid))
      extraStream(child, fd.block).end("go")
    } catch (error) {
      failure = new Error(`cannot start the box of ${program.argv[0]}: ${messageOf(error)}`)
      killBox()
    }
  }, () => undefined)

  const finish = async (outcome: Omit<Outcome, "oomKilled">): Promise<Outcome> => {
    const oomKilled = cgroup.memory !== undefined && wasOomKilled(cgroup.memory, cgroup.version, outcome.signal)
    for (const dir of dirsOf(cgroup)) await removeCgroup(dir, program.logPath)
    if (failure !== undefined) throw failure
    return { ...outcome, oomKilled }
  }
  const exited = new Promise<Outcome>((resolve, reject) => {
    child.on("error", reject)
    child.on("exit", (code, signal) => {
      clearTimeout(killTimer)
      for (const stream of extraStreams(child)) stream.destroy()
      finish(outcomeOf(code, signal)).then(resolve, reject)
    })
  })

  const stop = (graceMs: number) => {
    if (stopping || child.exitCode !== null || child.signalCode !== null) return
    stopping = true
    if (boxPid === undefined) return
    // The box's init made a session (--new-session) whose process group holds the program; init ignores SIGTERM.
    signalQuietly(-boxPid, "SIGTERM")
    killTimer = setTimeout(killBox, graceMs)
  }
  const control = hasControl(program) ? { input: child.stdin!, output: child.stdout! } : undefined
  return { pid: child.pid!, exited, stop, control, cgroups: dirsOf(cgroup) }
}

/** A box's supervisor, or a program that asked for pipes, talks to the agent over its stdin and stdout. */
const hasControl = (program: IsolatedProgram) => program.box !== undefined || program.pipes === true

const extraStream = (child: ChildProcess, index: number) => child.stdio[index] as Readable & Writable

const extraStreams = (child: ChildProcess) =>
  child.stdio.slice(fd.options).map((_, offset) => extraStream(child, fd.options + offset))

/** --args takes NUL-separated arguments: a NUL inside one would smuggle in options of its own. */
const serializeOptions = (options: ReadonlyArray<string>): Buffer => {
  if (options.some((option) => option.includes("\0"))) {
    throw new Error("a box option (environment, names) holds a NUL byte")
  }
  return Buffer.from(options.map((option) => `${option}\0`).join(""))
}

/**
 * The area's directories, owned by the user bwrap runs as so that the box can write them (inputs is bound
 * read-only). bwrap binds them as that user, so every directory above must let it through.
 */
const prepareArea = (area: string, runAs: IsolationSupport["runAs"], box: boolean) => {
  for (const { dir } of mountsOf(box)) {
    mkdirSync(join(area, dir), { recursive: true })
    if (runAs !== undefined) chownSync(join(area, dir), runAs.uid, runAs.gid)
  }
  if (runAs !== undefined) assertSearchable(area, runAs)
}

const assertSearchable = (path: string, runAs: NonNullable<IsolationSupport["runAs"]>) => {
  const { mode, uid, gid } = statSync(path)
  const searchable = uid === runAs.uid ? mode & 0o100 : gid === runAs.gid ? mode & 0o010 : mode & 0o001
  if (!searchable) {
    throw new Error(`${path} cannot be searched by uid ${runAs.uid}, the user boxes run as (chmod o+x ${path})`)
  }
  if (dirname(path) !== path) assertSearchable(dirname(path), runAs)
}

/**
 * The run's cgroups: its memory one and its pids one, each undefined where the host has none. On v2 both are one
 * directory; on v1 each is in its controller's hierarchy.
 */
const runCgroupPrefix = "nodus-run-"

type RunCgroup = {
  readonly version: "cgroup1" | "cgroup2"
  readonly memory: string | undefined
  readonly pids: string | undefined
}

const dirsOf = (
  cgroup: RunCgroup
): ReadonlyArray<string> => [...new Set([cgroup.memory, cgroup.pids].filter((dir) => dir !== undefined))]

/** What the box is held to: its own bounds, or one vCPU's defaults (a box is never unbounded). */
const boundsOf = (program: IsolatedProgram) => ({
  memoryBytes: program.memoryBytes ?? Limits.boxMemoryBytesPerCpu,
  pidsMax: program.pidsMax ?? Limits.boxPidsPerCpu
})

/** The run's own cgroups under ours, limited; none (the run goes without that bound) where the host has none. */
const createCgroup = (support: IsolationSupport, bounds: ReturnType<typeof boundsOf>): RunCgroup => {
  const name = `${runCgroupPrefix}${randomBytes(6).toString("hex")}`
  const memory = support.memoryLimits === "none" || support.cgroup === undefined
    ? undefined
    : join(support.cgroup, name)
  const cgroup: RunCgroup = {
    version: support.memoryLimits === "cgroup2" ? "cgroup2" : "cgroup1",
    memory,
    pids: support.pidsCgroup === undefined ? undefined : join(support.pidsCgroup, name)
  }
  const made: Array<string> = []
  try {
    for (const dir of dirsOf(cgroup)) {
      mkdirSync(dir)
      made.push(dir)
    }
    if (cgroup.memory !== undefined) limitMemory(cgroup.memory, cgroup.version, bounds.memoryBytes)
    if (cgroup.pids !== undefined) writeFileSync(join(cgroup.pids, "pids.max"), String(bounds.pidsMax))
  } catch (error) {
    for (const dir of made) rmdirSync(dir)
    throw error
  }
  return cgroup
}

const limitMemory = (dir: string, version: RunCgroup["version"], memoryBytes: number) => {
  // memory and swap together: a limit without the swap one lets the program swap instead of being killed
  const [limit, swap, swapValue] = version === "cgroup2"
    ? ["memory.max", "memory.swap.max", "0"]
    : ["memory.limit_in_bytes", "memory.memsw.limit_in_bytes", String(memoryBytes)]
  writeFileSync(join(dir, limit), String(memoryBytes))
  if (existsSync(join(dir, swap))) writeFileSync(join(dir, swap), swapValue)
}

/** The kernel counts OOM kills per cgroup (v1 since Linux 4.13; before, a SIGKILL after the limit was hit). */
const wasOomKilled = (dir: string, version: RunCgroup["version"], signal: string | undefined): boolean => {
  const events = readFileSync(join(dir, version === "cgroup2" ? "memory.events" : "memory.oom_control"), "utf8")
  const kills = /^oom_kill (\d+)$/mu.exec(events)?.[1]
  if (kills !== undefined) return Number(kills) > 0
  return signal === "SIGKILL" && Number(readFileSync(join(dir, "memory.failcnt"), "utf8")) > 0
}

const signalNames = new Map(Object.entries(osConstants.signals).map(([name, number]) => [number, name]))

/** bwrap exits with the program's code, or 128 + n when a signal n killed it (bash's convention). */
const outcomeOf = (code: number | null, signal: NodeJS.Signals | null): Omit<Outcome, "oomKilled"> => {
  if (signal !== null) return { exitCode: undefined, signal }
  const killedBy = code !== null && code > 128 ? signalNames.get(code - 128) : undefined
  if (killedBy !== undefined) return { exitCode: undefined, signal: killedBy }
  return { exitCode: code ?? undefined, signal: undefined }
}

const signalQuietly = (pid: number | undefined, signal: NodeJS.Signals) => {
  try {
    if (pid !== undefined) process.kill(pid, signal)
  } catch {
    // already gone
  }
}

const readAll = (stream: Readable): Promise<string> =>
  new Promise((resolve, reject) => {
    const chunks: Array<Buffer> = []
    stream.on("data", (chunk: Buffer) => chunks.push(chunk))
    stream.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")))
    stream.on("error", reject)
  })

const lstatOrUndefined = (path: string) => lstatSync(path, { throwIfNoEntry: false })

const readOrEmpty = (path: string) => existsSync(path) ? readFileSync(path, "utf8") : ""

const messageOf = (error: unknown) => error instanceof Error ? error.message : String(error)

/**
 * A box's processes can stay listed in its cgroup for a few milliseconds after bwrap exits (the kernel is still
 * tearing them down), and rmdir fails with EBUSY meanwhile: retry (as runc does), killing whatever is left. A cgroup
 * that still cannot be removed is left, and said in the log.
 */
const removeCgroup = async (dir: string, logPath: string): Promise<void> => {
  for (let attempt = 0; attempt < 20; attempt++) {
    try {
      rmdirSync(dir)
      return
    } catch {
      for (const pid of readOrEmpty(join(dir, "cgroup.procs")).split("\n").filter(Boolean)) {
        signalQuietly(Number(pid), "SIGKILL")
      }
      await new Promise((resolve) => setTimeout(resolve, Math.min(2 ** attempt, 100)))
    }
  }
  appendFileSync(logPath, `nodus: the cgroup ${dir} could not be removed\n`)
}
