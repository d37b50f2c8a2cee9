/**
 * What a live host runs for an index of a Job (spec: Job command, args, env, secrets, workingDir, network,
 * initCommand, resources.memory): the port's `WorkloadProgram`. Secret values are not here, only where to find them:
 * the driver resolves them when the program starts (docs/secrets.md), so no status, event or log ever holds them.
 */
import type { ProgramInput, WorkloadProgram } from "../../core/capacity/Capacity.ts"
import * as Limits from "../../core/Limits.ts"
import { secretMountName } from "../../core/schemas/Shared.ts"
import { durationMs } from "../../core/StatusText.ts"
import { parseQuantity } from "../../core/Units.ts"
import { boxBoundsOf, egressOf, programEnvOf } from "../ProgramParts.ts"
import type { JobSpecType, JobStatusType } from "./JobSchema.ts"

/**
 * The program of every launch of a spec is the same (its secret versions are pinned at admission), and the simulator
 * launches millions: it is made once per spec.
 */
const programs = new WeakMap<
  JobSpecType,
  { readonly pinned: JobStatusType["secretVersions"]; readonly program: WorkloadProgram }
>()

export const jobProgramOf = (spec: JobSpecType, status: JobStatusType): WorkloadProgram => {
  const known = programs.get(spec)
  if (known !== undefined && known.pinned === status.secretVersions) return known.program
  const program = programOf(spec, status)
  programs.set(spec, { pinned: status.secretVersions, program })
  return program
}

const programOf = (spec: JobSpecType, status: JobStatusType): WorkloadProgram => {
  const pinned = status.secretVersions ?? {}
  return {
    image: spec.image ?? spec.imageRef,
    argv: [...(spec.command ?? []), ...(spec.args ?? [])],
    workingDir: spec.workingDir,
    env: programEnvOf(spec.env),
    secrets: (spec.secrets ?? []).map((mount) => {
      const name = secretMountName(mount)
      return { name, version: pinned[name] }
    }),
    ...egressOf(spec.network),
    ...boxBoundsOf(spec.resources),
    init: spec.initCommand === undefined
      ? undefined
      : {
        argv: spec.initCommand.command,
        timeoutMs: durationMs(spec.initCommand.timeout, Limits.initCommandTimeoutMsMax)
      },
    outputs: (spec.outputs ?? []).map((output) => ({ name: output.name, path: output.path })),
    inputs: [...(spec.inputs ?? []).map(inputOf), ...(spec.volumes ?? []).map(mountOf)],
    checkpoint: {
      paths: spec.recovery.checkpoint.paths ?? [Limits.checkpointPathDefault],
      maxBytes: parseQuantity(spec.recovery.checkpoint.maxSize ?? "1Ti") ?? Limits.checkpointMaxSizeBytesMax
    }
  }
}

/**
 * A Volume mount, as an input the driver materializes at its path. Its name, `volumes[<i>]`, is the mount's field
 * path: no input name can take it (input names are letters, digits and underscores).
 */
const mountOf = (mount: NonNullable<JobSpecType["volumes"]>[number], index: number): ProgramInput => ({
  name: `volumes[${index}]`,
  volume: { name: mount.volume, revision: mount.revision },
  mount: { path: mount.mountPath, writable: mount.readOnly !== true }
})

/** One input, in the form a driver takes it (its other forms are named, for the driver to refuse with the reason). */
const inputOf = (input: NonNullable<JobSpecType["inputs"]>[number]): ProgramInput => {
  if (input.url !== undefined) return { name: input.name, url: input.url.url, sha256: input.url.sha256 }
  if (input.output !== undefined) {
    return { name: input.name, output: { job: input.output.job, name: input.output.name, index: input.output.index } }
  }
  if (input.volume !== undefined) {
    return { name: input.name, volume: { name: input.volume.name, revision: input.volume.revision } }
  }
  const form = input.bucket !== undefined ? "bucket" : input.fromWorkspace !== undefined ? "fromWorkspace" : "fromStage"
  return { name: input.name, unsupported: form }
}
