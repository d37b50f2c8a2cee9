/**
 * Which schema module defines each kind: one module per kind (docs/kinds.md lists them). A kind not listed here would
 * be admitted permissively (any JSON object as spec); every kind the API serves has its own.
 */
import { type KindDefinition, permissive } from "../core/schemas/Kind.ts"
import { agent } from "./agent/AgentSchema.ts"
import { agentGroup } from "./agentgroup/AgentGroupSchema.ts"
import { agentRun } from "./agentrun/AgentRunSchema.ts"
import { app } from "./app/AppSchema.ts"
import { attempt } from "./attempt/AttemptSchema.ts"
import { budget } from "./budget/BudgetSchema.ts"
import { cloudAccount } from "./cloudaccount/CloudAccountSchema.ts"
import { connection } from "./connection/ConnectionSchema.ts"
import { creditGrant } from "./creditgrant/CreditGrantSchema.ts"
import { enrollmentToken } from "./enrollmenttoken/EnrollmentTokenSchema.ts"
import { environment } from "./environment/EnvironmentSchema.ts"
import { functionCall } from "./function/FunctionCallSchema.ts"
import { functionKind } from "./function/FunctionSchema.ts"
import { image } from "./image/ImageSchema.ts"
import { inferenceEndpoint } from "./inferenceendpoint/InferenceEndpointSchema.ts"
import { job } from "./job/JobSchema.ts"
import { marketplaceContract } from "./marketplacecontract/MarketplaceContractSchema.ts"
import { marketplaceEntry } from "./marketplaceentry/MarketplaceEntrySchema.ts"
import { model } from "./model/ModelSchema.ts"
import { node } from "./node/NodeSchema.ts"
import { offering } from "./offering/OfferingSchema.ts"
import { pipeline } from "./pipeline/PipelineSchema.ts"
import { pool } from "./pool/PoolSchema.ts"
import { poolAction } from "./poolaction/PoolActionSchema.ts"
import { reservedHost } from "./reservedhost/ReservedHostSchema.ts"
import { sandbox } from "./sandbox/SandboxSchema.ts"
import { secret } from "./secret/SecretSchema.ts"
import { serviceAccount } from "./serviceaccount/ServiceAccountSchema.ts"
import { sweep } from "./sweep/SweepSchema.ts"
import { topUp } from "./topup/TopUpSchema.ts"
import { trainingJob } from "./trainingjob/TrainingJobSchema.ts"
import { trainingRuntime } from "./trainingruntime/TrainingRuntimeSchema.ts"
import { volume } from "./volume/VolumeSchema.ts"
import { webhookEndpoint } from "./webhookendpoint/WebhookEndpointSchema.ts"
import { workspace } from "./workspace/WorkspaceSchema.ts"

const definitions: Readonly<Record<string, KindDefinition>> = {
  Agent: agent,
  AgentGroup: agentGroup,
  AgentRun: agentRun,
  App: app,
  Attempt: attempt,
  Budget: budget,
  CloudAccount: cloudAccount,
  Connection: connection,
  CreditGrant: creditGrant,
  EnrollmentToken: enrollmentToken,
  Environment: environment,
  Function: functionKind,
  FunctionCall: functionCall,
  Image: image,
  InferenceEndpoint: inferenceEndpoint,
  Job: job,
  MarketplaceContract: marketplaceContract,
  MarketplaceEntry: marketplaceEntry,
  Model: model,
  Node: node,
  Offering: offering,
  Pipeline: pipeline,
  Pool: pool,
  PoolAction: poolAction,
  ReservedHost: reservedHost,
  Sandbox: sandbox,
  Secret: secret,
  ServiceAccount: serviceAccount,
  Sweep: sweep,
  TopUp: topUp,
  TrainingJob: trainingJob,
  TrainingRuntime: trainingRuntime,
  Volume: volume,
  WebhookEndpoint: webhookEndpoint,
  Workspace: workspace
}

/** The definition of the kind named `kind` (as objects carry it). */
export const definitionOf = (kind: string): KindDefinition => definitions[kind] ?? permissive

/** Whether a kind has its own schema (not the permissive stand-in). */
export const isDefined = (kind: string): boolean => Object.hasOwn(definitions, kind)
