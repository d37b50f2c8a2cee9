/**
 * What a host runs for one worker of a Function (spec: Function code, python, env, secrets, network, resources,
 * initCommand, workingDir, scaling.targetConcurrency): the port's `WorkloadProgram` with its `worker` set — the Python
 * worker that imports `code.module` once and serves calls (docs/functions.md, "The worker") — and the code archive as
 * its input `code`. Secret values are not here, only their names (docs/secrets.md); the driver resolves them at start.
 */
import type { WorkloadProgram } from "../../core/capacity/Capacity.ts"
import { fnv1a32 } from "../../core/Hash.ts"
import * as Limits from "../../core/Limits.ts"
import { secretMountName } from "../../core/schemas/Shared.ts"
import { durationMs } from "../../core/StatusText.ts"
import { boxBoundsOf, egressOf, programEnvOf } from "../ProgramParts.ts"
import type { FunctionSpecType } from "./FunctionSchema.ts"

/** The input name a worker's code archive is materialized as (/platform/inputs/code). */
export const codeInput = "code"

const programs = new WeakMap<FunctionSpecType, WorkloadProgram>()
const templates = new WeakMap<FunctionSpecType, string>()

/** The program of every worker of a spec (made once per spec). */
export const functionProgramOf = (spec: FunctionSpecType): WorkloadProgram => {
  let program = programs.get(spec)
  if (program === undefined) programs.set(spec, program = programOf(spec))
  return program
}

const programOf = (spec: FunctionSpecType): WorkloadProgram => ({
  image: spec.image ?? spec.imageRef,
  // The worker is the program: spec.command and args are not run on a worker (docs/kinds/Function.md).
  argv: [],
  workingDir: spec.workingDir,
  env: programEnvOf(spec.env),
  secrets: (spec.secrets ?? []).map((mount) => ({
    name: secretMountName(mount),
    version: typeof mount === "string" ? undefined : mount.version
  })),
  ...egressOf(spec.network),
  ...boxBoundsOf(spec.resources),
  init: spec.initCommand === undefined
    ? undefined
    : {
      argv: spec.initCommand.command,
      timeoutMs: durationMs(spec.initCommand.timeout, Limits.initCommandTimeoutMsMax)
    },
  inputs: spec.code.blob === undefined ? [] : [{ name: codeInput, blob: spec.code.blob }],
  worker: {
    python: spec.python,
    module: spec.code.module,
    qualname: spec.code.qualname,
    cls: spec.code.cls?.name,
    concurrency: spec.scaling.targetConcurrency,
    codeInput: spec.code.blob === undefined ? undefined : codeInput
  }
})

/**
 * What makes workers of two specs different (spec: Function — "a change to code, image or resources rolls workers"):
 * everything a worker runs with. Scaling, retries, timeout, state and the cost cap are read by the control plane only
 * and roll nothing, except targetConcurrency, which the worker runs its calls with.
 */
export const workerTemplateOf = (spec: FunctionSpecType): string => {
  // Made once per spec: a Function is stepped at every call's end, and its spec object stays the same between changes.
  let template = templates.get(spec)
  if (template === undefined) templates.set(spec, template = templateOf(spec))
  return template
}

const templateOf = (spec: FunctionSpecType): string =>
  fnv1a32(JSON.stringify([
    spec.code,
    spec.python,
    spec.image,
    spec.imageRef,
    spec.resources,
    spec.env,
    spec.secrets,
    spec.network,
    spec.initCommand,
    spec.workingDir,
    spec.volumes,
    spec.connections,
    spec.placement,
    spec.scaling.targetConcurrency
  ]))
