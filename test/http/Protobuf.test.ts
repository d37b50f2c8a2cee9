// Tests for the protobuf Namespace decoder: a body captured from real kubectl (frozen, and captured live from the
// installed kubectl against a throwaway mock server), hand-built bodies from an independent encoder written here
// (so the tests do not lean on the code they check), malformed bodies that must be an Err, and a property that
// no byte string makes the decoder throw.

import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { execFile } from "node:child_process"
import { existsSync } from "node:fs"
import { mkdtemp, rm } from "node:fs/promises"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import { decodeNamespace, type NamespaceObject, protobufMediaType } from "../../src/http/Protobuf.ts"

// ---------------------------------------------------------------------------------------------------------------
// An independent protobuf encoder, just enough to build bodies.

const magic = Uint8Array.of(0x6b, 0x38, 0x73, 0x00)
const wire = { varint: 0, fixed64: 1, bytes: 2, startGroup: 3, fixed32: 5 } as const

const concat = (...parts: ReadonlyArray<Uint8Array | ReadonlyArray<number>>): Uint8Array =>
  Uint8Array.from(parts.flatMap((part) => [...part]))

/** A base-128 varint; bigint so that full 64-bit values (10 bytes) can be written. */
const varint = (value: number | bigint): Uint8Array => {
  let rest = BigInt.asUintN(64, BigInt(value))
  const out: Array<number> = []
  do {
    const low = Number(rest & 0x7fn)
    rest >>= 7n
    out.push(rest === 0n ? low : low | 0x80)
  } while (rest !== 0n)
  return Uint8Array.from(out)
}

const tag = (field: number, wireType: number): Uint8Array => varint(field * 8 + wireType)
const bytesField = (field: number, payload: Uint8Array | ReadonlyArray<number>): Uint8Array =>
  concat(tag(field, wire.bytes), varint(payload.length), payload)
const stringField = (field: number, text: string): Uint8Array => bytesField(field, new TextEncoder().encode(text))
const messageField = (field: number, ...parts: ReadonlyArray<Uint8Array>): Uint8Array =>
  bytesField(field, concat(...parts))
const mapEntry = (field: number, key: string, value: string): Uint8Array =>
  messageField(field, stringField(1, key), stringField(2, value))

/** A whole body: prefix, runtime.Unknown with TypeMeta v1/Namespace, and `raw` as the object. */
const body = (
  raw: Uint8Array,
  typeMeta: { readonly apiVersion: string; readonly kind: string } = { apiVersion: "v1", kind: "Namespace" }
) =>
  concat(magic, messageField(1, stringField(1, typeMeta.apiVersion), stringField(2, typeMeta.kind)), bytesField(2, raw))

/** A Namespace message whose metadata holds `metadataParts`. */
const namespaceRaw = (...metadataParts: ReadonlyArray<Uint8Array>): Uint8Array => messageField(1, ...metadataParts)

const fromHex = (hex: string): Uint8Array => Uint8Array.from(Buffer.from(hex, "hex"))

const decodedValue = (bytes: Uint8Array): NamespaceObject => {
  const result = decodeNamespace(bytes)
  if (result._tag === "Err") throw new Error(`expected Ok, got Err: ${result.message}`)
  return result.value
}

const assertErr = (bytes: Uint8Array, fragment: string): void => {
  const result = decodeNamespace(bytes)
  assert.strictEqual(result._tag, "Err")
  if (result._tag === "Err") assert.include(result.message, fragment)
}

// ---------------------------------------------------------------------------------------------------------------
// Golden bodies from real kubectl.

/** `kubectl create namespace golden-ns --dry-run=server` from kubectl v1.32.4, captured once and frozen. */
const kubectl132GoldenHex =
  "6b3873000a0f0a02763112094e616d65737061636512210a190a09676f6c64656e2d6e7312001a0022002a00320038004200" +
  "12001a020a001a002200"

const kubectl = process.env["KUBECTL"] ?? "/usr/bin/kubectl"

type Recorded = {
  readonly method: string
  readonly url: string
  readonly contentType: string
  readonly body: Uint8Array
}

