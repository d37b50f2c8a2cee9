/**
 * Pipeline (spec: Areas — Run code; JobInput.fromStage {stage, output} "names an output of a Pipeline stage"): stages
 * of Jobs and TrainingJobs run in dependency order, a later stage consuming an earlier one's outputs through
 * JobInput.fromStage. The spec does not show its fields; this module decides a small schema (docs/kinds/Pipeline.md):
 * uniquely named stages, each a Job or TrainingJob spec with the stages it depends on, and the cross-field rules that
 * make the graph runnable (names exist, no cycles, fromStage names an upstream stage's output). A stage is a union
 * keyed by `kind` (as Sweep's template): a Job stage's spec is a JobSpec, a TrainingJob stage's spec a TrainingJobSpec,
 * each admitted with its kind's rules, and `normalize` folds their aliases and applies their dependent defaults, so a
 * stored stage spec is what the stage's object will hold. Stages are fixed at create.
 */
import { Schema } from "effect"
import { isArray, isObject, type JsonObject } from "../../core/Json.ts"
import * as Limits from "../../core/Limits.ts"
import { described, listOf, matching, oneOf, optional, uniqueBy } from "../../core/meta/Fields.ts"
import { fullOps, kindInfo } from "../../core/meta/Kinds.ts"
import type { KindDefinition, ServedKind } from "../../core/schemas/Kind.ts"
import { Condition, Cost, uniqueNames } from "../../core/schemas/Shared.ts"
import { JobSpec, normalizeJob } from "../job/JobSchema.ts"
import { normalizeTrainingJob, TrainingJobSpec } from "../trainingjob/TrainingJobSchema.ts"

/** Stage kinds (nodus; the kinds whose outputs a JobInput can consume, as a Sweep template's kind). */
export const pipelineStageKinds = ["Job", "TrainingJob"] as const

/** Pipeline phases (nodus). */
export const pipelinePhases = ["Pending", "Running", "Succeeded", "Failed"] as const

/** The output everything under /platform/outputs is collected as (spec: JobOutput). */
const implicitOutput = "outputs"

const StageName = matching(
  /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/u,
  "must be a lowercase RFC 1123 label: at most 63 lowercase alphanumerics or '-', starting and ending with an alphanumeric"
)

const stageName = described(StageName, "Unique within the Pipeline; the stage's object is named <pipeline>-<stage>.")

const dependsOn = optional(
  listOf(StageName, Limits.pipelineStagesMax).check(uniqueBy((stage: string) => stage, "dependsOn entries")),
  "Stages that must succeed before this one starts."
)

/**
 * A Job stage: its spec is a JobSpec, admitted with the Job's rules (and, by `normalize`, its aliases and defaults).
 */
export const PipelineJobStage = Schema.Struct({
  name: stageName,
  kind: described(Schema.Literal("Job"), "Job: the stage creates a Job."),
  spec: JobSpec,
  dependsOn
}).annotate({ identifier: "PipelineJobStage", description: "A stage that runs a Job; its spec is a JobSpec." })

/** A TrainingJob stage: its spec is a TrainingJobSpec, admitted with the TrainingJob's rules. */
export const PipelineTrainingJobStage = Schema.Struct({
  name: stageName,
  kind: described(Schema.Literal("TrainingJob"), "TrainingJob: the stage creates a TrainingJob."),
  spec: TrainingJobSpec,
  dependsOn
}).annotate({
  identifier: "PipelineTrainingJobStage",
  description: "A stage that runs a TrainingJob; its spec is a TrainingJobSpec."
})

/**
 * A stage: a union keyed by `kind`, as Sweep's template is. The stage spec is a plain nested struct, so its issues
 * are reported under `spec.stages[i].spec.…` and its unknown fields follow the caller's fieldValidation.
 */
