/**
 * Which schema module defines each kind: one module per kind (docs/kinds.md lists them). A kind not listed here would
 * be admitted permissively (any JSON object as spec); every kind the API serves has its own.
 */
import { agent } from "./Agent.ts"
import { agentGroup } from "./AgentGroup.ts"
import { agentRun } from "./AgentRun.ts"
import { app } from "./App.ts"
import { attempt } from "./Attempt.ts"
import { budget } from "./Budget.ts"
import { cloudAccount } from "./CloudAccount.ts"
import { connection } from "./Connection.ts"
import { creditGrant } from "./CreditGrant.ts"
import { enrollmentToken } from "./EnrollmentToken.ts"
import { environment } from "./Environment.ts"
import { functionKind } from "./Function.ts"
import { functionCall } from "./FunctionCall.ts"
import { image } from "./Image.ts"
import { inferenceEndpoint } from "./InferenceEndpoint.ts"
import { job } from "./Job.ts"
import { type KindDefinition, permissive } from "./Kind.ts"
import { marketplaceContract } from "./MarketplaceContract.ts"
import { marketplaceEntry } from "./MarketplaceEntry.ts"
import { model } from "./Model.ts"
import { node } from "./Node.ts"
import { offering } from "./Offering.ts"
import { pipeline } from "./Pipeline.ts"
import { pool } from "./Pool.ts"
import { poolAction } from "./PoolAction.ts"
import { reservedHost } from "./ReservedHost.ts"
import { sandbox } from "./Sandbox.ts"
import { secret } from "./Secret.ts"
import { serviceAccount } from "./ServiceAccount.ts"
import { sweep } from "./Sweep.ts"
import { topUp } from "./TopUp.ts"
import { trainingJob } from "./TrainingJob.ts"
import { trainingRuntime } from "./TrainingRuntime.ts"
import { volume } from "./Volume.ts"
import { webhookEndpoint } from "./WebhookEndpoint.ts"
import { workspace } from "./Workspace.ts"

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