/** Answers the discovery requests kubectl makes before it creates a Namespace, and records every POST. */
const mockApiServer = (recorded: Array<Recorded>) => (request: IncomingMessage, response: ServerResponse): void => {
  const chunks: Array<Buffer> = []
  request.on("data", (chunk: Buffer) => chunks.push(chunk))
  request.on("end", () => {
    const send = (status: number, value: unknown) => {
      response.writeHead(status, { "content-type": "application/json" })
      response.end(JSON.stringify(value))
    }
    const path = (request.url ?? "").split("?")[0]
    if (request.method === "POST" && path === "/api/v1/namespaces") {
      recorded.push({
        method: "POST",
        url: request.url ?? "",
        contentType: request.headers["content-type"] ?? "",
        body: Buffer.concat(chunks)
      })
      return send(201, {
        apiVersion: "v1",
        kind: "Namespace",
        metadata: { name: "golden-ns", uid: "u-1", resourceVersion: "1" },
        spec: {},
        status: { phase: "Active" }
      })
    }
    if (path === "/version") return send(200, { major: "1", minor: "32", gitVersion: "v1.32.0" })
    if (path === "/api") return send(200, { kind: "APIVersions", versions: ["v1"] })
    if (path === "/apis") return send(200, { kind: "APIGroupList", apiVersion: "v1", groups: [] })
    if (path === "/api/v1") {
      return send(200, {
        kind: "APIResourceList",
        groupVersion: "v1",
        resources: [{
          name: "namespaces",
          singularName: "namespace",
          namespaced: false,
          kind: "Namespace",
          verbs: ["create", "delete", "get", "list", "watch"],
          shortNames: ["ns"]
        }]
      })
    }
    return send(404, { kind: "Status", apiVersion: "v1", status: "Failure", reason: "NotFound", code: 404 })
  })
}

describe("decodeNamespace: bodies from real kubectl", () => {
  it("decodes the frozen kubectl v1.32.4 body, skipping gogo's empty non-nullable fields", () => {
    assert.deepStrictEqual(decodedValue(fromHex(kubectl132GoldenHex)), {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: "golden-ns" },
      spec: {}
    })
  })

  it("decodes the body the installed kubectl sends for `create namespace`", async () => {
    if (!existsSync(kubectl)) {
      assert.fail(`kubectl not found at ${kubectl}: this test needs a real kubectl (set KUBECTL to its path)`)
    }
    const recorded: Array<Recorded> = []
    const server = createServer(mockApiServer(recorded))
    const directory = await mkdtemp(join(tmpdir(), "nodus-protobuf-"))
    try {
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
      const { port } = server.address() as AddressInfo
      // Asynchronous on purpose: a synchronous child would block this process's event loop, and so the mock server.
      const { stdout } = await promisify(execFile)(kubectl, [
        "--server",
        `http://127.0.0.1:${port}`,
        "--cache-dir",
        join(directory, "cache"),
        "--request-timeout=20s",
        "create",
        "namespace",
        "golden-ns",
        "--dry-run=server",
        "-o",
        "name"
      ], { timeout: 30_000, env: { ...process.env, KUBECONFIG: join(directory, "no-kubeconfig") } })
      assert.strictEqual(stdout.trim(), "namespace/golden-ns")
      assert.strictEqual(recorded.length, 1)
      const post = recorded[0]!
      assert.include(post.url, "dryRun=All")
      assert.strictEqual(post.contentType, protobufMediaType)
      const value = decodedValue(post.body)
      assert.strictEqual(value.metadata.name, "golden-ns")
      assert.strictEqual(value.kind, "Namespace")
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()))
      await rm(directory, { recursive: true, force: true })
    }
  }, 60_000)
})