const PipelineStage = Schema.Union([PipelineJobStage, PipelineTrainingJobStage]).annotate({
  message: `Unsupported value: kind: supported values: ${
    pipelineStageKinds.map((kind) => JSON.stringify(kind)).join(", ")
  }`
})

type Stage = typeof PipelineStage.Type

type Issue = { readonly path: ReadonlyArray<PropertyKey>; readonly issue: string }

const PipelineSpecFields = Schema.Struct({
  stages: described(
    listOf(PipelineStage, Limits.pipelineStagesMax)
      .check(Schema.makeFilter(
        (stages: ReadonlyArray<unknown>) =>
          stages.length > 0 ? undefined : "Required value: a Pipeline needs at least one stage",
        { toJsonSchema: () => ({ minItems: 1 }) }
      ))
      .check(uniqueNames("stage names")),
    `The stages, 1 to ${Limits.pipelineStagesMax}; names unique.`
  )
})

type PipelineSpecInput = typeof PipelineSpecFields.Type

/** Every stage `name` depends on, directly or not (a cycle-safe walk). */
const upstreamOf = (byName: ReadonlyMap<string, Stage>, name: string): ReadonlySet<string> => {
  const seen = new Set<string>()
  const pending = [...(byName.get(name)?.dependsOn ?? [])]
  while (pending.length > 0) {
    const next = pending.pop()!
    if (seen.has(next)) continue
    seen.add(next)
    pending.push(...(byName.get(next)?.dependsOn ?? []))
  }
  return seen
}

/** The first cycle through `start`, as stage names start → … → start, or undefined. */
const cycleFrom = (byName: ReadonlyMap<string, Stage>, start: string): ReadonlyArray<string> | undefined => {
  const visit = (
    name: string,
    path: ReadonlyArray<string>,
    visited: Set<string>
  ): ReadonlyArray<string> | undefined => {
    for (const next of byName.get(name)?.dependsOn ?? []) {
      if (next === start) return [...path, next]
      if (visited.has(next) || !byName.has(next)) continue
      visited.add(next)
      const found = visit(next, [...path, next], visited)
      if (found !== undefined) return found
    }
    return undefined
  }
  return visit(start, [start], new Set())
}

/** The outputs a Job stage declares (plus the implicit one), or undefined when the stage is not a Job. */
const outputsOf = (stage: Stage | undefined): ReadonlySet<string> | undefined =>
  stage?.kind === "Job"
    ? new Set([implicitOutput, ...(stage.spec.outputs ?? []).map((output) => output.name)])
    : undefined

// nodus: dependsOn names other stages of the Pipeline and never forms a cycle; a fromStage input names an upstream
// stage (one the stage depends on, directly or not) and, for a Job stage, one of its outputs.
const runnableGraph = Schema.makeFilter<PipelineSpecInput>(
  (spec) => {
    const byName = new Map(spec.stages.map((stage) => [stage.name, stage]))
    const issues: Array<Issue> = []
    spec.stages.forEach((stage, index) => {
      ;(stage.dependsOn ?? []).forEach((name, position) => {
        if (name === stage.name) {
          issues.push({
            path: ["stages", index, "dependsOn", position],
            issue: `Invalid value: "${name}": a stage cannot depend on itself`
          })
        } else if (!byName.has(name)) {
          issues.push({
            path: ["stages", index, "dependsOn", position],
            issue: `Invalid value: "${name}": must name a stage of the Pipeline`
          })
        }
      })
    })
    const reported = new Set<string>()
    spec.stages.forEach((stage, index) => {
      if (reported.has(stage.name)) return
      const cycle = cycleFrom(byName, stage.name)
      if (cycle === undefined || cycle.length < 3) return // a self-dependency is reported above
      cycle.forEach((name) => reported.add(name))
      issues.push({
        path: ["stages", index, "dependsOn"],
        issue: `Invalid value: ${cycle.join(" -> ")}: stages may not depend on each other in a cycle`
      })
    })
    spec.stages.forEach((stage, index) => {
      if (stage.kind !== "Job") return
      const upstream = upstreamOf(byName, stage.name)
      ;(stage.spec.inputs ?? []).forEach((input, position) => {
        if (input.fromStage === undefined) return
        const { stage: from, output } = input.fromStage
        const path = ["stages", index, "spec", "inputs", position, "fromStage"]
        if (!upstream.has(from) || from === stage.name) {
          issues.push({
            path: [...path, "stage"],
            issue: `Invalid value: "${from}": must name a stage this stage depends on (directly or through dependsOn)`
          })
          return
        }
        const outputs = outputsOf(byName.get(from))
        if (outputs !== undefined && !outputs.has(output)) {
          issues.push({
            path: [...path, "output"],
            issue: `Invalid value: "${output}": stage ${from} has no such output (it has ${[...outputs].join(", ")})`
          })
        }
      })
    })
    return issues
  },
  { toJsonSchema: () => [{}, true] }
)

