/**
 * What a live host runs for a Sandbox (spec: Sandbox command, args, env, secrets, workingDir, network, resources): the
 * port's `WorkloadProgram`, served until stopped. Its main process is optional — without one the box idles and is
 * driven by commands — and /workspace is what a snapshot saves (continuity Snapshotted).
 *
 * Secrets are named at the versions pinned for this start (status.secretVersions, which the machine pins again at each
 * start from the newest versions admission found: spec "each start pins the newest version or the version named, so a
 * new value reaches the Sandbox at its next start"); a version the spec names wins, and a Secret with no pin (an object
 * admitted without the runtime's admission) is resolved by the driver at its newest. Values are never here
 * (docs/secrets.md).
 */
import type { WorkloadProgram } from "../../core/capacity/Capacity.ts"
import * as Limits from "../../core/Limits.ts"
import { secretMountName } from "../../core/schemas/Shared.ts"
import { boxBoundsOf, egressOf, programEnvOf } from "../ProgramParts.ts"
import type { SandboxSpecType, SandboxStatusType } from "./SandboxSchema.ts"

type Pinned = SandboxStatusType["secretVersions"]

const programs = new WeakMap<SandboxSpecType, { readonly pinned: Pinned; readonly program: WorkloadProgram }>()

/** The program of a spec at the pinned versions (made once per spec and pins: a step makes one per launch). */
export const sandboxProgramOf = (spec: SandboxSpecType, pinned: Pinned): WorkloadProgram => {
  const known = programs.get(spec)
  if (known !== undefined && known.pinned === pinned) return known.program
  const program = programOf(spec, pinned)
  programs.set(spec, { pinned, program })
  return program
}

const programOf = (spec: SandboxSpecType, pinned: Pinned): WorkloadProgram => ({
  image: spec.image,
  argv: [...(spec.command ?? []), ...(spec.args ?? [])],
  workingDir: spec.workingDir,
  env: programEnvOf(spec.env),
  secrets: (spec.secrets ?? []).map((mount) => {
    const name = secretMountName(mount)
    return { name, version: (typeof mount === "string" ? undefined : mount.version) ?? pinned?.[name] }
  }),
  ...egressOf(spec.network),
  ...boxBoundsOf(spec.resources),
  init: undefined,
  checkpoint: { paths: [Limits.sandboxWorkspacePath], maxBytes: Limits.checkpointMaxSizeBytesMax },
  sandbox: true,
  ...(spec.continuity.mode === "Snapshotted" ? { keepWorkspace: true } : {})
})