describe("decodeNamespace: hand-built bodies", () => {
  it("decodes name, generateName, labels, annotations, finalizers and spec.finalizers", () => {
    const raw = concat(
      namespaceRaw(
        stringField(1, "team-a"),
        stringField(2, "team-"),
        mapEntry(11, "tier", "gold"),
        mapEntry(11, "env", "prod"),
        mapEntry(12, "note", "héllo ✓"),
        stringField(14, "example.com/keep"),
        stringField(14, "example.com/audit")
      ),
      messageField(2, stringField(1, "kubernetes"))
    )
    assert.deepStrictEqual(decodedValue(body(raw)), {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: {
        name: "team-a",
        generateName: "team-",
        labels: { tier: "gold", env: "prod" },
        annotations: { note: "héllo ✓" },
        finalizers: ["example.com/keep", "example.com/audit"]
      },
      spec: { finalizers: ["kubernetes"] }
    })
  })

  it("skips unknown fields of every wire type, two-byte and five-byte tags, and 10-byte varints", () => {
    const metadata = namespaceRaw(
      stringField(5, "uid-1"), // uid
      concat(tag(7, wire.varint), varint(-1)), // generation as int64 -1: a 10-byte varint
      messageField(8, concat(tag(1, wire.varint), varint(1_700_000_000))), // creationTimestamp
      concat(tag(10, wire.varint), varint(30)), // deletionGracePeriodSeconds
      messageField(17, stringField(1, "kubectl-create"), stringField(2, "Update")), // managedFields: two-byte tag
      concat(tag(1000, wire.fixed64), [1, 2, 3, 4, 5, 6, 7, 8]),
      concat(tag(2000, wire.fixed32), [9, 9, 9, 9]),
      stringField(536_870_911, "largest field number"),
      stringField(1, "skipped-around")
    )
    const raw = concat(
      metadata,
      messageField(3, stringField(1, "Terminating")),
      concat(tag(99, wire.varint), varint(2n ** 63n))
    )
    const envelope = concat(
      magic,
      concat(tag(9, wire.varint), varint(7)),
      bytesField(2, raw),
      stringField(3, ""),
      stringField(4, ""),
      concat(tag(20, wire.fixed32), [0, 0, 0, 0])
    )
    assert.deepStrictEqual(decodedValue(envelope), {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: "skipped-around" }
    })
  })

  it("reads multi-byte lengths: a 300-byte annotation value", () => {
    const long = "x".repeat(299) + "!"
    const entry = mapEntry(12, "long", long)
    // The value's length (300) needs a two-byte varint, and so does the entry's.
    assert.deepStrictEqual([...varint(300)], [0xac, 0x02])
    assert.deepStrictEqual(decodedValue(body(namespaceRaw(stringField(1, "n"), entry))).metadata.annotations, { long })
  })

  it("accepts a body without TypeMeta, merges repeated metadata, and lets a later map entry win", () => {
    const raw = concat(
      namespaceRaw(stringField(1, "first"), mapEntry(11, "a", "1")),
      namespaceRaw(mapEntry(11, "a", "2"), mapEntry(11, "__proto__", "plain")),
      namespaceRaw(stringField(1, "last"))
    )
    const value = decodedValue(concat(magic, bytesField(2, raw)))
    assert.strictEqual(value.metadata.name, "last")
    const labels = value.metadata.labels ?? {}
    assert.strictEqual(labels["a"], "2")
    assert.isTrue(Object.hasOwn(labels, "__proto__"))
    assert.strictEqual(Object.getPrototypeOf(labels), Object.prototype)
  })

  it("treats a map entry with no key or value as empty strings, as protobuf does", () => {
    const value = decodedValue(body(namespaceRaw(stringField(1, "n"), messageField(11))))
    assert.deepStrictEqual(value.metadata.labels, { "": "" })
  })

  it("round-trips arbitrary labels and annotations", () => {
    const text = fc.string({ unit: "binary", maxLength: 40 })
    const entries = fc.uniqueArray(fc.tuple(text, text), { selector: ([key]) => key, maxLength: 8 })
    fc.assert(
      fc.property(fc.string({ unit: "binary", minLength: 1 }), entries, entries, (name, labels, annotations) => {
        const raw = namespaceRaw(
          stringField(1, name),
          ...labels.map(([key, value]) => mapEntry(11, key, value)),
          ...annotations.map(([key, value]) => mapEntry(12, key, value))
        )
        const metadata = decodedValue(body(raw)).metadata
        assert.strictEqual(metadata.name, name)
        assert.deepStrictEqual(metadata.labels, labels.length === 0 ? undefined : Object.fromEntries(labels))
        assert.deepStrictEqual(
          metadata.annotations,
          annotations.length === 0 ? undefined : Object.fromEntries(annotations)
        )
      })
    )
  })
})

