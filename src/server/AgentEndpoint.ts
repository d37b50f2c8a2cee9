/**
 * The server end of the agent protocol over HTTPS (runtime/NodeAgents.ts; docs/live.md, "Enrolling a host"):
 * enrollment through runtime/Enrollment.ts, then hello and sync of an authenticated agent into the live driver, in the
 * scope of its Node (its project and Pool). An agent's messages are checked against the protocol's schemas, so a
 * broken or hostile host gets a 400 with the field, never a server error.
 */
import { Effect, Exit, Schema, Stream } from "effect"
import { timingSafeEqual } from "node:crypto"
import type { LiveCapacity, NodeScope } from "../backends/live/LiveCapacity.ts"
import {
  EnrollRequestSchema,
  type Hello,
  HelloSchema,
  type SyncRequest,
  SyncRequestSchema
} from "../backends/live/Protocol.ts"
import type { Json } from "../core/Json.ts"
import { ApiError, fieldInvalid, invalid } from "../core/meta/ApiError.ts"
import type { Enrollment } from "../runtime/Enrollment.ts"
import { type AgentCall, type AgentDownload, type AgentUpload, NodeAgents } from "../runtime/NodeAgents.ts"
import { factsJson, forwardedCallOf, peerRunCallOf } from "./BoxForwarding.ts"

const decode = <S extends Schema.Decoder<unknown>>(
  schema: S,
  body: unknown,
  what: string
): Effect.Effect<S["Type"], ApiError> => {
  const decoded = Schema.decodeUnknownExit(schema)(body)
  if (Exit.isSuccess(decoded)) return Effect.succeed(decoded.value)
  return Effect.fail(
    new ApiError({
      code: "BadRequest",
      message: `the ${what} message does not follow the agent protocol (docs/live.md)`
    })
  )
}

export interface AgentEndpointParts {
  readonly capacity: LiveCapacity
  readonly enrollment: Enrollment["Service"]
  /** The in-process agent's Node name, which no enrolled host may take. */
  readonly localNode: string
  /** The Pool of an enrolled Node (its object's spec.pool). */
  readonly poolOf: (namespace: string, node: string) => Effect.Effect<string, ApiError>
  /** The key another server of the database shows to reach this host's boxes (BoxForwarding.ts); none alone. */
  readonly peerKey: string | undefined
}

