// Blob uploads over HTTP (spec: uploads through /blobs/v1; src/http/BlobApi.ts; docs/blobs.md): PUT stores
// a body whose SHA-256 the path names and answers 201 or 200, HEAD and GET read it with its Digest, a mismatch is 422
// SHA256Mismatch, a declared size past the bound 413 FileTooLarge, a malformed reference 400; scopes and projects
// decide who writes and reads, and a blob another project uploaded is 404 to a project until it uploads it too.
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { createHash } from "node:crypto"
import { request as httpRequest } from "node:http"
import { blobBytesMax } from "../../../src/core/Limits.ts"
import { request, startTestServer, type TestServer } from "../../support/TestServer.ts"
import { assertStatus, createProject } from "./Support.ts"

const sha = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex")
const blobPath = (digest: string, project?: string) =>
  `/blobs/v1/sha256:${digest}${project === undefined ? "" : `?project=${project}`}`

describe("blobs over HTTP", () => {
  let server: TestServer
  const keys = new Map<string, string>()

  const send = (
    method: string,
    path: string,
    options: { readonly body?: Uint8Array; readonly token?: string; readonly headers?: Record<string, string> } = {}
  ) =>
    fetch(`${server.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${options.token ?? server.token}`, ...options.headers },
      ...(options.body === undefined ? {} : { body: options.body })
    })

  const keyFor = async (project: string, name: string, scopes: ReadonlyArray<string>) => {
    const created = await request(server, "POST", `/apis/nodus.dev/v1/namespaces/${project}/serviceaccounts`, {
      body: { apiVersion: "nodus.dev/v1", kind: "ServiceAccount", metadata: { name }, spec: { scopes } }
    })
    assert.strictEqual(created.status, 201, created.text)
    const issued = await request(
      server,
      "POST",
      `/apis/nodus.dev/v1/namespaces/${project}/serviceaccounts/${name}/tokens`,
      { body: {} }
    )
    assert.strictEqual(issued.status, 201, issued.text)
    keys.set(name, issued.body.status.token)
  }
  const key = (name: string) => keys.get(name)!

  beforeAll(async () => {
    server = await startTestServer()
    await createProject(server, "blob-a")
    await createProject(server, "blob-b")
    await keyFor("blob-a", "writer-a", ["blobs:write"])
    await keyFor("blob-b", "writer-b", ["blobs:write"])
    await keyFor("blob-a", "jobs-only", ["jobs:write"])
  })
  afterAll(() => server.stop())

  it("PUT stores the body under its digest; HEAD and GET read it back with its Digest", async () => {
    const bytes = new TextEncoder().encode("print('hello from a blob')\n")
    const put = await send("PUT", blobPath(sha(bytes)), { body: bytes, token: key("writer-a") })
    assert.strictEqual(put.status, 201, await put.clone().text())
    assert.deepStrictEqual(await put.json(), { digest: `sha256:${sha(bytes)}`, sizeBytes: bytes.length })
    const again = await send("PUT", blobPath(sha(bytes)), { body: bytes, token: key("writer-a") })
    assert.strictEqual(again.status, 200)
    const head = await send("HEAD", blobPath(sha(bytes)), { token: key("writer-a") })
    assert.strictEqual(head.status, 200)
    assert.strictEqual(head.headers.get("content-length"), String(bytes.length))
    assert.strictEqual(head.headers.get("digest"), `sha-256=${Buffer.from(sha(bytes), "hex").toString("base64")}`)
    const get = await send("GET", blobPath(sha(bytes)), { token: key("writer-a") })
    assert.strictEqual(get.status, 200)
    assert.strictEqual(get.headers.get("etag"), `"sha256:${sha(bytes)}"`)
    assert.isTrue(Buffer.from(await get.arrayBuffer()).equals(Buffer.from(bytes)))
  })

  it("a body whose digest is not the path's is 422 SHA256Mismatch, and nothing is stored", async () => {
    const bytes = new TextEncoder().encode("the real content")
    const claimed = sha(new TextEncoder().encode("something else"))
    const put = await send("PUT", blobPath(claimed), { body: bytes })
    assert.strictEqual(put.status, 422)
    const status: any = await put.json()
    assert.strictEqual(status.reason, "SHA256Mismatch")
    assert.strictEqual(status.details.causes[0].field, "path")
    assert.strictEqual((await send("HEAD", blobPath(claimed))).status, 404)
    assert.strictEqual((await send("HEAD", blobPath(sha(bytes)))).status, 404)
  })

  it("a malformed reference is 400 with the path's cause; an unknown method is 405", async () => {
    for (const reference of ["sha256:ABC", "md5:0123", `sha256:${"0".repeat(63)}`, `sha256:${"A".repeat(64)}`]) {
      const reply = await request(server, "GET", `/blobs/v1/${reference}`)
      assertStatus(server, reply, 400, "BadRequest")
      assert.strictEqual(reply.body.details.causes[0].field, "path")
    }
    const deleted = await request(server, "DELETE", blobPath(sha(new Uint8Array(1))))
    assertStatus(server, deleted, 405, "MethodNotAllowed")
  })

  it("a declared size past the bound is 413 FileTooLarge before the body is read", async () => {
    // fetch will not send a Content-Length its body does not have: a raw request declares one and sends two bytes.
    const url = new URL(`${server.url}${blobPath(sha(new Uint8Array(2)))}`)
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const outgoing = httpRequest({
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: "PUT",
        headers: { authorization: `Bearer ${server.token}`, "content-length": String(blobBytesMax + 1) }
      }, (response) => {
        let body = ""
        response.on("data", (chunk) => (body += chunk))
        response.on("end", () => resolve({ status: response.statusCode ?? 0, body }))
      })
      outgoing.on("error", reject)
      outgoing.write("xx")
    })
    assert.strictEqual(answer.status, 413)
    assert.strictEqual(JSON.parse(answer.body).reason, "FileTooLarge")
  })

  it("another project's blob is not there until that project uploads the same bytes", async () => {
    const bytes = new TextEncoder().encode("project a's code")
    assert.strictEqual((await send("PUT", blobPath(sha(bytes)), { body: bytes, token: key("writer-a") })).status, 201)
    assert.strictEqual((await send("HEAD", blobPath(sha(bytes)), { token: key("writer-b") })).status, 404)
    const get = await send("GET", blobPath(sha(bytes)), { token: key("writer-b") })
    assert.strictEqual(get.status, 404)
    assert.strictEqual(((await get.json()) as any).reason, "NotFound")
    // Uploading them proves it has them: new to project b (201: it learns nothing of a), now readable by both.
    assert.strictEqual((await send("PUT", blobPath(sha(bytes)), { body: bytes, token: key("writer-b") })).status, 201)
    assert.strictEqual((await send("PUT", blobPath(sha(bytes)), { body: bytes, token: key("writer-b") })).status, 200)
    assert.strictEqual((await send("HEAD", blobPath(sha(bytes)), { token: key("writer-b") })).status, 200)
  })

  it("the organisation's uploads are every project's; the admin may upload for one project", async () => {
    const shared = new TextEncoder().encode("org-wide base image layer")
    assert.strictEqual((await send("PUT", blobPath(sha(shared)), { body: shared })).status, 201)
    assert.strictEqual((await send("HEAD", blobPath(sha(shared)), { token: key("writer-b") })).status, 200)
    const forA = new TextEncoder().encode("for project a only")
    assert.strictEqual((await send("PUT", blobPath(sha(forA), "blob-a"), { body: forA })).status, 201)
    assert.strictEqual((await send("HEAD", blobPath(sha(forA)), { token: key("writer-a") })).status, 200)
    assert.strictEqual((await send("HEAD", blobPath(sha(forA)), { token: key("writer-b") })).status, 404)
    const missing = await send("PUT", blobPath(sha(forA), "no-such-project"), { body: forA })
    assert.strictEqual(missing.status, 404)
  })

  it("writes need blobs:write and a key's own project; reads need blobs:read", async () => {
    const bytes = new TextEncoder().encode("scoped")
    const noScope = await send("PUT", blobPath(sha(bytes)), { body: bytes, token: key("jobs-only") })
    assert.strictEqual(noScope.status, 403)
    assert.include(((await noScope.json()) as any).message, "blobs:write")
    assert.strictEqual((await send("GET", blobPath(sha(bytes)), { token: key("jobs-only") })).status, 403)
    const elsewhere = await send("PUT", blobPath(sha(bytes), "blob-b"), { body: bytes, token: key("writer-a") })
    assert.strictEqual(elsewhere.status, 403)
    assert.strictEqual((await send("PUT", blobPath(sha(bytes)), { body: bytes, token: "nds_not-a-key" })).status, 401)
  })
})
