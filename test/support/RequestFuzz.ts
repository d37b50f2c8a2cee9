/**
 * Requests a careless client or an attacker sends, as fast-check arbitraries, and the check every answer must pass
 * (hardening issue, item 10): never a 5xx, and every error a Status body with a registered code, its HTTP status and
 * the request id of the `x-request-id` header. Paths mix real routes of every kind with hostile segments; query
 * parameters mix known names with edge values; bodies mix valid objects (from each kind's OpenAPI schema), mutated
 * ones, patches, deep nesting, huge numbers, NUL characters, lone surrogates and text that is not JSON at all.
 *
 * The fuzz test (test/apiserver/api/Fuzz.test.ts) runs it on every CI run; bench/fuzz.ts runs more of it.
 */
import * as fc from "fast-check"
import type { Json } from "../../src/core/Json.ts"
import { type KindInfo } from "../../src/core/meta/Kinds.ts"
import { kinds } from "../../src/kinds/Kinds.ts"
import { jsonValue } from "./Arbitraries.ts"
import { arbitraryOf, specDocument } from "./SchemaArbitrary.ts"

export interface FuzzRequest {
  readonly method: string
  readonly path: string
  readonly headers: Readonly<Record<string, string>>
  readonly body: string | undefined
}

export interface FuzzContext {
  /** The project the fuzz server created, with a Job named `existing` in it. */
  readonly project: string
  readonly adminToken: string
  /** A key bound to `project`, with a few scopes. */
  readonly projectToken: string
}

const group = "nodus.dev"

/** Text with the characters that broke servers before: controls, NUL, non-Latin-1, astral, lone surrogates. */
const hostileText: fc.Arbitrary<string> = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.string({ unit: "binary", maxLength: 12 }),
  fc.constantFrom(
    "\u0000",
    "a\u0000b",
    "中",
    "\ud800",
    "\udfff",
    "😀",
    "\u202e",
    "%",
    "..",
    ".",
    "-",
    "a".repeat(300),
    "",
    " ",
    "\t",
    "\n"
  )
)

/** A path segment as sent on the wire: real names, percent escapes of hostile text, and raw malformed escapes. */
const segment = (...real: ReadonlyArray<string>): fc.Arbitrary<string> =>
  fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom(...real) },
    // A URL cannot carry a lone surrogate: it goes out as U+FFFD, as a browser would send it.
    {
      weight: 2,
      arbitrary: hostileText.map((text) => encodeURIComponent(text.toWellFormed())).filter((text) => text !== "")
    },
    { weight: 1, arbitrary: fc.constantFrom("%00", "%ZZ", "%ED%A0%80", "%C0%AF", "%2F", "%2e%2e", "%25", "x%") }
  )

/** Mostly the kind's own version, so that requests get past routing; sometimes another. */
const versionOf = (info: KindInfo): fc.Arbitrary<string> =>
  fc.oneof({ weight: 8, arbitrary: fc.constant(info.version) }, {
    weight: 1,
    arbitrary: fc.constantFrom("v1", "v1beta1", "v2")
  })

const optional = <A>(arbitrary: fc.Arbitrary<A>): fc.Arbitrary<A | undefined> =>
  fc.option(arbitrary, { nil: undefined, freq: 2 })

const joined = (parts: ReadonlyArray<string | undefined>): string =>
  parts.filter((part) => part !== undefined).join("/")

const methodArbitrary = fc.oneof({ weight: 10, arbitrary: fc.constantFrom("GET", "POST", "PUT", "PATCH", "DELETE") }, {
  weight: 1,
  arbitrary: fc.constantFrom("HEAD", "OPTIONS", "PROPFIND")
})

/** Mostly the methods a path of this shape serves (so requests reach admission), sometimes any. */
const methodFor = (item: boolean): fc.Arbitrary<string> =>
  fc.oneof({
    weight: 6,
    arbitrary: item
      ? fc.constantFrom("GET", "PUT", "PATCH", "PATCH", "DELETE")
      : fc.constantFrom("GET", "POST", "POST")
  }, { weight: 1, arbitrary: methodArbitrary })