export const makeNodeAgents = (parts: AgentEndpointParts) => {
  const { capacity, enrollment } = parts

  /** The scope of the agent whose key this is; its messages must name its own Node. */
  const scopeOf = (credential: string | undefined, node: string) =>
    Effect.gen(function*() {
      if (credential === undefined) {
        return yield* new ApiError({
          code: "Unauthorized",
          message: "an agent call needs the agent's key as its bearer credential"
        })
      }
      const known = yield* enrollment.authenticate(credential)
      if (known.node !== node) {
        return yield* new ApiError({
          code: "Forbidden",
          message: `this agent's key belongs to Node "${known.node}", not "${node}"`
        })
      }
      return { pool: yield* parts.poolOf(known.namespace, known.node), namespace: known.namespace } satisfies NodeScope
    })

  /** Whether the credential is this process's peer key (compared in constant time). */
  const isPeer = (credential: string | undefined) => {
    if (parts.peerKey === undefined || credential === undefined) return false
    const given = Buffer.from(credential)
    const key = Buffer.from(parts.peerKey)
    return given.length === key.length && timingSafeEqual(given, key)
  }

  const call = (name: AgentCall, body: unknown, credential: string | undefined): Effect.Effect<Json, ApiError> => {
    switch (name) {
      case "enroll":
        return Effect.gen(function*() {
          const request = yield* decode(EnrollRequestSchema, body, "enroll")
          if (request.node === parts.localNode) {
            return yield* invalid({ kind: "Node", name: request.node }, [
              fieldInvalid(
                "node",
                `Invalid value: "${request.node}": the name of this server's own Node; choose another with --name`
              )
            ], "Node")
          }
          return (yield* enrollment.enroll(request)) as unknown as Json
        })
      case "hello":
        return Effect.gen(function*() {
          const hello = (yield* decode(HelloSchema, body, "hello")) as Hello
          const scope = yield* scopeOf(credential, hello.node)
          return capacity.hello(hello, scope) as unknown as Json
        })
      case "run":
        return Effect.gen(function*() {
          if (!isPeer(credential)) {
            return yield* new ApiError({
              code: "Unauthorized",
              message: "a peer's call needs the peer key of this server"
            })
          }
          const asked = peerRunCallOf(body as Json)
          if (asked === undefined) {
            return yield* new ApiError({
              code: "BadRequest",
              message: "a peer's run call names its op, owner and attempt"
            })
          }
          if (asked.op === "release") yield* capacity.port.release(asked.owner, asked.attempt, 0)
          if (asked.op === "checkpoint") yield* capacity.port.checkpoint(asked.owner, asked.attempt, asked.episode ?? 0)
          return factsJson(capacity.peerFacts(asked.owner, asked.attempt))
        })
      case "box":
        return Effect.gen(function*() {
          if (!isPeer(credential)) {
            return yield* new ApiError({
              code: "Unauthorized",
              message: "a forwarded box call needs the peer key of this server"
            })
          }
          const forwarded = forwardedCallOf(body as Json)
          if (forwarded === undefined) {
            return yield* new ApiError({
              code: "BadRequest",
              message: "a forwarded box call names its owner, attempt and request"
            })
          }
          // This host's own box only: a call is forwarded once, never on.
          return (yield* capacity.port.box!(forwarded.owner, forwarded.attempt, forwarded.request)) as unknown as Json
        })
      case "sync":
        return Effect.gen(function*() {
          const request = (yield* decode(SyncRequestSchema, body, "sync")) as SyncRequest
          const scope = yield* scopeOf(credential, request.node)
          return (yield* Effect.promise(() => capacity.sync(request, scope))) as unknown as Json
        })
    }
  }

  /** The run and name an output upload or an input download is for, from its query. */
  const targetOf = (query: URLSearchParams) => {
    const target = {
      node: query.get("node") ?? "",
      epoch: Number(query.get("epoch")),
      run: query.get("run") ?? "",
      name: query.get("name") ?? ""
    }
    return target.node === "" || !Number.isSafeInteger(target.epoch) || !target.run.includes("/") || target.name === ""
      ? Effect.fail(
        new ApiError({
          code: "BadRequest",
          message: "an agent's transfer names its node, epoch, run and name in the query (docs/live.md)"
        })
      )
      : Effect.succeed(target)
  }

  /** An input's or a restore checkpoint's bytes, for the agent's run under its current lease. */
  const download = (kind: AgentDownload, query: URLSearchParams, credential: string | undefined) =>
    Effect.gen(function*() {
      const target = yield* targetOf(query)
      const scope = yield* scopeOf(credential, target.node)
      const bytes = kind === "inputs"
        ? capacity.getInput(target, scope)
        : yield* Effect.promise(() => capacity.getCheckpoint(target, scope))
      if (bytes === undefined) {
        return yield* new ApiError({
          code: "NotFound",
          message: `the server holds no ${
            kind === "inputs" ? `input ${target.name}` : "checkpoint to restore"
          } of ${target.run} under epoch ${target.epoch}`
        })
      }
      return Stream.fromAsyncIterable(bytes, (error) => error).pipe(Stream.catchCause(() => Stream.empty))
    })

  /** An output's or a checkpoint's bytes, for the agent's run under its current lease. */
  const upload = (
    kind: AgentUpload,
    query: URLSearchParams,
    body: Stream.Stream<Uint8Array, unknown>,
    credential: string | undefined
  ): Effect.Effect<Json, ApiError> =>
    Effect.gen(function*() {
      const target = yield* targetOf(query)
      const scope = yield* scopeOf(credential, target.node)
      const bytes = Stream.toAsyncIterable(body)
      const taken = yield* Effect.tryPromise({
        try: async (): Promise<Json | undefined> =>
          kind === "outputs"
            ? ((await capacity.putOutput(target, scope, bytes)) ? { stored: target.name } : undefined)
            : await capacity.putCheckpoint(target, scope, bytes),
        // The store's own answer (FileTooLarge past the bound, Unavailable while the store is) goes back as it is.
        catch: (error) =>
          error instanceof ApiError
            ? error
            : new ApiError({ code: "FileTooLarge", message: error instanceof Error ? error.message : String(error) })
      })
      if (taken === undefined) {
        return yield* new ApiError({
          code: "Conflict",
          message: `the server no longer takes ${kind} of ${target.run} under epoch ${target.epoch}`
        })
      }
      return taken
    })

  return NodeAgents.of({ call, upload, download })
}
