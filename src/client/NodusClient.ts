/**
 * The nodus client with async methods, for code that does not use Effect: the same calls as the `Client` service
 * (Client.ts), each run to a Promise that rejects with the client error itself (`instanceof NotFoundError`,
 * `error.code`, `error.requestId`). `new NodusClient()` throws ConfigurationError at once, as the Python client's
 * constructor raises.
 */
import { Effect, Stream } from "effect"
import type { ClientShape, ExecOptions, ExecResult, LogOptions } from "./Client.ts"
import { fromConfig } from "./Client.ts"
import { type ClientOptions, resolveConfig } from "./Config.ts"
import type { FunctionCallHandle, MapOptions } from "./Functions.ts"
import type { CreateOptions, ListOptions, NodusObject } from "./ResourceCalls.ts"
import type { RequestOptions, Response } from "./Transport.ts"

const run = <A, E>(effect: Effect.Effect<A, E>): Promise<A> => Effect.runPromise(effect)

/** A FunctionCall, with async methods. */
export class FunctionCall {
  readonly handle: FunctionCallHandle
  constructor(handle: FunctionCallHandle) {
    this.handle = handle
  }
  get project() {
    return this.handle.project
  }
  get name() {
    return this.handle.name
  }
  object(): Promise<NodusObject> {
    return run(this.handle.object())
  }
  done(): Promise<boolean> {
    return run(this.handle.done())
  }
  cancel(): Promise<NodusObject> {
    return run(this.handle.cancel())
  }
  /** Waits until the call ends: its value; RemoteError if it failed; APITimeoutError past `timeout` seconds. */
  get(timeout?: number): Promise<unknown> {
    return run(this.handle.get(timeout))
  }
}

export class NodusClient {
  /** The Effect client underneath (the `Client` service's shape). */
  readonly effect: ClientShape

  constructor(options: ClientOptions = {}) {
    this.effect = fromConfig(Effect.runSync(resolveConfig(options)))
  }

  get config() {
    return this.effect.config
  }
  /** The kubeconfig context's namespace, if it names one. */
  get defaultProject() {
    return this.effect.defaultProject
  }

  request(method: string, path: string, options?: RequestOptions): Promise<Response> {
    return run(this.effect.request(method, path, options))
  }
  path(plural: string, project?: string, name?: string): string {
    return this.effect.path(plural, project, name)
  }
  create(plural: string, project: string, body: NodusObject, options?: CreateOptions): Promise<NodusObject> {
    return run(this.effect.create(plural, project, body, options))
  }
  get(plural: string, project: string | undefined, name: string): Promise<NodusObject> {
    return run(this.effect.get(plural, project, name))
  }
  list(plural: string, project?: string, options?: ListOptions): Promise<Array<NodusObject>> {
    return run(this.effect.list(plural, project, options))
  }
  delete(plural: string, project: string | undefined, name: string): Promise<NodusObject> {
    return run(this.effect.delete(plural, project, name))
  }
  patch(plural: string, project: string | undefined, name: string, patch: NodusObject): Promise<NodusObject> {
    return run(this.effect.patch(plural, project, name, patch))
  }
  uploadBlob(data: string | Uint8Array, project?: string): Promise<string> {
    return run(this.effect.uploadBlob(data, project))
  }
  readBlob(digest: string): Promise<Uint8Array> {
    return run(this.effect.readBlob(digest))
  }

  sandbox(project: string, name: string) {
    const sandbox = this.effect.sandbox(project, name)
    return {
      project,
      name,
      exec: (argv: ReadonlyArray<string>, options?: ExecOptions): Promise<ExecResult> =>
        run(sandbox.exec(argv, options)),
      readFile: (path: string): Promise<Uint8Array> => run(sandbox.readFile(path)),
      writeFile: (path: string, data: string | Uint8Array): Promise<void> => run(sandbox.writeFile(path, data)),
      deleteFile: (path: string): Promise<void> => run(sandbox.deleteFile(path))
    }
  }

  job(project: string, name: string) {
    const job = this.effect.job(project, name)
    return { project, name, logs: (options?: LogOptions): Promise<string> => run(job.logs(options)) }
  }

  function(project: string, name: string) {
    const fn = this.effect.function(project, name)
    return {
      project,
      name,
      /** Creates a FunctionCall and returns it at once. */
      spawn: async (args?: ReadonlyArray<unknown>, kwargs?: Readonly<Record<string, unknown>>) =>
        new FunctionCall(await run(fn.spawn(args, kwargs))),
      /** Calls the Function and waits for its value. */
      remote: (args?: ReadonlyArray<unknown>, kwargs?: Readonly<Record<string, unknown>>): Promise<unknown> =>
        run(fn.remote(args, kwargs)),
      /** One call per input; their results, in input order unless `orderOutputs: false`. */
      map: (inputs: Iterable<unknown>, options?: MapOptions): AsyncIterable<unknown> =>
        Stream.toAsyncIterable(fn.map(inputs, options))
    }
  }

  functionCall(project: string, name: string): FunctionCall {
    return new FunctionCall(this.effect.functionCall(project, name))
  }

  /** Closes the kept-alive connections. */
  close(): void {
    this.effect.close()
  }
}
