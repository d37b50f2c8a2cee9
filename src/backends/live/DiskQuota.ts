/**
 * The disk quota of a box's writable space (docs/isolation.md, "Bounds"): a run's area — what the box sees at
 * /platform/work, state and outputs, a Sandbox's /workspace, its inputs and its log — is a filesystem of its own, an
 * ext4 image of the run's quota beside the area (`<area>.disk`, sparse: it takes on the host's disk only what was
 * written) mounted through a loop device at the area. Writing past it fails with ENOSPC in the box, and the host's
 * disk is untouched. The image is on the host's disk, so what the box wrote outlives the box (until the run is
 * dropped).
 *
 * Where the host cannot (not root, no loop devices, no mkfs.ext4) the area is a plain directory and the agent polls
 * its usage instead (`overQuota`), stopping a box past its quota with the reason; detection says so in `problems`.
 *
 * Plain TypeScript over node:child_process and node:fs, as Isolation.ts.
 */
import { execFile } from "node:child_process"
import { randomBytes } from "node:crypto"
import { accessSync, constants, existsSync, mkdirSync, readFileSync, renameSync, rmdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { promisify } from "node:util"

export type DiskQuotas = "loop" | "polled"

/** Where quotas are polled, how often a box's usage is measured. */
export const quotaPollMs = 5_000

const run = promisify(execFile)

/** How this host bounds a box's writable space, and the problem when it can only poll. */
export const detectDiskQuotas = (): { readonly diskQuotas: DiskQuotas; readonly problem: string | undefined } => {
  const why = process.getuid?.() !== 0
    ? "the agent does not run as root"
    : !existsSync("/dev/loop-control")
    ? "the host has no loop devices (/dev/loop-control)"
    : mkfs() === undefined
    ? "mkfs.ext4 is missing (apt-get install e2fsprogs)"
    : undefined
  if (why === undefined) return { diskQuotas: "loop", problem: undefined }
  return {
    diskQuotas: "polled",
    problem: `disk quotas are polled (a box can pass its quota for a few seconds before it is stopped): ${why}`
  }
}

const mkfs = (): string | undefined =>
  ["/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"].find((path) => {
    try {
      accessSync(path, constants.X_OK)
      return true
    } catch {
      return false
    }
  })

/** Where the area's image lives: beside it, on the host's disk. */
export const imageOf = (area: string) => `${area}.disk`

/**
 * Makes `area` (which must not exist yet) an ext4 filesystem of `bytes`, mounted nosuid and nodev: a sparse copy of
 * the template of that size (`cp --sparse=always` copies its few MB of metadata in a few ms, where mkfs of 10 GiB
 * takes 50 to 70 ms).
 */
export const mountArea = async (area: string, bytes: number): Promise<void> => {
  const image = imageOf(area)
  mkdirSync(dirname(area), { recursive: true })
  await run("cp", ["--sparse=always", await templateOf(bytes), image])
  try {
    mkdirSync(area)
    await run("mount", ["-o", "loop,nosuid,nodev", image, area])
  } catch (error) {
    rmSync(image, { force: true })
    throw error
  }
  rmdirSync(join(area, "lost+found"))
}

const templates = new Map<number, Promise<string>>()

/**
 * The empty filesystem of `bytes` this process copies for each area: made once per size, sparse, without initializing
 * its inode tables and journal ahead (the kernel does it lazily, punching holes: the image stays sparse), no blocks
 * reserved for root. Kept in one directory of the host's (each size once, whichever process made it), made under a
 * name of its own and renamed, so a half-made one is never copied.
 */
const templateOf = (bytes: number): Promise<string> => {
  const known = templates.get(bytes)
  if (known !== undefined) return known
  const made = (async () => {
    const dir = join(tmpdir(), "nodus-disk-templates")
    mkdirSync(dir, { recursive: true, mode: 0o700 })
    const template = join(dir, `ext4-${bytes}.img`)
    if (existsSync(template)) return template
    const partial = `${template}.${process.pid}.${randomBytes(4).toString("hex")}`
    try {
      await run("truncate", ["-s", String(bytes), partial])
      await run(mkfs()!, ["-q", "-F", "-m", "0", "-E", "lazy_itable_init=1,lazy_journal_init=1", partial])
      renameSync(partial, template)
      return template
    } finally {
      rmSync(partial, { force: true })
    }
  })()
  templates.set(bytes, made)
  made.catch(() => templates.delete(bytes))
  return made
}

/** Removes an area and its image, unmounting first whatever is mounted at or under it. */
export const removeArea = async (area: string): Promise<void> => {
  await unmountUnder(area)
  rmSync(area, { recursive: true, force: true })
  rmSync(imageOf(area), { force: true })
}

/**
 * Unmounts every mount at or under `dir`, lazily (nothing holds it up; a box still running keeps its own view until it
 * ends): what a previous agent left, or an agent's areas when it stops. The images stay.
 */
export const unmountUnder = async (dir: string): Promise<void> => {
  for (const mount of mountsUnder(dir)) await run("umount", ["-l", mount]).catch(() => undefined)
}

/** Mount points at or under `dir`, deepest first (mountinfo's fifth field, with its octal escapes). */
const mountsUnder = (dir: string): ReadonlyArray<string> =>
  readFileSync("/proc/self/mountinfo", "utf8").split("\n")
    .map((line) => line.split(" ")[4])
    .filter((point): point is string => point !== undefined)
    .map((point) =>
      point.replace(/\\([0-7]{3})/gu, (_, octal: string) => String.fromCharCode(Number.parseInt(octal, 8)))
    )
    .filter((point) => point === dir || point.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length)

/**
 * Where quotas are polled: the area's usage (`du`, allocated blocks: a sparse file counts what it holds) when it is
 * past `bytes`, else undefined.
 */
export const overQuota = async (area: string, bytes: number): Promise<number | undefined> => {
  const { stdout } = await run("du", ["-s", "-B1", "-x", area])
  const used = Number(stdout.split("\t")[0])
  return used > bytes ? used : undefined
}
