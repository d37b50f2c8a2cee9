/** The simulator held to the capacity contract, on deterministic models (no preemption, node loss or boot failure). */
import { Effect } from "effect"
import { Engine } from "../../../src/backends/sim/Engine.ts"
import { Prng } from "../../../src/backends/sim/Prng.ts"
import { SimCapacity } from "../../../src/backends/sim/SimCapacity.ts"
import * as SimPort from "../../../src/backends/sim/SimPort.ts"
import { simAnnotationPrefix } from "../../../src/backends/sim/Workloads.ts"
import { variant } from "../../core/Fixtures.ts"
import { capacityContract } from "../CapacityContract.ts"
import { deterministicModel } from "./DeterministicModel.ts"

capacityContract("simulator", () => {
  const engine = new Engine(Date.parse("2026-03-01T00:00:00Z"))
  const hosts = 3
  const capacity = new SimCapacity(engine, new Prng("contract"), () => deterministicModel(hosts))
  return Effect.map(SimPort.make(capacity), (port) => ({
    port,
    advance: (ms: number) => Effect.sync(() => engine.run(engine.now + ms)),
    variant: variant("a10-1x-us"),
    hosts,
    bootMs: 90_000,
    program: (workMs: number, exitCode: number) => ({
      annotations: {
        [`${simAnnotationPrefix}duration`]: `${workMs / 1000}s`,
        [`${simAnnotationPrefix}exit-code`]: `${exitCode}`
      }
    })
  }))
})