describe("decodeNamespace: malformed bodies are an Err", () => {
  const validRaw = namespaceRaw(stringField(1, "n"))

  it("refuses a body without the k8s\\0 prefix", () => {
    assertErr(new TextEncoder().encode(`{"apiVersion":"v1","kind":"Namespace"}`), "k8s\\0")
    assertErr(Uint8Array.of(0x6b, 0x38), "k8s\\0")
    assertErr(new Uint8Array(), "k8s\\0")
  })

  it("refuses an empty body after the prefix, and an envelope without an object", () => {
    assertErr(magic, "empty")
    assertErr(concat(magic, messageField(1, stringField(1, "v1"), stringField(2, "Namespace"))), "no object")
  })

  it("refuses truncated varints, in a tag and in a length", () => {
    assertErr(concat(magic, [0x80]), "truncated varint")
    assertErr(concat(magic, [0x12, 0x80]), "truncated varint")
    assertErr(body(concat([0x0a, 0x02], [0x0a, 0xff])), "metadata: truncated varint")
  })

  it("refuses a varint longer than 10 bytes", () => {
    assertErr(concat(magic, [0x38], new Array<number>(10).fill(0xff), [0x01]), "64 bits")
  })

  it("refuses a length that runs past the end", () => {
    assertErr(concat(magic, [0x12, 0x05, 0x01]), "past the end")
    assertErr(body(concat([0x0a, 0x04], [0x0a, 0x09, 0x61, 0x62])), "past the end")
    assertErr(concat(magic, bytesField(2, validRaw), tag(30, wire.fixed64), [1, 2, 3]), "truncated 64-bit")
  })

  it("refuses the group wire types 3 and 4, at the top and nested", () => {
    assertErr(concat(magic, tag(5, wire.startGroup)), "group")
    assertErr(concat(magic, tag(5, 4)), "group")
    assertErr(body(namespaceRaw(tag(15, wire.startGroup))), "metadata: field 15 uses the deprecated group wire type 3")
  })

  it("refuses wire types 6 and 7 and field number 0", () => {
    assertErr(concat(magic, tag(5, 6)), "invalid wire type 6")
    assertErr(concat(magic, tag(5, 7)), "invalid wire type 7")
    assertErr(concat(magic, [0x02, 0x00]), "invalid field number 0")
  })

  it("refuses a known field with the wrong wire type", () => {
    assertErr(body(namespaceRaw(tag(1, wire.varint), varint(5))), "metadata.name: expected wire type 2")
    assertErr(concat(magic, tag(2, wire.varint), varint(1)), "raw: expected wire type 2")
  })

  it("refuses a TypeMeta that is not v1 Namespace", () => {
    assertErr(body(validRaw, { apiVersion: "v1", kind: "Pod" }), `expected kind "Namespace", found "Pod"`)
    assertErr(body(validRaw, { apiVersion: "apps/v1", kind: "Namespace" }), `expected apiVersion "v1"`)
  })

  it("refuses a content encoding or a foreign inner content type", () => {
    assertErr(concat(body(validRaw), stringField(3, "gzip")), "content encoding")
    assertErr(concat(body(validRaw), stringField(4, "application/json")), "content type")
  })

  it("refuses invalid UTF-8 in strings", () => {
    assertErr(body(namespaceRaw(bytesField(1, [0x6e, 0xff, 0xfe]))), "metadata.name: invalid UTF-8")
    assertErr(body(namespaceRaw(messageField(11, bytesField(1, [0xc3])))), "metadata.labels.key: invalid UTF-8")
    assertErr(body(validRaw, { apiVersion: "v1", kind: "Namesp\u{fffd}ce" }), "expected kind")
  })
})

describe("decodeNamespace: never throws", () => {
  it("returns Ok or Err for any bytes, with or without the prefix", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.boolean(), (bytes, prefixed) => {
        const result = decodeNamespace(prefixed ? concat(magic, bytes) : bytes)
        assert.isTrue(result._tag === "Ok" || result._tag === "Err")
      }),
      { numRuns: 2000 }
    )
  })

  it("returns Ok or Err for every truncation and byte flip of a valid body", () => {
    const valid = body(concat(
      namespaceRaw(stringField(1, "n"), mapEntry(11, "k", "v"), stringField(14, "f")),
      messageField(2, stringField(1, "kubernetes"))
    ))
    fc.assert(
      fc.property(fc.nat(valid.length), fc.nat(valid.length - 1), fc.integer({ min: 0, max: 255 }), (cut, at, byte) => {
        const mutated = Uint8Array.from(valid)
        mutated[at] = byte
        for (const candidate of [valid.subarray(0, cut), mutated]) {
          const result = decodeNamespace(candidate)
          assert.isTrue(result._tag === "Ok" || result._tag === "Err")
        }
      }),
      { numRuns: 2000 }
    )
  })
})
