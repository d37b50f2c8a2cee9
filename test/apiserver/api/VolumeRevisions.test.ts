// A Volume's revisions over HTTP (src/kinds/volume/http/VolumeApi.ts; spec: "a Volume has revisions";
// docs/kinds/Volume.md, "Revisions"): POST …/volumes/{name}/revisions commits a tar.zst as the next revision, GET
// …/revisions/{n} reads it back by its digest; the newest `volumeRevisionsKept` are kept and a dropped one's archive is
// released; a body that is not zstd, one past the Volume's size (archived or unpacked), and a commit while a writer
// holds the Volume are refused with their codes.
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { execFileSync } from "node:child_process"
import { createHash } from "node:crypto"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { volumeRevisionsKept } from "../../../src/core/Limits.ts"
import { request, startTestServer, type TestServer } from "../../support/TestServer.ts"
import { assertStatus, createProject, v1 } from "./Support.ts"

const project = "vol-rev"
const volumePath = (name: string) => `${v1}/namespaces/${project}/volumes/${name}`
const sha = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex")

/** A tar.zst of one file `a.txt` holding `text`, as `nodus volume put` makes it. */
const archiveOf = (text: string): Buffer => {
  const dir = mkdtempSync(join(tmpdir(), "nodus-volume-test-"))
  try {
    writeFileSync(join(dir, "a.txt"), text)
    return execFileSync("tar", ["--zstd", "-cf", "-", "-C", dir, "."])
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

describe("Volume revisions over HTTP", () => {
  let server: TestServer

  const send = (method: string, path: string, body?: Uint8Array) =>
    fetch(`${server.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${server.token}`, "content-type": "application/zstd" },
      ...(body === undefined ? {} : { body })
    })

  const createVolume = async (name: string, size = "1Gi") => {
    const created = await request(server, "POST", `${v1}/namespaces/${project}/volumes`, {
      body: { apiVersion: "nodus.dev/v1", kind: "Volume", metadata: { name }, spec: { size } }
    })
    assert.strictEqual(created.status, 201, created.text)
    return created.body
  }

  const commit = async (name: string, bytes: Uint8Array) => {
    const reply = await send("POST", `${volumePath(name)}/revisions`, bytes)
    return { status: reply.status, body: JSON.parse(await reply.text()) }
  }

  beforeAll(async () => {
    server = await startTestServer()
    await createProject(server, project)
  })
  afterAll(() => server.stop())

  it("commits an archive as the next revision and reads each back by number, with its digest", async () => {
    await createVolume("data")
    const first = archiveOf("one\n")
    const second = archiveOf("two\n")
    const one = await commit("data", first)
    assert.strictEqual(one.status, 201, JSON.stringify(one.body))
    assert.strictEqual(one.body.status.phase, "Available")
    assert.strictEqual(one.body.status.revision, 1)
    assert.deepInclude(one.body.status.revisions[0], { revision: 1, sha256: sha(first), sizeBytes: first.length })
    assert.isString(one.body.status.revisions[0].createdTime)
    const two = await commit("data", second)
    assert.strictEqual(two.body.status.revision, 2)
    assert.deepStrictEqual(two.body.status.revisions.map((entry: { revision: number }) => entry.revision), [1, 2])
    for (const [revision, bytes] of [[1, first], [2, second]] as const) {
      const read = await send("GET", `${volumePath("data")}/revisions/${revision}`)
      assert.strictEqual(read.status, 200)
      assert.strictEqual(read.headers.get("content-type"), "application/zstd")
      assert.strictEqual(read.headers.get("digest"), `sha-256=${Buffer.from(sha(bytes), "hex").toString("base64")}`)
      assert.deepStrictEqual(Buffer.from(await read.arrayBuffer()), bytes)
    }
    assertStatus(server, await request(server, "GET", `${volumePath("data")}/revisions/3`), 404, "NotFound")
    assertStatus(server, await request(server, "GET", `${volumePath("data")}/revisions/latest`), 400, "BadRequest")
    assertStatus(server, await request(server, "GET", `${volumePath("nothing")}/revisions/1`), 404, "NotFound")
  })

  it(`keeps the newest ${volumeRevisionsKept} revisions and releases the archive of one dropped`, async () => {
    await createVolume("rolling")
    const archives = Array.from({ length: volumeRevisionsKept + 1 }, (_, index) => archiveOf(`revision ${index + 1}\n`))
    let last: any
    for (const bytes of archives) last = await commit("rolling", bytes)
    assert.strictEqual(last.status, 201, JSON.stringify(last.body))
    assert.strictEqual(last.body.status.revision, volumeRevisionsKept + 1)
    assert.deepStrictEqual(
      last.body.status.revisions.map((entry: { revision: number }) => entry.revision),
      Array.from({ length: volumeRevisionsKept }, (_, index) => index + 2)
    )
    const dropped = await request(server, "GET", `${volumePath("rolling")}/revisions/1`)
    assertStatus(server, dropped, 404, "NotFound")
    assert.include(dropped.body.message, "no longer keeps revision 1")
    // Nothing else held the first archive: the store no longer has it (the admin reads every blob).
    assert.strictEqual((await send("HEAD", `/blobs/v1/sha256:${sha(archives[0]!)}`)).status, 404)
    assert.strictEqual((await send("HEAD", `/blobs/v1/sha256:${sha(archives[1]!)}`)).status, 200)
  })

  it("refuses a body that is not zstd, one past the Volume's size, and a wrong declared digest, keeping nothing", async () => {
    await createVolume("small", "1Ki")
    const plain = Buffer.from("not an archive")
    const notZstd = await commit("small", plain)
    assert.strictEqual(notZstd.status, 400, JSON.stringify(notZstd.body))
    assert.strictEqual(notZstd.body.reason, "BadRequest")
    assert.strictEqual((await send("HEAD", `/blobs/v1/sha256:${sha(plain)}`)).status, 404)
    const big = Buffer.concat([Buffer.from([0x28, 0xb5, 0x2f, 0xfd]), Buffer.alloc(4096, 1)])
    const tooLarge = await commit("small", big)
    assert.strictEqual(tooLarge.status, 413, JSON.stringify(tooLarge.body))
    assert.strictEqual(tooLarge.body.reason, "FileTooLarge")
    const archive = archiveOf("x\n")
    const wrong = await send("POST", `${volumePath("small")}/revisions?sha256=${"0".repeat(64)}`, archive)
    assert.strictEqual(wrong.status, 422)
    const volume = await request(server, "GET", volumePath("small"))
    assert.isUndefined(volume.body.status?.revision)
  })

  it("refuses an archive that expands past the Volume's size, however small it is, keeping nothing", async () => {
    await createVolume("bomb", "1Mi")
    const dir = mkdtempSync(join(tmpdir(), "nodus-volume-test-"))
    try {
      execFileSync("sh", ["-c", `head -c ${64 * 1024 * 1024} /dev/zero > ${join(dir, "zeros")}`])
      const bomb = execFileSync("tar", ["--zstd", "-cf", "-", "-C", dir, "."])
      assert.isBelow(bomb.length, 64 * 1024) // far below the Volume's size
      const refused = await commit("bomb", bomb)
      assert.strictEqual(refused.status, 413, JSON.stringify(refused.body))
      assert.strictEqual(refused.body.reason, "FileTooLarge")
      assert.include(refused.body.message, "expands to more than")
      assert.strictEqual((await send("HEAD", `/blobs/v1/sha256:${sha(bomb)}`)).status, 404)
      assert.isUndefined((await request(server, "GET", volumePath("bomb"))).body.status?.revision)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it("refuses a commit while a writer holds the Volume: VolumeBusy", async () => {
    const volume = await createVolume("held")
    const bound = await request(server, "PUT", `${volumePath("held")}/status`, {
      body: { ...volume, status: { phase: "InUse", boundTo: { kind: "Job", name: "writer" } } }
    })
    assert.strictEqual(bound.status, 200, bound.text)
    const refused = await commit("held", archiveOf("x\n"))
    assert.strictEqual(refused.status, 409, JSON.stringify(refused.body))
    assert.strictEqual(refused.body.reason, "VolumeBusy")
    assert.include(refused.body.message, "Job \"writer\"")
  })

  it("answers 405 to other methods", async () => {
    assertStatus(server, await request(server, "DELETE", `${volumePath("data")}/revisions/1`), 405, "MethodNotAllowed")
    assertStatus(server, await request(server, "GET", `${volumePath("data")}/revisions`), 405, "MethodNotAllowed")
  })
})
