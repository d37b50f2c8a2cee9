/**
 * The sampled part of estimates (docs/billing.md, "Estimates"): the simulated runs behind a Job estimate's cost bands
 * (kinds/job/JobSampling.ts), the part of an estimate that costs CPU. The runtime declares the service and the
 * Estimates service asks it; the composition root provides a RunSampler behind it: `WorkerSampler.layer` runs the
 * simulator's on a worker thread, off the event loop (src/server/Server.ts), and `layerFrom` runs any sampler on the
 * caller's thread (tests, benchmarks).
 */
import { Context, Data, Effect, Layer } from "effect"
import { type RunSampler, type SampledPart, sampledPartOf, type SampleRequest } from "../kinds/job/JobSampling.ts"

/** The sampled part could not be computed: the sampler threw, its worker crashed or stopped, or too many waited. */
export class EstimateSamplerError extends Data.TaggedError("EstimateSamplerError")<{
  readonly message: string
  readonly cause?: unknown
}> {}

export class EstimateSampler extends Context.Service<EstimateSampler, {
  /** The bands of the runs `request` names. Deterministic: the same request gives the same part. */
  readonly sample: (request: SampleRequest) => Effect.Effect<SampledPart, EstimateSamplerError>
}>()("nodus/runtime/EstimateSampler") {
  /** Samples with `sampler` on the calling fiber's thread. */
  static readonly layerFrom = (sampler: RunSampler) =>
    Layer.succeed(
      EstimateSampler,
      EstimateSampler.of({
        sample: (request) =>
          Effect.try({
            try: () => sampledPartOf(request, sampler),
            catch: (cause) => new EstimateSamplerError({ message: `sampling failed: ${String(cause)}`, cause })
          })
      })
    )
}
