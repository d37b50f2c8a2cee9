/**
 * Workload models: how a simulated program behaves. A scenario draws them from its workload mix; an object created
 * through the API may pin them with annotations (docs/simulator.md):
 *
 * | annotation | meaning | default |
 * |-|-|-|
 * | sim.nodus.dev/duration | run time of the work, e.g. 10m | 5m |
 * | sim.nodus.dev/exit-code | exit code when the work is done | 0 |
 * | sim.nodus.dev/oom | "true": the run is OOM-killed | false |
 * | sim.nodus.dev/checkpoint-size | bytes per checkpoint, e.g. 10Gi | 1Gi |
 * | sim.nodus.dev/checkpoint-failure-rate | probability a periodic checkpoint fails | 0 |
 * | sim.nodus.dev/suspend-checkpoint-failure-rate | probability a suspend checkpoint fails | 0 |
 */
import { durationMs } from "../../core/StatusText.ts"
import { parseQuantity } from "../../core/Units.ts"
import type { Prng } from "./Prng.ts"
import type { WorkloadSettings } from "./Scenario.ts"
import type { WorkloadModel } from "./SimCapacity.ts"

export const simAnnotationPrefix = "sim.nodus.dev/"

export const defaultWorkload: WorkloadModel = {
  durationMs: 5 * 60_000,
  exitCode: 0,
  runFailureRate: 0,
  oomRate: 0,
  checkpointSizeBytes: 2 ** 30,
  checkpointFailureRate: 0,
  suspendCheckpointFailureRate: 0
}

/** A serving program (a Sandbox's box): no end of its own, never OOM-killed; it runs until it is stopped. */
export const serviceWorkload: WorkloadModel = { ...defaultWorkload, durationMs: Number.POSITIVE_INFINITY, oomRate: 0 }

const rate = (text: string | undefined, fallback: number): number => {
  if (text === undefined) return fallback
  const value = Number(text)
  return Number.isFinite(value) && value >= 0 && value <= 1 ? value : fallback
}

/** The model an object's `sim.nodus.dev/*` annotations pin; unknown or malformed values keep the default. */
export const workloadFromAnnotations = (
  annotations: Readonly<Record<string, string>> | undefined,
  base: WorkloadModel = defaultWorkload
): WorkloadModel => {
  const read = (name: string) => annotations?.[simAnnotationPrefix + name]
  const duration = read("duration")
  const exitCode = read("exit-code")
  const size = read("checkpoint-size")
  return {
    durationMs: durationMs(duration, base.durationMs),
    exitCode: exitCode !== undefined && /^[0-9]{1,3}$/u.test(exitCode) ? Number(exitCode) : base.exitCode,
    runFailureRate: base.runFailureRate,
    oomRate: read("oom") === "true" ? 1 : base.oomRate,
    checkpointSizeBytes: (size === undefined ? undefined : parseQuantity(size)) ?? base.checkpointSizeBytes,
    checkpointFailureRate: rate(read("checkpoint-failure-rate"), base.checkpointFailureRate),
    suspendCheckpointFailureRate: rate(read("suspend-checkpoint-failure-rate"), base.suspendCheckpointFailureRate)
  }
}

/** A workload's checkpoint size in bytes, read once per size text (a Job is drawn at every arrival). */
const checkpointSizes = new Map<string, number>()

const checkpointSizeOf = (text: string): number => {
  let bytes = checkpointSizes.get(text)
  if (bytes === undefined) {
    if (checkpointSizes.size >= 256) checkpointSizes.clear()
    checkpointSizes.set(text, bytes = parseQuantity(text) ?? defaultWorkload.checkpointSizeBytes)
  }
  return bytes
}

/** One program's model drawn from a scenario's workload settings. */
export const drawWorkload = (settings: WorkloadSettings, random: Prng): WorkloadModel => {
  const median = durationMs(settings.durationMedian, defaultWorkload.durationMs)
  const workMs = settings.durationSigma > 0
    ? Math.max(1000, Math.round(random.logNormal(median, settings.durationSigma)))
    : median
  return {
    durationMs: workMs,
    exitCode: 0,
    runFailureRate: settings.failureRate,
    oomRate: settings.oomRate,
    checkpointSizeBytes: checkpointSizeOf(settings.checkpointSize),
    checkpointFailureRate: settings.checkpointFailureRate,
    suspendCheckpointFailureRate: settings.suspendCheckpointFailureRate
  }
}
