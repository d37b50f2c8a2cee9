/**
 * The node agent protocol over HTTPS (docs/live.md, "The node agent"): `POST /agent/v1/enroll` with an
 * EnrollmentToken in the body; `POST /agent/v1/hello`, `/sync`, `/outputs` and `/inputs` with the agent's own key as
 * the bearer credential. They are not API requests (no API key reaches them, and an agent's key reaches nothing else),
 * so the HTTP layer hands them, body parsed, to whoever serves live hosts (server/LiveBackend.ts). Without live hosts
 * they are NotFound with the reason.
 */
import { Context, Effect, Layer, type Stream } from "effect"
import type { Json } from "../core/Json.ts"
import { ApiError } from "../core/meta/ApiError.ts"

/** The body an agent's request may have (its sync carries box replies: core/SandboxBox.ts). */
export { agentBodyBytesMax } from "../core/SandboxBox.ts"

/**
 * `box` and `run`: another server of the same database reaches a box on this server's host, or a run it took over
 * from this server and left running here (server/BoxForwarding.ts).
 */
export type AgentCall = "enroll" | "hello" | "sync" | "box" | "run"

export class NodeAgents extends Context.Service<NodeAgents, {
  /** One call: its JSON answer. `credential` is the bearer token of the request, if any. */
  readonly call: (call: AgentCall, body: unknown, credential: string | undefined) => Effect.Effect<Json, ApiError>
  /**
   * `POST /agent/v1/{outputs,checkpoints}?node=&epoch=&run=&name=`: an output's or a checkpoint's bytes as the body.
   */
  readonly upload: (
    kind: AgentUpload,
    query: URLSearchParams,
    body: Stream.Stream<Uint8Array, unknown>,
    credential: string | undefined
  ) => Effect.Effect<Json, ApiError>
  /**
   * `POST /agent/v1/{inputs,restores}?node=&epoch=&run=&name=`: an input's or a restore checkpoint's bytes, answered.
   */
  readonly download: (
    kind: AgentDownload,
    query: URLSearchParams,
    credential: string | undefined
  ) => Effect.Effect<Stream.Stream<Uint8Array>, ApiError>
}>()("nodus/runtime/NodeAgents") {
  static readonly layerNone = Layer.succeed(NodeAgents, {
    call: () => Effect.fail(noAgents()),
    upload: () => Effect.fail(noAgents()),
    download: () => Effect.fail(noAgents())
  })
}

export type AgentUpload = "outputs" | "checkpoints"
export type AgentDownload = "inputs" | "restores"

const noAgents = () =>
  new ApiError({
    code: "NotFound",
    message: "this server takes no node agents: it runs no live hosts (the simulator or --backend none)",
    fix: "Enroll hosts with a server started with --backend local (the default; docs/live.md)."
  })