export const PipelineSpec = PipelineSpecFields.check(runnableGraph).annotate({
  identifier: "PipelineSpec",
  description: "Stages of Jobs and TrainingJobs wired by their outputs."
})

const PipelineStageStatus = Schema.Struct({
  name: described(Schema.String, "The stage."),
  phase: optional(Schema.String, "The stage object's phase, or Waiting before it is created."),
  object: optional(Schema.String, "The created object's name."),
  startTime: optional(Schema.String, "When the stage's object was created."),
  completionTime: optional(Schema.String, "When it finished."),
  reason: optional(Schema.String, "Why it failed, or was not run (e.g. DependencyFailed).")
})

export const PipelineStatus = Schema.Struct({
  phase: optional(
    oneOf(pipelinePhases),
    "Pending, Running, Succeeded (every stage succeeded) or Failed (a stage failed)."
  ),
  stages: optional(Schema.Array(PipelineStageStatus), "Each stage's progress, in spec order."),
  startTime: optional(Schema.String, "When the first stage started."),
  completionTime: optional(Schema.String, "When the Pipeline finished."),
  cost: optional(Cost, "A display copy of the ledger: the stages' cost together."),
  conditions: optional(Schema.Array(Condition), "Conditions."),
  reason: optional(Schema.String, "Why it failed, e.g. StageFailed."),
  message: optional(Schema.String, "Details."),
  observedGeneration: optional(Schema.Int, "The spec generation this status reflects.")
}).annotate({ identifier: "PipelineStatus", description: "What the service observed of the Pipeline's stages." })

/**
 * Normalizes each stage's spec as its own kind normalizes it (aliases folded, dependent defaults applied), as Sweep
 * does.
 */
export const normalizePipeline = (spec: JsonObject): JsonObject => {
  const stages = spec["stages"]
  if (!isArray(stages)) return spec
  return {
    ...spec,
    stages: stages.map((stage) => {
      if (!isObject(stage) || !isObject(stage["spec"])) return stage
      const normalize = stage["kind"] === "Job"
        ? normalizeJob
        : stage["kind"] === "TrainingJob"
        ? normalizeTrainingJob
        : undefined
      return normalize === undefined ? stage : { ...stage, spec: normalize(stage["spec"]) }
    })
  }
}

export const pipeline: KindDefinition = {
  spec: PipelineSpec,
  status: PipelineStatus,
  normalize: normalizePipeline,
  // nodus: the stages are fixed at create; a changed graph is a new Pipeline.
  updates: { mutable: [] }
}

/**
 * How the API serves Pipeline (spec: Availability by kind) and its schema: its entry in the registry
 * (src/kinds/Kinds.ts).
 */
export const pipelineServed: ServedKind = {
  info: kindInfo({
    kind: "Pipeline",
    plural: "pipelines",
    shortNames: ["pl"],
    operations: fullOps,
    description: "Stages of Jobs wired by their outputs."
  }),
  definition: pipeline
}
