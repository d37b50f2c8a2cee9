/**
 * The archives a host makes and unpacks (src/backends/live/Archive.ts), with the real tar and zstd: an archive that
 * expands past its bound is refused as it unpacks, without filling the disk; a sparse file round-trips sparse.
 */
import { execFileSync } from "node:child_process"
import { createReadStream, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterEach, beforeEach, describe, expect, it } from "vitest"
import { packArchive, unpackArchive } from "../../../src/backends/live/Archive.ts"

const MiB = 1024 * 1024
const GiB = 1024 * MiB
let dir = ""
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "nodus-archive-"))
})
afterEach(() => rmSync(dir, { recursive: true, force: true }))

/** Bytes a file takes on the disk (its allocated blocks), not its length. */
const allocated = (path: string) => statSync(path).blocks * 512

const unpack = (archive: string, into: string, bytesMax: number) => {
  mkdirSync(into)
  return unpackArchive(createReadStream(archive), into, {
    runAs: undefined,
    extra: [],
    bound: { bytesMax, what: "the test's bound" }
  })
}

describe("unpacking", () => {
  it("refuses an archive that expands past its bound as it unpacks, having written at most about the bound", async () => {
    const source = join(dir, "source")
    mkdirSync(source)
    execFileSync("sh", ["-c", `head -c ${256 * MiB} /dev/zero > ${join(source, "zeros")}`])
    const archive = join(dir, "bomb.tar.zst")
    execFileSync("tar", ["--zstd", "-cf", archive, "-C", source, "."])
    rmSync(source, { recursive: true })
    expect(statSync(archive).size).toBeLessThan(MiB) // 256 MiB of zeros in a few KB

    const into = join(dir, "into")
    const unpacked = await unpack(archive, into, 8 * MiB)
    expect(unpacked.overBound).toBe(`it expands to more than ${8 * MiB} bytes, the test's bound: unpacking stopped`)
    const written = readdirSync(into).map((name) => allocated(join(into, name))).reduce((sum, size) => sum + size, 0)
    expect(written).toBeLessThanOrEqual(8 * MiB)
  })

  it("unpacks an archive within its bound", async () => {
    const source = join(dir, "source")
    mkdirSync(source)
    execFileSync("sh", ["-c", `head -c ${MiB} /dev/urandom > ${join(source, "data")}`])
    const archive = join(dir, "data.tar.zst")
    await packArchive(archive, source, ["."])
    const unpacked = await unpack(archive, join(dir, "into"), 4 * MiB)
    expect(unpacked).toEqual({ code: 0, stderr: "" })
    expect(statSync(join(dir, "into", "data")).size).toBe(MiB)
  })
})

describe("a sparse file", () => {
  it("round-trips sparse: its length kept, its holes not written, in the archive or on unpacking", async () => {
    const source = join(dir, "source")
    mkdirSync(source)
    const sparse = join(source, "sparse")
    execFileSync("sh", ["-c", `truncate -s ${4 * GiB} ${sparse} && printf end >> ${sparse}`])
    const archive = join(dir, "sparse.tar.zst")
    await packArchive(archive, source, ["sparse"])
    expect(statSync(archive).size).toBeLessThan(MiB)

    const into = join(dir, "into")
    const unpacked = await unpack(archive, into, 64 * MiB)
    expect(unpacked.code).toBe(0)
    expect(statSync(join(into, "sparse")).size).toBe(4 * GiB + 3)
    expect(allocated(join(into, "sparse"))).toBeLessThan(MiB)
  })
})
