/**
 * What a live host runs for a Sandbox (spec: Sandbox command, args, env, secrets, workingDir, network, resources): the
 * port's `WorkloadProgram`, served until stopped. Its main process is optional — without one the box idles and is
 * driven by commands — and /workspace is what a snapshot saves (continuity Snapshotted).
 *
 * Secrets name a version only where the spec pins one: otherwise the driver resolves the newest when the box starts
 * (spec: "each start pins the newest version or the version named, so a new value reaches the Sandbox at its next
 * start"). Values are never here (docs/secrets.md).
 */
import type { WorkloadProgram } from "../../capacity/Capacity.ts"
import * as Limits from "../../Limits.ts"
import type { SandboxSpecType } from "../../schemas/Sandbox.ts"
import { secretMountName } from "../../schemas/Shared.ts"
import { egressOf, memoryBytesOf, programEnvOf } from "../ProgramParts.ts"

const programs = new WeakMap<SandboxSpecType, WorkloadProgram>()

/** The program of a spec (made once per spec: a step makes one per launch). */
export const sandboxProgramOf = (spec: SandboxSpecType): WorkloadProgram => {
  let program = programs.get(spec)
  if (program === undefined) programs.set(spec, program = programOf(spec))
  return program
}

const programOf = (spec: SandboxSpecType): WorkloadProgram => ({
  image: spec.image,
  argv: [...(spec.command ?? []), ...(spec.args ?? [])],
  workingDir: spec.workingDir,
  env: programEnvOf(spec.env),
  secrets: (spec.secrets ?? []).map((mount) => ({ name: secretMountName(mount), version: typeof mount === "string" ? undefined : mount.version })),
  ...egressOf(spec.network),
  memoryBytes: memoryBytesOf(spec.resources),
  init: undefined,
  checkpoint: { paths: [Limits.sandboxWorkspacePath], maxBytes: Limits.checkpointMaxSizeBytesMax },
  sandbox: true
})
