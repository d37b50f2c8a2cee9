/**
 * The Sandbox's registration with the runtime (spec: Sandbox): the machine of kinds/sandbox, its spec as admitted
 * by the Sandbox schema with the start request of its annotation folded in (spec: handledRequests, "the last acted-on
 * {api_group}/start-requested-at value"), and the Secret versions its next start pins (Admission.ts writes them), and
 * its estimate.
 */
import { Option, Schema } from "effect"
import { isObject } from "../../core/Json.ts"
import type { KindEntry, RuntimeKind } from "../Kind.ts"
import { sandboxEstimator } from "./SandboxEstimator.ts"
import { sandboxMachine, type SandboxMachineSpec, secretVersionsKey, startRequestKey } from "./SandboxMachine.ts"
import { sandboxServed, SandboxSpec, type SandboxStatusType } from "./SandboxSchema.ts"

const decode = Schema.decodeUnknownSync(SandboxSpec)
const decodePins = Schema.decodeUnknownOption(Schema.fromJsonString(Schema.Record(Schema.String, Schema.Int)))

/** The Secret versions admission pinned for the next start (its `secret-versions` annotation); none when unreadable. */
const pinsOf = (text: string | undefined): Readonly<Record<string, number>> | undefined =>
  text === undefined ? undefined : Option.getOrUndefined(decodePins(text))

export const sandboxKind: RuntimeKind<SandboxMachineSpec, SandboxStatusType> = {
  kind: "Sandbox",
  machine: sandboxMachine,
  specOf: (object, group) => {
    try {
      const spec = decode(isObject(object.spec) ? object.spec : {})
      const request = object.metadata.annotations?.[`${group}/${startRequestKey}`]
      const newest = pinsOf(object.metadata.annotations?.[`${group}/${secretVersionsKey}`])
      return {
        ...spec,
        ...(request === undefined ? {} : { startRequestedAt: request }),
        ...(newest === undefined ? {} : { newestSecretVersions: newest })
      }
    } catch {
      return undefined
    }
  },
  estimator: sandboxEstimator
}

/** The kind's entry in the registry (src/kinds/Kinds.ts): how it is served, and its machine. */
export const sandboxEntry: KindEntry = { ...sandboxServed, runtime: sandboxKind }
