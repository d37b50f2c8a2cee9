/**
 * A prebuilt PGlite data directory, so that a fresh one is unpacked instead of initialised (issue 16: start-up ≤ 3 s on
 * a fresh data directory). PGlite's initdb runs PostgreSQL's bootstrap in WebAssembly: 4–5 s of CPU on this project's
 * machine, at the first start of every data directory and for every in-memory database (tests open hundreds). Its
 * output depends on the PGlite build alone, so it is made once, by `npm run pglite:snapshot` (PgliteSnapshotBuild.ts)
 * with the installed PGlite, and kept beside this file as a zstd-compressed tar named after PGlite's version (about 1.1
 * MB: the three databases initdb makes are nearly alike). A fresh data directory is unpacked from it in 0.2-0.3 s of
 * CPU, on a worker thread while the server's modules load (server/DataDir.ts); an in-memory database loads it.
 *
 * Without a snapshot of the installed PGlite's version (after an upgrade), the driver runs initdb as before;
 * test/store/PgliteSnapshot.test.ts fails until the snapshot is rebuilt. The store's schema is in it as its migrations
 * stood when it was built (they took 0.15 s of a fresh start); a migration added since runs on a new database as on
 * any other (SqlStore.ts), so rebuilding after one is for speed, not correctness.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { mkdir, mkdtemp, readFile, rename, rm, writeFile } from "node:fs/promises"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads"
import { zstdDecompress } from "node:zlib"

/** The installed PGlite's version, from its package.json (which its exports do not name). */
export const pgliteVersion = (): string => {
  const entry = fileURLToPath(import.meta.resolve("@electric-sql/pglite"))
  return (JSON.parse(readFileSync(join(dirname(entry), "..", "package.json"), "utf8")) as { version: string }).version
}

/** Where the snapshot of PGlite `version` is kept. */
export const snapshotFile = (version: string = pgliteVersion()): string =>
  join(import.meta.dirname, `pglite-${version}.tar.zst`)

// A tar archive in the POSIX ustar layout, as far as a data directory needs it: regular files and directories,
// names under 100 bytes (the longest in a data directory is about 30), modes, no times (0: the snapshot is the same
// bytes every time it is built from the same files).
const block = 512
const regularFile = "0".charCodeAt(0)
const directory = "5".charCodeAt(0)

const header = (name: string, mode: number, size: number, type: number): Buffer => {
  const bytes = Buffer.alloc(block)
  if (Buffer.byteLength(name) >= 100) {
    throw new Error(`${name}: a name of 100 bytes or more does not fit the snapshot's tar`)
  }
  bytes.write(name, 0, "utf8")
  bytes.write(`${mode.toString(8).padStart(7, "0")}\0`, 100)
  bytes.write("0000000\0", 108)
  bytes.write("0000000\0", 116)
  bytes.write(`${size.toString(8).padStart(11, "0")}\0`, 124)
  bytes.write("00000000000\0", 136)
  bytes[156] = type
  bytes.write("ustar\0" + "00", 257)
  // The checksum is the sum of the header's bytes with its own field read as spaces.
  bytes.write("        ", 148)
  const sum = bytes.reduce((total, byte) => total + byte, 0)
  bytes.write(`${sum.toString(8).padStart(6, "0")}\0 `, 148)
  return bytes
}

/** The files and directories under `root`, in name order, as a tar archive (names relative to `root`). */
export const pack = (root: string): Buffer => {
  const parts: Array<Buffer> = []
  const walk = (relative: string) => {
    for (const name of readdirSync(join(root, relative)).sort()) {
      const path = relative === "" ? name : `${relative}/${name}`
      const stat = statSync(join(root, path))
      if (stat.isDirectory()) {
        parts.push(header(`${path}/`, stat.mode & 0o777, 0, directory))
        walk(path)
      } else if (stat.isFile()) {
        const content = readFileSync(join(root, path))
        parts.push(
          header(path, stat.mode & 0o777, content.length, regularFile),
          content,
          Buffer.alloc((block - (content.length % block)) % block)
        )
      } else {
        throw new Error(`${path}: only files and directories go into the snapshot`)
      }
    }
  }
  walk("")
  parts.push(Buffer.alloc(2 * block))
  return Buffer.concat(parts)
}

