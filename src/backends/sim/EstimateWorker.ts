/**
 * The worker thread behind the server's estimates (src/runtime/WorkerSampler.ts; docs/billing.md, "Estimates"): it
 * answers each `{ id, request }` with the sampled part of that estimate, computed with the simulator's RunSampler
 * (RunSampler.ts), one request at a time in arrival order. A sampler that throws answers `{ id, error }` and the worker
 * goes on; anything else that goes wrong ends the worker, and the server starts another.
 *
 * Node 24 runs this file as TypeScript (type stripping), like the rest of the server.
 */
import { parentPort } from "node:worker_threads"
import { sampledPartOf, type SampleMessage, type SampleReply } from "../../kinds/job/JobSampling.ts"
import { simRunSampler } from "./RunSampler.ts"

if (parentPort === null) {
  throw new Error("EstimateWorker.ts runs as a worker thread (src/runtime/WorkerSampler.ts starts it)")
}
const port = parentPort

const answer = ({ id, request }: SampleMessage): SampleReply => {
  try {
    return { id, part: sampledPartOf(request, simRunSampler) }
  } catch (error) {
    return { id, error: `sampling failed: ${error instanceof Error ? error.message : String(error)}` }
  }
}

port.on("message", (message: SampleMessage) => port.postMessage(answer(message)))
