/**
 * Secret (spec: Other kinds — "a Secret is addressed by name and version"; SecretMount {name, version}; EnvVar
 * valueFrom.secretKeyRef; Conventions 6): named key-value data that workloads read as env vars and files. Its values
 * are write-only through the API: a write of `spec.data` creates a new version, and reads show keys and versions,
 * never values (the server strips `data` and stores the values elsewhere). This module decides what a write may carry —
 * the key grammar, a size bound, the type — and the shape of the versions the service reports.
 */
import { Schema } from "effect"
import * as Limits from "../../core/Limits.ts"
import { defaulted, described, intAtLeast, mapOf, oneOf, optional } from "../../core/meta/Fields.ts"
import { fullOps, kindInfo } from "../../core/meta/Kinds.ts"
import { utf8Length } from "../../core/meta/Names.ts"
import type { KindDefinition, ServedKind } from "../../core/schemas/Kind.ts"
import { Condition } from "../../core/schemas/Shared.ts"

/** Secret types (nodus): Opaque data, or registry credentials for imagePullSecrets in the .dockerconfigjson key. */
export const secretTypes = ["Opaque", "DockerConfigJson"] as const

/** The key a DockerConfigJson Secret keeps its registry credentials under (Kubernetes' name). */
export const dockerConfigJsonKey = ".dockerconfigjson"

const secretKey = /^[-._a-zA-Z0-9]+$/u

/** Why `key` is not a Secret key (Kubernetes' IsConfigMapKey), or undefined. */
const secretKeyProblem = (key: string): string | undefined => {
  if (key.length > Limits.secretKeyLengthMax) return `must be no more than ${Limits.secretKeyLengthMax} characters`
  if (!secretKey.test(key)) {
    return "a valid secret key must consist of alphanumeric characters, '-', '_' or '.' (regex ^[-._a-zA-Z0-9]+$)"
  }
  return key === "." || key === ".." ? "must not be '.' or '..'" : undefined
}

const SecretData = mapOf(Schema.String, secretKeyProblem, {
  pattern: secretKey.source,
  maxLength: Limits.secretKeyLengthMax
}).check(
  Schema.makeFilter(
    (data: Readonly<Record<string, string>>) => {
      const bytes = Object.entries(data).reduce((total, [key, value]) => total + utf8Length(key) + utf8Length(value), 0)
      return bytes <= Limits.secretDataBytesMax
        ? undefined
        : `Too long: ${bytes} bytes: the data of a Secret may not be more than ${Limits.secretDataBytesMax} bytes`
    },
    { toJsonSchema: () => [{}, true] }
  )
)

const SecretSpecFields = Schema.Struct({
  data: optional(
    SecretData,
    "Key to value; write-only: a write creates a new version, and reads never return values (see status.versions)."
  ),
  type: defaulted(
    oneOf(secretTypes),
    "Opaque",
    "Opaque, or DockerConfigJson (registry credentials in the .dockerconfigjson key, for imagePullSecrets)."
  )
})

// nodus: a DockerConfigJson Secret carries one key, .dockerconfigjson, holding a JSON object (Kubernetes' rule).
const dockerConfigJsonShape = Schema.makeFilter<typeof SecretSpecFields.Type>(
  (spec) => {
    if (spec.type !== "DockerConfigJson" || spec.data === undefined) return undefined
    const value = spec.data[dockerConfigJsonKey]
    if (value === undefined) {
      return {
        path: ["data"],
        issue: `Required value: a DockerConfigJson Secret must have the key ${dockerConfigJsonKey}`
      }
    }
    let parsed: unknown
    try {
      parsed = JSON.parse(value)
    } catch {
      parsed = undefined
    }
    return parsed !== null && typeof parsed === "object" && !Array.isArray(parsed)
      ? undefined
      : { path: ["data", dockerConfigJsonKey], issue: "Invalid value: must be a JSON object (a Docker config.json)" }
  },
  { toJsonSchema: () => [{}, true] }
)

export const SecretSpec = SecretSpecFields.check(dockerConfigJsonShape)
  .annotate({ identifier: "SecretSpec", description: "Named, versioned secret data (spec: Other kinds, SecretMount)." })

const SecretVersion = Schema.Struct({
  version: described(intAtLeast(1), "The version number, from 1; what SecretMount.version names."),
  keys: described(Schema.Array(Schema.String), "The keys of this version (never the values)."),
  createdTime: optional(Schema.String, "When the version was written."),
  id: optional(Schema.String, "The version's id (what a workload's status.secretVersionIDs pins).")
})

export const SecretStatus = Schema.Struct({
  latestVersion: optional(
    intAtLeast(0),
    "The newest version (0 before data was first written); what a SecretMount without version pins at admission."
  ),
  versions: optional(Schema.Array(SecretVersion), "Versions kept, oldest first: keys and versions, never values."),
  conditions: optional(Schema.Array(Condition), "Conditions."),
  observedGeneration: optional(Schema.Int, "The spec generation this status reflects.")
}).annotate({ identifier: "SecretStatus", description: "The Secret's versions: keys, never values." })

export const secret: KindDefinition = {
  spec: SecretSpec,
  status: SecretStatus,
  // nodus: the type is fixed at create (as in Kubernetes); data may be written again, each write a new version.
  updates: { immutable: ["type"] }
}

/**
 * How the API serves Secret (spec: Availability by kind) and its schema: its entry in the registry
 * (src/kinds/Kinds.ts).
 */
// "listed as project kinds with the full operation set including all-projects list".
export const secretServed: ServedKind = {
  info: kindInfo({
    kind: "Secret",
    plural: "secrets",
    operations: fullOps,
    description: "Named, versioned secret values."
  }),
  definition: secret
}