const field = (bytes: Uint8Array, offset: number, length: number): string => {
  const raw = Buffer.from(bytes.subarray(offset, offset + length)).toString("utf8")
  const end = raw.indexOf("\0")
  return end === -1 ? raw : raw.slice(0, end)
}

/**
 * Writes the entries of tar archive `tar` under `root`, which must exist; files and directories only. The files are
 * written concurrently, on libuv's threads.
 */
export const unpack = async (tar: Uint8Array, root: string): Promise<void> => {
  const writes: Array<Promise<void>> = []
  for (let offset = 0; offset + block <= tar.length;) {
    const name = field(tar, offset, 100)
    if (name === "") break
    const mode = Number.parseInt(field(tar, offset + 100, 8), 8)
    const size = Number.parseInt(field(tar, offset + 124, 12).trim(), 8)
    const type = tar[offset + 156]!
    const path = join(root, name)
    if (name.startsWith("/") || name.split("/").includes("..")) {
      throw new Error(`${name}: a snapshot entry outside its directory`)
    }
    // A directory's entry comes before those of its files.
    if (type === directory) await mkdir(path, { recursive: true, mode })
    else if (type === regularFile || type === 0) {
      writes.push(writeFile(path, tar.subarray(offset + block, offset + block + size), { mode }))
    } else throw new Error(`${name}: tar entry type ${String.fromCharCode(type)} is not a file or a directory`)
    offset += block + Math.ceil(size / block) * block
  }
  await Promise.all(writes)
}

/**
 * The tar decompresses into one buffer of this size (40 MB of it used): in zlib's default 16 KB chunks, the memory of
 * the decompression stayed resident in the malloc arena of the thread that did it (measured: 25-30 MB of a server's
 * idle RSS when a worker restored its data directory).
 */
const decompressedChunk = 64 * 1024 * 1024

/** The snapshot of the installed PGlite, as an uncompressed tar, or undefined when none is kept for its version. */
export const read = async (): Promise<Uint8Array | undefined> => {
  const file = snapshotFile()
  return existsSync(file)
    ? promisify(zstdDecompress)(await readFile(file), { chunkSize: decompressedChunk })
    : undefined
}

/** Whether a rename failed because another process put a directory there first. */
const occupied = (error: unknown): boolean =>
  ["EEXIST", "ENOTEMPTY"].includes((error as NodeJS.ErrnoException).code ?? "")

/**
 * Makes `dataDir` a new PGlite data directory from the snapshot, when it holds no database yet and a snapshot of the
 * installed PGlite is kept; answers whether it did. The files are unpacked beside it and renamed into place, which
 * fails if another process put a database there first (rename replaces an empty directory only), and leaves no half
 * directory that PGlite would take for a database if the start stops halfway.
 */
export const restore = async (dataDir: string): Promise<boolean> => {
  if (existsSync(dataDir) && readdirSync(dataDir).length > 0) return false
  const tar = await read()
  if (tar === undefined) return false
  await mkdir(dirname(dataDir), { recursive: true, mode: 0o700 })
  const staging = await mkdtemp(`${dataDir}.unpacking-`)
  try {
    await unpack(tar, staging)
    await rename(staging, dataDir)
    return true
  } catch (error) {
    if (occupied(error)) return false
    throw error
  } finally {
    await rm(staging, { recursive: true, force: true })
  }
}

/**
 * `restore` on a worker thread of its own: a server starts it before loading its modules, which holds the main thread
 * for a second or so in which no I/O callback of the main thread runs; the worker decompresses and writes meanwhile.
 */
export const restoreOffThread = (dataDir: string): Promise<boolean> =>
  new Promise((resolve, reject) => {
    const worker = new Worker(new URL(import.meta.url), { workerData: { restore: dataDir } })
    worker.once("message", (restored: boolean) => resolve(restored))
    worker.once("error", reject)
    worker.once("exit", (code) =>
      reject(new Error(`the snapshot's worker exited with code ${code} before it had restored ${dataDir}`)))
  })

if (!isMainThread && typeof (workerData as { restore?: unknown } | undefined)?.restore === "string") {
  parentPort!.postMessage(await restore((workerData as { restore: string }).restore))
}
