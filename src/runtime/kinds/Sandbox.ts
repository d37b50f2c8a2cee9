/**
 * The Sandbox's registration with the runtime (spec: Sandbox): the machine of core/kinds/sandbox, its spec as admitted
 * by the Sandbox schema with the start request of its annotation folded in (spec: handledRequests, "the last acted-on
 * {api_group}/start-requested-at value"), and its estimate.
 */
import { Schema } from "effect"
import { isObject } from "../../core/Json.ts"
import { type SandboxMachineSpec, sandboxMachine, startRequestKey } from "../../core/kinds/sandbox/SandboxMachine.ts"
import { SandboxSpec, type SandboxStatusType } from "../../core/schemas/Sandbox.ts"
import type { RuntimeKind } from "./RuntimeKind.ts"
import { sandboxEstimator } from "./SandboxEstimate.ts"

const decode = Schema.decodeUnknownSync(SandboxSpec)

export const sandboxKind: RuntimeKind<SandboxMachineSpec, SandboxStatusType> = {
  kind: "Sandbox",
  machine: sandboxMachine,
  specOf: (object, group) => {
    try {
      const spec = decode(isObject(object.spec) ? object.spec : {})
      const request = object.metadata.annotations?.[`${group}/${startRequestKey}`]
      return request === undefined ? spec : { ...spec, startRequestedAt: request }
    } catch {
      return undefined
    }
  },
  estimator: sandboxEstimator
}
