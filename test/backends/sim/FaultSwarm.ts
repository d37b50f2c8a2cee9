/**
 * The fault swarm's scenario generator: from a seed, a small scenario with random fault settings — preemption
 * storms, node loss during boot, failing boots and checkpoints, capacity droughts, customers who suspend and cancel —
 * and a workload mix that exercises every recovery mode. The same seed gives the same scenario.
 */
import { Prng } from "../../../src/backends/sim/Prng.ts"
import { decodeScenario, type Scenario } from "../../../src/backends/sim/Scenario.ts"

const fleet = [
  "h100-sxm-80gb-8x-us-0b7ff1d1",
  "a100-sxm-80gb-8x-us-b705404f",
  "v100-sxm-16gb-4x-us-99c937f7",
  "a10-24gb-1x-us-ea50a688",
  "cpu-4x-16gb-us-af7a8673"
]

export const swarmScenario = (seed: string): Scenario => {
  const random = new Prng(`swarm/${seed}`)
  const pick = <A>(items: ReadonlyArray<A>): A => random.pick(items)
  const window = () => ({ at: `${random.int(0, 10)}h`, for: `${random.int(10, 240)}m` })
  const workload = (name: string, job: Record<string, unknown>) => ({
    name,
    weight: random.int(1, 3),
    job,
    durationMedian: pick(["5m", "30m", "2h"]),
    durationSigma: pick([0, 0.5, 1]),
    failureRate: pick([0, 0.05, 0.3]),
    oomRate: pick([0, 0.02, 0.2]),
    checkpointSize: pick(["1Gi", "50Gi"]),
    checkpointFailureRate: pick([0, 0.2, 0.6]),
    suspendCheckpointFailureRate: pick([0, 0.4, 1])
  })
  const recovery = () => ({
    continuity: pick(["Checkpointed", "Restartable", "Ephemeral"]),
    maxAttempts: random.int(1, 6),
    minProgressDuration: pick(["1m", "10m"]),
    onInterruption: pick(["Resume", "Resume", "Fail"])
  })
  const placement = () => ({
    interruptible: pick(["Never", "Allow", "Prefer"]),
    profile: pick(["Balanced", "Cost", "Speed"]),
    queueTimeout: pick(["0s", "30m", "4h"])
  })
  const gpuJob = (type: string, count: number) => ({
    image: "ghcr.io/acme/train:1",
    completions: random.int(1, 6),
    parallelism: 1,
    backoffLimit: random.int(0, 3),
    resources: { gpu: { type: [type], count } },
    placement: placement(),
    recovery: recovery(),
    ...(random.chance(0.5) ? { timeout: pick(["1h", "6h"]) } : {}),
    ...(random.chance(0.5) ? { scaledownWindow: pick(["0s", "2m", "20m"]) } : {}),
    ...(random.chance(0.3) ? { ttlSecondsAfterFinished: random.int(0, 3600) } : {})
  })
  const withParallelism = (job: Record<string, unknown>) => ({
    ...job,
    parallelism: random.int(1, job["completions"] as number)
  })
  return decodeScenario({
    name: `swarm-${seed}`,
    seed,
    horizon: "12h",
    // Long enough for an overloaded fleet to drain the queue after arrivals stop (the liveness budget).
    drain: "4000h",
    fleet: { offerings: fleet, hostsPerVariant: random.int(1, 4) },
    providers: {
      default: {
        bootMedian: pick(["30s", "3m", "10m"]),
        bootFailureRate: pick([0, 0.1, 0.4]),
        nodeLossMtbf: pick(["30m", "6h", "2000h"]),
        teardown: pick(["10s", "2m"])
      },
      interruptible: { preemptionMtbf: pick(["10m", "1h", "12h"]) }
    },
    arrivals: { meanInterarrival: pick(["5m", "15m"]) },
    workloads: [
      workload("h100", withParallelism(gpuJob("H100", 8))),
      workload("v100", withParallelism(gpuJob("V100", 4))),
      workload("a10", withParallelism(gpuJob("A10", 1))),
      workload("cpu", {
        image: "python:3.12",
        completions: random.int(1, 8),
        parallelism: 1,
        resources: { cpu: "2" },
        placement: placement(),
        recovery: recovery()
      })
    ],
    faults: {
      preemptionStorms: random.chance(0.7) ? [{ ...window(), factor: pick([5, 20, 100]) }] : [],
      droughts: random.chance(0.7) ? [{ ...window(), capacityFactor: pick([0, 0.25, 0.5]) }] : [],
      suspendRate: pick([0, 0.1, 0.4]),
      suspendFor: pick(["10m", "2h"]),
      cancelRate: pick([0, 0.05, 0.2])
    }
  })
}
