/**
 * Agent (spec: "Other kinds"; Areas "Models and agents"): what an AgentRun executes — "a durable conversation of an
 * Agent revision in its own Sandbox". The spec does not show the Agent's fields, so this module is a SMALL schema built
 * from the facts it states elsewhere: AgentRuns name an Agent in the project or a template in the shared catalog
 * project (AgentRun.spec.agent, AgentGroup.spec.agent) and pin its revision at admission (AgentRun.status.revision);
 * each turn's model is chosen once per turn and routed by jev, by fallback or fixed (AgentRun.status.turns[].routedBy);
 * AgentRun.parallelism is a ceiling "within the Agent's cap"; group admission counts "per-run caps"; and the error
 * code AgentStopped exists. Every other choice is nodus's own and is marked so in docs/kinds/Agent.md.
 *
 * Every spec field may change after create (no `updates`): each change other than `state` makes a new revision, and a
 * run keeps the revision it pinned at admission.
 */
import { Schema } from "effect"
import * as Limits from "../../core/Limits.ts"
import {
  defaulted,
  intAtLeast,
  intBetween,
  listOf,
  matching,
  nonEmpty,
  oneOf,
  optional,
  quantity,
  uniqueBy,
  usd
} from "../../core/meta/Fields.ts"
import { fullOps, kindInfo } from "../../core/meta/Kinds.ts"
import { dns1123SubdomainFormat, dns1123SubdomainMaxLength, utf8Length } from "../../core/meta/Names.ts"
import type { KindDefinition, ServedKind } from "../../core/schemas/Kind.ts"
import { Condition, EnvVar, ImageStatus, Network, uniqueNames } from "../../core/schemas/Shared.ts"

/** Agent states a caller writes to `spec.state` (nodus: the spec names the code AgentStopped, so an Agent can stop). */
export const agentStates = ["Running", "Stopped"] as const

/**
 * The project that holds the shared catalog's Agent templates, as platform/<name>@<version> names catalog Environments.
 */
export const catalogProject = "platform"

/**
 * An Agent as AgentRun.spec.agent and AgentGroup.spec.agent name it (spec: "an Agent in the project or a template in
 * the shared catalog project"): `<name>`, or `platform/<name>` for a catalog template (nodus's spelling). Names are
 * object names: lowercase RFC 1123 subdomains of at most 253 characters.
 */
export const AgentReference = matching(
  new RegExp(`^(${catalogProject}/)?${dns1123SubdomainFormat}$`, "u"),
  `must be an Agent name (a lowercase RFC 1123 subdomain) or ${catalogProject}/<name> for a catalog template`
).check(Schema.makeFilter(
  (reference: string) => {
    const name = reference.startsWith(`${catalogProject}/`) ? reference.slice(catalogProject.length + 1) : reference
    return utf8Length(name) > dns1123SubdomainMaxLength
      ? `Invalid value: "${reference}": the name must be no more than ${dns1123SubdomainMaxLength} characters`
      : undefined
  },
  { toJsonSchema: () => ({ maxLength: catalogProject.length + 1 + dns1123SubdomainMaxLength }) }
))

// nodus: routing of each turn's model. The spec fixes the three outcomes a turn records (routedBy jev | fallback |
// fixed) and that the model is chosen once per turn; these fields are how an Agent asks for them.
const AgentModelFields = Schema.Struct({
  fixed: optional(
    nonEmpty,
    "A model every turn uses (turns record routedBy fixed); without it the router (jev) chooses per turn."
  ),
  allow: optional(
    listOf(nonEmpty, Limits.agentAllowedModelsMax).check(uniqueBy((model: string) => model, "models")),
    "Models the router may choose from; empty = any it serves (routed Agents only)."
  ),
  fallback: optional(
    nonEmpty,
    "The model a turn uses when the router cannot choose (turns record routedBy fallback and a fallbackReason; routed Agents only)."
  )
})

type AgentModelInput = typeof AgentModelFields.Type

// A fixed model leaves nothing to route: the router's choices and its fallback are meaningless beside it.
const routingOnlyWithoutFixed = Schema.makeFilter<AgentModelInput>(
  (model) =>
    model.fixed === undefined
      ? undefined
      : (["allow", "fallback"] as const)
        .filter((field) => model[field] !== undefined)
        .map((field) => ({
          path: [field],
          issue: `Forbidden: may only be set when the model is routed (without fixed)`
        })),
  { toJsonSchema: () => [{}, true] }
)

