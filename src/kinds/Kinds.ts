/**
 * The registry of every kind nodus serves: one line per kind, in the spec's order ("Availability by kind"). Each entry
 * is written in the kind's own folder (src/kinds/<kind>/): its row (names, scope, version, operations, columns), its
 * schema and, for a kind with a machine, what the runtime runs (src/kinds/Kind.ts). Discovery, routing, scope checks,
 * admission, OpenAPI, Table output and the reconciler all read this list; a new kind is its folder plus one line here.
 */
import type { KindInfo, ResourceRef, Version } from "../core/meta/Kinds.ts"
import { coreKinds, eventKind, eventRef, namespaceKind, namespaceRef, refOf } from "../core/meta/Kinds.ts"
import { type KindDefinition, permissive } from "../core/schemas/Kind.ts"
import { agentServed } from "./agent/AgentSchema.ts"
import { agentGroupServed } from "./agentgroup/AgentGroupSchema.ts"
import { agentRunServed } from "./agentrun/AgentRunSchema.ts"
import { appServed } from "./app/AppSchema.ts"
import { attemptServed } from "./attempt/AttemptSchema.ts"
import { budgetServed } from "./budget/BudgetSchema.ts"
import { cloudAccountServed } from "./cloudaccount/CloudAccountSchema.ts"
import { connectionServed } from "./connection/ConnectionSchema.ts"
import { creditGrantServed } from "./creditgrant/CreditGrantSchema.ts"
import { enrollmentTokenServed } from "./enrollmenttoken/EnrollmentTokenSchema.ts"
import { environmentServed } from "./environment/EnvironmentSchema.ts"
import { functionCallServed } from "./function/FunctionCallSchema.ts"
import { functionEntry } from "./function/FunctionKind.ts"
import { imageServed } from "./image/ImageSchema.ts"
import { inferenceEndpointServed } from "./inferenceendpoint/InferenceEndpointSchema.ts"
import { jobEntry } from "./job/JobKind.ts"
import type { AnyRuntimeKind, KindEntry } from "./Kind.ts"
import { marketplaceContractServed } from "./marketplacecontract/MarketplaceContractSchema.ts"
import { marketplaceEntryServed } from "./marketplaceentry/MarketplaceEntrySchema.ts"
import { modelServed } from "./model/ModelSchema.ts"
import { nodeServed } from "./node/NodeSchema.ts"
import { offeringServed } from "./offering/OfferingSchema.ts"
import { pipelineServed } from "./pipeline/PipelineSchema.ts"
import { poolServed } from "./pool/PoolSchema.ts"
import { poolActionServed } from "./poolaction/PoolActionSchema.ts"
import { reservedHostServed } from "./reservedhost/ReservedHostSchema.ts"
import { sandboxEntry } from "./sandbox/SandboxKind.ts"
import { secretServed } from "./secret/SecretSchema.ts"
import { serviceAccountServed } from "./serviceaccount/ServiceAccountSchema.ts"
import { sweepServed } from "./sweep/SweepSchema.ts"
import { topUpServed } from "./topup/TopUpSchema.ts"
import { trainingJobServed } from "./trainingjob/TrainingJobSchema.ts"
import { trainingRuntimeServed } from "./trainingruntime/TrainingRuntimeSchema.ts"
import { volumeServed } from "./volume/VolumeSchema.ts"
import { webhookEndpointServed } from "./webhookendpoint/WebhookEndpointSchema.ts"
import { workspaceServed } from "./workspace/WorkspaceSchema.ts"

/** Every served kind, in the spec's order. */
export const registered: ReadonlyArray<KindEntry> = [
  agentGroupServed,
  agentRunServed,
  agentServed,
  appServed,
  connectionServed,
  environmentServed,
  functionCallServed,
  functionEntry,
  imageServed,
  inferenceEndpointServed,
  jobEntry,
  sandboxEntry,
  workspaceServed,
  sweepServed,
  poolServed,
  attemptServed,
  enrollmentTokenServed,
  budgetServed,
  cloudAccountServed,
  marketplaceEntryServed,
  webhookEndpointServed,
  creditGrantServed,
  marketplaceContractServed,
  trainingJobServed,
  trainingRuntimeServed,
  secretServed,
  serviceAccountServed,
  volumeServed,
  pipelineServed,
  modelServed,
  poolActionServed,
  nodeServed,
  offeringServed,
  topUpServed,
  reservedHostServed
]

/** The kinds with a machine, which the reconciler runs (in the registry's order). */
export const runtimeKinds: ReadonlyArray<AnyRuntimeKind> = registered.flatMap((entry) =>
  entry.runtime === undefined ? [] : [entry.runtime]
)

/** Every kind, in the spec's order. */
export const kinds: ReadonlyArray<KindInfo> = registered.map((entry) => entry.info)

const byPlural = new Map(kinds.map((info) => [info.plural, info]))
const byKind = new Map([...kinds, ...coreKinds].map((info) => [info.kind, info]))

/** The kind served under `plural` in `version`, if any. */
export const byResource = (version: string, plural: string): KindInfo | undefined => {
  const info = byPlural.get(plural)
  return info !== undefined && info.version === version ? info : undefined
}

/** The kind with this plural in any version (the store keys objects by plural). */
export const byPluralName = (plural: string): KindInfo | undefined => byPlural.get(plural)

/** The kind named `kind` (as objects carry it), the core group's Namespace and Event included. */
export const byKindName = (kind: string): KindInfo | undefined => byKind.get(kind)

export const kindsIn = (version: Version): ReadonlyArray<KindInfo> => kinds.filter((info) => info.version === version)

/** The ref of the nodus kind named `kind` (a registered kind: an unknown name is a bug). */
export const refOfKind = (group: string, kind: string): ResourceRef => {
  const info = byKind.get(kind)
  if (info === undefined) throw new Error(`unknown kind ${kind}`)
  return refOf(group, info)
}

/** The ref an object of `kind` is stored under (`group` for nodus kinds), if the kind is served. */
export const refOfObjectKind = (group: string, kind: string): ResourceRef | undefined => {
  if (kind === namespaceKind.kind) return namespaceRef
  if (kind === eventKind.kind) return eventRef
  const info = byKind.get(kind)
  return info === undefined ? undefined : refOf(group, info)
}

const definitions = new Map(registered.map((entry) => [entry.info.kind, entry.definition]))

/**
 * The definition of the kind named `kind` (as objects carry it); a kind without its own schema is admitted
 * permissively.
 */
export const definitionOf = (kind: string): KindDefinition => definitions.get(kind) ?? permissive

/** Whether a kind has its own schema (not the permissive stand-in). */
export const isDefined = (kind: string): boolean => definitions.has(kind)