/** A method and path of one kind: its collection, an item, or an item's subresource, in a project where it has one. */
const kindTarget = (
  context: FuzzContext,
  info: KindInfo
): fc.Arbitrary<{ readonly method: string; readonly path: string }> => {
  const name = segment("existing", "absent", "a", "default")
  const project = segment(context.project, "missing", "default")
  const base = info.scope === "Namespaced"
    ? fc.tuple(versionOf(info), optional(project)).map(([version, namespace]) =>
      namespace === undefined
        ? `/apis/${group}/${version}/${info.plural}`
        : `/apis/${group}/${version}/namespaces/${namespace}/${info.plural}`
    )
    : versionOf(info).map((version) => `/apis/${group}/${version}/${info.plural}`)
  return fc.tuple(
    base,
    optional(name),
    fc.option(segment("status", "tokens", "scale", "log", "commands", "files"), { nil: undefined, freq: 4 })
  )
    .chain(([collection, item, sub]) =>
      methodFor(item !== undefined).map((method) => ({
        method,
        path: joined([collection, item, item === undefined ? undefined : sub])
      }))
    )
}

/** Paths of no kind: projects and events, discovery, documents, the operator's and the test clock's, and junk. */
const otherPath = (context: FuzzContext): fc.Arbitrary<string> => {
  const project = segment(context.project, "missing", "default")
  const core = fc.tuple(
    fc.constantFrom("namespaces", "events"),
    optional(project),
    optional(fc.constantFrom("events", "status"))
  )
    .map(([plural, item, sub]) => joined([`/api/v1/${plural}`, item, item === undefined ? undefined : sub]))
  const fixed = fc.constantFrom(
    "/",
    "/version",
    "/healthz",
    "/readyz",
    "/livez",
    "/api",
    "/api/v1",
    "/apis",
    `/apis/${group}`,
    `/apis/${group}/v1`,
    "/openapi/v2",
    "/openapi/v3",
    `/openapi/v3/apis/${group}/v1`,
    "/openapi/v3/api/v1",
    "/docs/errors",
    "/docs/errors/NotFound",
    `/apis/${group}/v1/simulation/clock`,
    `/apis/${group}/v1/operator/creditgrants`,
    `/apis/${group}/v1/operator/topups/absent/refund`,
    "/blobs/v1/sha256:00",
    // A Sandbox's box: its commands (a JSON body; any other media type is 415) and files (any path, /proc's too).
    `/apis/${group}/v1/namespaces/${context.project}/sandboxes/fuzz-a/commands`,
    `/apis/${group}/v1/namespaces/${context.project}/sandboxes/fuzz-a/commands/cmd-x/log`,
    `/apis/${group}/v1/namespaces/${context.project}/sandboxes/fuzz-a/files?path=/proc/self/mem`,
    `/apis/${group}/v1/namespaces/${context.project}/sandboxes/fuzz-a/files?path=..%2F..`
  )
  const junk = fc.array(segment("apis", "api", group, "v1", "namespaces", "jobs"), { minLength: 1, maxLength: 7 }).map((
    parts
  ) => `/${parts.join("/")}`)
  return fc.oneof({ weight: 3, arbitrary: core }, { weight: 2, arbitrary: fixed }, { weight: 1, arbitrary: junk })
}

/** Values that broke parameter parsing before: beyond integers, negative, fractional, hostile text. */
const parameterValue: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    "1",
    "0",
    "-1",
    "true",
    "True",
    "1.5",
    "1e3",
    "99999999999999999999",
    "18446744073709551616",
    "9007199254740993",
    "All",
    "Strict",
    "Warn",
    "Ignore",
    "Orphan",
    "Foreground",
    "Object",
    "a=b",
    "a in (b)",
    "metadata.name=x",
    "status.phase!=Running",
    "!a",
    "x,y"
  ),
  fc.integer().map(String),
  hostileText
)

const parameterNames = [
  "limit",
  "continue",
  "labelSelector",
  "fieldSelector",
  "watch",
  "resourceVersion",
  "resourceVersionMatch",
  "timeoutSeconds",
  "allowWatchBookmarks",
  "dryRun",
  "fieldValidation",
  "fieldManager",
  "force",
  "propagationPolicy",
  "includeObject",
  "pretty"
] as const

