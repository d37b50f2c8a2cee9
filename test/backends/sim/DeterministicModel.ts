/** A provider model with nothing left to chance (no preemption, node loss or boot failure; fixed boot), for tests. */
import type { SimProviderModel } from "../../../src/backends/sim/SimCapacity.ts"

export const deterministicModel = (hosts: number): SimProviderModel => ({
  capacity: hosts,
  bootMedianMs: 90_000,
  bootSigma: 0,
  bootFailureRate: 0,
  preemptionMtbfMs: undefined,
  preemptionTrace: undefined,
  nodeLossMtbfMs: undefined,
  teardownMs: 30_000,
  warmStartMs: 5_000,
  restoreBytesPerSecond: 2 ** 30
})
