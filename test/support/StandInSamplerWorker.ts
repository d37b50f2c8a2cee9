/**
 * A stand-in worker entry for the tests of src/runtime/WorkerSampler.ts: it answers each request with a part that
 * names the request's seed, after `delay-<ms>` seeds wait that long, and it crashes on purpose for the seeds `throw`
 * (an error thrown outside any request) and `exit` (the thread exits). Node runs it as TypeScript, like the real one
 * (src/backends/sim/EstimateWorker.ts).
 */
import { parentPort } from "node:worker_threads"
import type { SampleMessage, SampleReply } from "../../src/kinds/job/JobSampling.ts"

if (parentPort === null) throw new Error("StandInSamplerWorker.ts runs as a worker thread")
const port = parentPort

const answer = ({ id, request }: SampleMessage): SampleReply => ({
  id,
  part: {
    costUSD: { p50: "1", p90: "2" },
    overheadUSD: { p50: "0", p90: "0" },
    cold: { p50: request.seed, p90: request.seed }
  }
})

port.on("message", (message: SampleMessage) => {
  const seed = message.request.seed
  if (seed === "throw") {
    setImmediate(() => {
      throw new Error("the stand-in crashed")
    })
  } else if (seed === "exit") process.exit(3)
  else if (seed.startsWith("delay-")) {
    setTimeout(() => port.postMessage(answer(message)), Number(seed.slice("delay-".length)))
  } else port.postMessage(answer(message))
})