const queryArbitrary: fc.Arbitrary<string> = fc.array(
  fc.tuple(
    fc.oneof({ weight: 9, arbitrary: fc.constantFrom(...parameterNames) }, { weight: 1, arbitrary: hostileText }),
    parameterValue
  ),
  { maxLength: 3, size: "xsmall" }
)
  .map((pairs) => {
    const query = new URLSearchParams(pairs)
    // A watch that answers 200 streams until its timeout: keep every one short.
    if (query.has("watch")) query.set("timeoutSeconds", "1")
    const text = query.toString()
    return text === "" ? "" : `?${text}`
  })

/** Header values a client can send over HTTP/1.1: printable Latin-1 (fetch refuses anything else). */
const headerText = fc.string({
  unit: fc.integer({ min: 0x20, max: 0xff }).filter((code) => code !== 0x7f).map((code) => String.fromCharCode(code)),
  maxLength: 40
})

const contentTypes = [
  "application/json",
  "application/merge-patch+json",
  "application/json-patch+json",
  "application/apply-patch+yaml",
  "application/strategic-merge-patch+json",
  "application/yaml",
  "application/vnd.kubernetes.protobuf",
  "text/plain",
  "",
  "application/json; charset=utf-8"
]

/** Mostly the media type a method's body is sent as; sometimes any other, or junk. */
const contentTypeFor = (method: string): fc.Arbitrary<string> =>
  fc.oneof(
    {
      weight: 8,
      arbitrary: method === "PATCH"
        ? fc.constantFrom("application/merge-patch+json", "application/json-patch+json", "application/apply-patch+yaml")
        : fc.constant("application/json")
    },
    { weight: 2, arbitrary: fc.constantFrom(...contentTypes) },
    { weight: 1, arbitrary: headerText }
  )