const AgentModel = AgentModelFields.check(routingOnlyWithoutFixed)

// nodus: the Sandbox every run of the Agent gets ("in its own Sandbox"); a Sandbox is an isolated CPU container, so
// only CPU resources, and the Sandbox's own bound on env (spec: Sandbox; Limits).
const AgentSandbox = Schema.Struct({
  image: optional(
    nonEmpty,
    "Image of the run's Sandbox, pinned to a digest when a run is admitted; absent: the platform's default tools image."
  ),
  resources: optional(
    Schema.Struct({
      cpu: optional(quantity(), "vCPU floor."),
      memory: optional(quantity(), "Memory floor."),
      disk: optional(quantity(), "Ephemeral disk floor.")
    }),
    "Resource floors of the run's Sandbox."
  ),
  env: optional(
    listOf(EnvVar, Limits.sandboxEnvMax).check(uniqueNames("env names")),
    "Environment of the run's Sandbox (at most 256; secrets through valueFrom.secretKeyRef; PLATFORM_ reserved)."
  ),
  network: optional(Network, "Network policy of the run's Sandbox.")
})

const instructions = Schema.String.check(Schema.makeFilter(
  (text: string) => {
    const bytes = utf8Length(text)
    return bytes > Limits.agentInstructionsBytesMax
      ? `Invalid value: ${bytes} bytes: must be at most 256 KiB`
      : undefined
  },
  { toJsonSchema: () => ({ maxLength: Limits.agentInstructionsBytesMax }) }
))

export const AgentSpec = Schema.Struct({
  description: optional(Schema.String, "What the Agent is for, for people."),
  instructions: optional(instructions, "The system prompt every turn starts from (at most 256 KiB)."),
  model: optional(AgentModel, "How each turn's model is chosen (once per turn)."),
  tools: optional(
    listOf(nonEmpty, Limits.agentToolsMax).check(uniqueBy((tool: string) => tool, "tool names")),
    "Names of the tools the Agent may call; absent: the runtime's default tools."
  ),
  maxParallelism: optional(
    intBetween(1, Limits.agentRunParallelismMax),
    "The cap on team sizing: an AgentRun's parallelism is a ceiling within it; 1 to 32, absent: 32."
  ),
  maxRunCostUSD: optional(
    usd,
    "The cap on model usage of one AgentRun (the per-run cap an AgentGroup counts); a run that reaches it waits for funds (MaxCostReached)."
  ),
  sandbox: optional(AgentSandbox, "The Sandbox each AgentRun of the Agent runs in (deleted when the run ends)."),
  state: defaulted(
    oneOf(agentStates),
    "Running",
    "Running, or Stopped: new AgentRuns and further turns are refused with AgentStopped."
  )
}).annotate({
  identifier: "AgentSpec",
  description: "What an Agent does and where its runs execute (nodus's own fields; docs/kinds/Agent.md)."
})

export const AgentStatus = Schema.Struct({
  revision: optional(
    intAtLeast(1),
    "Grows on every change of the spec other than state; AgentRuns pin it at admission."
  ),
  observedGeneration: optional(Schema.Int, "The spec generation this status reflects."),
  conditions: optional(Schema.Array(Condition), "Ready is one (False when the Sandbox image cannot be resolved)."),
  image: optional(ImageStatus, "The Sandbox image of the current revision, resolved."),
  message: optional(Schema.String, "Details for people.")
}).annotate({ identifier: "AgentStatus", description: "What the service observed of the Agent." })

export const agent: KindDefinition = {
  spec: AgentSpec,
  status: AgentStatus
}

/**
 * How the API serves Agent (spec: Availability by kind) and its schema: its entry in the registry (src/kinds/Kinds.ts).
 */
export const agentServed: ServedKind = {
  info: kindInfo({
    kind: "Agent",
    plural: "agents",
    shortNames: ["ag"],
    operations: fullOps,
    description: "An agent definition whose revisions AgentRuns execute."
  }),
  definition: agent
}