const headersArbitrary = (context: FuzzContext, method: string): fc.Arbitrary<Record<string, string>> =>
  fc.record({
    authorization: fc.oneof(
      { weight: 8, arbitrary: fc.constant(`Bearer ${context.adminToken}`) },
      { weight: 2, arbitrary: fc.constant(`Bearer ${context.projectToken}`) },
      {
        weight: 1,
        arbitrary: fc.constantFrom("", "Bearer", "Bearer nds_x", "Basic YTpi", `bearer  ${context.adminToken}  `)
      },
      { weight: 1, arbitrary: headerText.map((text) => `Bearer ${text}`) }
    ),
    "content-type": contentTypeFor(method),
    accept: sometimes(
      fc.constantFrom(
        "application/json",
        "application/json;as=Table;v=v1;g=meta.k8s.io",
        "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        "*/*",
        "text/html",
        "application/x-garbage"
      )
    ),
    "idempotency-key": sometimes(headerText),
    "if-match": sometimes(fc.oneof(fc.constantFrom("*", "\"1\"", "\"dryrun.x\"", "W/\"1\""), headerText)),
    "user-agent": sometimes(headerText)
  }).map((headers) =>
    Object.fromEntries(Object.entries(headers).filter((entry): entry is [string, string] => entry[1] !== undefined))
  )

/** An optional header, sent by one request in four. */
const sometimes = (value: fc.Arbitrary<string>): fc.Arbitrary<string | undefined> =>
  fc.oneof({ weight: 3, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: value })

const specArbitraries = new Map<KindInfo, fc.Arbitrary<Json>>()

/** Valid specs of a kind, from its OpenAPI schema (built once per kind). */
const specOf = (info: KindInfo): fc.Arbitrary<Json> => {
  let found = specArbitraries.get(info)
  if (found === undefined) specArbitraries.set(info, found = arbitraryOf(specDocument(info), { maxDepth: 3 }))
  return found
}

/** Well-formed objects of a kind: a valid spec from its schema under plain metadata (they reach the deep paths). */
const cleanObjectOf = (info: KindInfo): fc.Arbitrary<Json> =>
  fc.record({
    name: fc.constantFrom("fuzz-a", "fuzz-b", "fuzz-c", "existing"),
    spec: info.hasSpec ? specOf(info) : fc.constant({})
  }).map(({ name, spec }) => ({ apiVersion: `${group}/${info.version}`, kind: info.kind, metadata: { name }, spec }))

/** Objects of a kind: a valid spec from its schema or anything at all in its place, under hostile metadata. */
const objectOf = (info: KindInfo): fc.Arbitrary<Json> => {
  const spec = info.hasSpec
    ? fc.oneof({ weight: 3, arbitrary: specOf(info) }, { weight: 1, arbitrary: jsonValue(fc.string({ maxLength: 6 })) })
    : jsonValue(fc.string({ maxLength: 6 }))
  const metadata = fc.record({
    name: fc.oneof({ weight: 3, arbitrary: fc.constantFrom("fuzz-a", "fuzz-b", "existing") }, {
      weight: 1,
      arbitrary: hostileText
    }),
    generateName: fc.constantFrom("fuzz-", "", "中"),
    labels: fc.dictionary(
      fc.oneof(fc.constantFrom("app", "team"), hostileText),
      fc.oneof(fc.constantFrom("a", "b"), hostileText),
      { maxKeys: 2 }
    ),
    annotations: fc.dictionary(
      fc.oneof(fc.constantFrom("note", "kubectl.kubernetes.io/last-applied-configuration"), hostileText),
      hostileText,
      { maxKeys: 2 }
    ),
    resourceVersion: parameterValue,
    finalizers: fc.array(hostileText, { maxLength: 2 })
  }, { requiredKeys: [] })
  const mostly = (right: string, ...wrong: ReadonlyArray<string>) =>
    fc.oneof({ weight: 8, arbitrary: fc.constant(right) }, { weight: 1, arbitrary: fc.constantFrom(...wrong) })
  return fc.record({
    apiVersion: mostly(`${group}/${info.version}`, "v1", "x"),
    kind: mostly(info.kind, "Job", "Namespace"),
    metadata,
    spec
  }, { requiredKeys: ["spec"] }) as fc.Arbitrary<Json>
}

const jsonPatch: fc.Arbitrary<Json> = fc.array(
  fc.record({
    op: fc.constantFrom("add", "remove", "replace", "move", "copy", "test", "x"),
    path: fc.constantFrom(
      "",
      "/",
      "/spec",
      "/spec/image",
      "/metadata/labels/a",
      "/metadata/name",
      "/status",
      "/spec/-",
      "/~2",
      "/a/0/b"
    ),
    from: fc.constantFrom("", "/spec", "/metadata", "/x"),
    value: jsonValue(fc.string({ maxLength: 4 }))
  }, { requiredKeys: ["op", "path"] }),
  { maxLength: 3 }
)

const deep = (depth: number): string => `${"{\"a\":".repeat(depth)}1${"}".repeat(depth)}`

/** Bodies: mostly objects of `info` (when given), else patches, any JSON, known poison, and text that is not JSON. */
const bodyOf = (info: KindInfo | undefined): fc.Arbitrary<string | undefined> =>
  fc.oneof(
    { weight: 2, arbitrary: fc.constant(undefined) },
    {
      weight: 8,
      arbitrary: (info === undefined ? fc.constantFrom(...kinds).chain(cleanObjectOf) : cleanObjectOf(info)).map((
        value
      ) => JSON.stringify(value))
    },
    {
      weight: 6,
      arbitrary: (info === undefined ? fc.constantFrom(...kinds).chain(objectOf) : objectOf(info)).map((value) =>
        JSON.stringify(value)
      )
    },
    { weight: 2, arbitrary: jsonPatch.map((value) => JSON.stringify(value)) },
    { weight: 2, arbitrary: jsonValue(hostileText).map((value) => JSON.stringify(value)) },
    {
      weight: 2,
      arbitrary: fc.constantFrom(
        deep(10_000),
        `{"spec":${deep(200)}}`,
        "[".repeat(5_000),
        "{\"spec\":{\"parallelism\":1e300}}",
        "{\"spec\":{\"parallelism\":-0}}",
        "{\"metadata\":{\"name\":\"x\\u0000\"}}",
        "{\"spec\":{\"image\":\"\\ud800\"}}",
        "{\"spec\":{\"expirationSeconds\":1e300}}",
        "{\"spec\":{\"expirationSeconds\":9000000000000}}",
        "{\"metadata\":{\"name\":\"big\"},\"spec\":{\"completions\":18446744073709551616}}",
        "null",
        "true",
        "\"x\"",
        "[]",
        "{",
        "key: [unclosed",
        "--- !!binary AAAA",
        "{\"__proto__\":{\"polluted\":true}}",
        "{\"constructor\":{\"prototype\":{}}}"
      )
    },
    { weight: 1, arbitrary: fc.string({ maxLength: 40 }) }
  )

/** A method, path and body that agree on a kind, mostly; or a path of no kind with any method and body. */
const targetArbitrary = (
  context: FuzzContext
): fc.Arbitrary<{ readonly method: string; readonly path: string; readonly body: string | undefined }> =>
  fc.oneof(
    {
      weight: 4,
      arbitrary: fc.constantFrom(...kinds).chain((info) =>
        fc.tuple(kindTarget(context, info), bodyOf(info)).map(([target, body]) => ({ ...target, body }))
      )
    },
    { weight: 1, arbitrary: fc.record({ method: methodArbitrary, path: otherPath(context), body: bodyOf(undefined) }) }
  )

/**
 * Well-formed writes by the admin in the fuzz project — creates of valid objects, merge patches and deletes of the
 * objects they made — so that the fuzz also drives the deep paths (estimates, billing holds, secrets, idempotency).
 */
const wellFormedArbitrary = (context: FuzzContext): fc.Arbitrary<FuzzRequest> => {
  const writable = kinds.filter((info) => info.scope === "Namespaced" && info.operations.has("create"))
  return fc.constantFrom(...writable).chain((info) => {
    const collection = `/apis/${group}/${info.version}/namespaces/${context.project}/${info.plural}`
    const item = fc.constantFrom("fuzz-a", "fuzz-b", "fuzz-c").map((name) => `${collection}/${name}`)
    const headers = (contentType: string) => ({
      authorization: `Bearer ${context.adminToken}`,
      "content-type": contentType
    })
    return fc.oneof(
      {
        weight: 4,
        arbitrary: fc.tuple(cleanObjectOf(info), fc.constantFrom("", "?dryRun=All", "?fieldValidation=Strict")).map((
          [object, query]
        ): FuzzRequest => ({
          method: "POST",
          path: `${collection}${query}`,
          headers: headers("application/json"),
          body: JSON.stringify(object)
        }))
      },
      {
        weight: 2,
        arbitrary: fc.tuple(item, info.hasSpec ? specOf(info) : fc.constant({})).map(([path, spec]): FuzzRequest => ({
          method: "PATCH",
          path,
          headers: headers("application/merge-patch+json"),
          body: JSON.stringify({ spec })
        }))
      },
      {
        weight: 1,
        arbitrary: fc.tuple(item, jsonPatch).map(([path, patch]): FuzzRequest => ({
          method: "PATCH",
          path,
          headers: headers("application/json-patch+json"),
          body: JSON.stringify(patch)
        }))
      },
      {
        weight: 1,
        arbitrary: item.map((path): FuzzRequest => ({
          method: "DELETE",
          path,
          headers: headers("application/json"),
          body: undefined
        }))
      }
    )
  })
}

export const requestArbitrary = (context: FuzzContext): fc.Arbitrary<FuzzRequest> =>
  fc.oneof({ weight: 3, arbitrary: hostileRequestArbitrary(context) }, {
    weight: 1,
    arbitrary: wellFormedArbitrary(context)
  })

/** Requests of any shape: every part drawn from the hostile arbitraries above. */
const hostileRequestArbitrary = (context: FuzzContext): fc.Arbitrary<FuzzRequest> =>
  targetArbitrary(context)
    .chain((target) =>
      fc.record({
        target: fc.constant(target),
        query: queryArbitrary,
        headers: headersArbitrary(context, target.method)
      })
    )
    .map(({ target: { method, path, body }, query, headers }) => ({
      method,
      path: `${path}${query}`,
      headers,
      // GET and HEAD carry no body (fetch refuses one).
      body: method === "GET" || method === "HEAD" ? undefined : body
    }))

/** Sends one admin request of the fuzz target's set-up; anything but the expected status throws. */
const setUp = async (baseUrl: string, token: string, path: string, body: Json, expected = 201): Promise<any> => {
  const response = await fetch(`${baseUrl}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify(body)
  })
  const text = await response.text()
  if (response.status !== expected) throw new Error(`set-up POST ${path} answered ${response.status}: ${text}`)
  return JSON.parse(text)
}

/** A project with a Job named `existing` and a project-bound key in it, for the fuzz to aim at. */
export const prepareTarget = async (baseUrl: string, adminToken: string, project: string): Promise<FuzzContext> => {
  await setUp(baseUrl, adminToken, "/api/v1/namespaces", {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: project }
  })
  const v1 = `/apis/${group}/v1/namespaces/${project}`
  await setUp(baseUrl, adminToken, `${v1}/jobs`, {
    apiVersion: `${group}/v1`,
    kind: "Job",
    metadata: { name: "existing" },
    spec: { image: "python:3.12" }
  })
  await setUp(baseUrl, adminToken, `${v1}/serviceaccounts`, {
    apiVersion: `${group}/v1`,
    kind: "ServiceAccount",
    metadata: { name: "fuzzer" },
    spec: { scopes: ["jobs:write", "secrets:read", "billing:read"] }
  })
  const issued = await setUp(baseUrl, adminToken, `${v1}/serviceaccounts/fuzzer/tokens`, {})
  return { project, adminToken, projectToken: issued.status.token }
}

export interface FuzzReply {
  readonly method: string
  readonly status: number
  readonly requestId: string | null
  readonly text: string
}

/** Sends one request; a 2xx body is not read (a watch streams), anything else is read whole. */
export const send = async (baseUrl: string, request: FuzzRequest, timeoutMs: number): Promise<FuzzReply> => {
  const response = await fetch(`${baseUrl}${request.path}`, {
    method: request.method,
    headers: request.headers,
    ...(request.body === undefined ? {} : { body: request.body }),
    signal: AbortSignal.timeout(timeoutMs)
  })
  const requestId = response.headers.get("x-request-id")
  if (response.status < 300) {
    await response.body?.cancel()
    return { method: request.method, status: response.status, requestId, text: "" }
  }
  return { method: request.method, status: response.status, requestId, text: await response.text() }
}

/** Whether fetch refused to send a request (some header values never reach a server): nothing to check then. */
export const unsendable = (error: Error): boolean =>
  /invalid header|header value/iu.test(`${error.message} ${String(error.cause)}`)

/** What is wrong with an answer, or undefined: no 5xx, and every error a Status body carrying its request id. */
export const replyProblem = (reply: FuzzReply, registeredCodes: ReadonlySet<string>): string | undefined => {
  if (reply.status >= 500) return `answered ${reply.status}: ${reply.text.slice(0, 300)}`
  // A HEAD answer has no body to check (RFC 9110 §9.3.2).
  if (reply.status < 400 || reply.method === "HEAD") return undefined
  let body: any
  try {
    body = JSON.parse(reply.text)
  } catch {
    return `error ${reply.status} without a JSON body: ${reply.text.slice(0, 200)}`
  }
  if (body?.kind !== "Status" || body.apiVersion !== "v1" || body.status !== "Failure") {
    return `error ${reply.status} is not a Status: ${reply.text.slice(0, 200)}`
  }
  if (body.code !== reply.status) return `Status code ${body.code} differs from HTTP ${reply.status}`
  if (!registeredCodes.has(body.reason)) return `reason ${body.reason} is not registered`
  if (typeof body.message !== "string" || body.message === "" || typeof body.fix !== "string" || body.fix === "") {
    return `Status without message or fix: ${reply.text.slice(0, 200)}`
  }
  if (reply.requestId === null || body.requestId !== reply.requestId) {
    return `requestId ${body.requestId} differs from x-request-id ${reply.requestId}`
  }
  return undefined
}
