/**
 * The client's generic calls on the resource API, which every kind's handle is built on (Client.ts builds them over
 * the transport; Functions.ts builds a Function's calls on them): any route, the generic operations of every kind,
 * and blobs.
 */
import type { Effect } from "effect"
import type { ClientConfig } from "./Config.ts"
import type { ClientError } from "./Errors.ts"
import type { RequestOptions, Response, StreamedResponse } from "./Transport.ts"

/** An API object as the server answers it (apiVersion, kind, metadata, spec, status). */
export type NodusObject = Record<string, any>

export interface CreateOptions {
  /** `dryRun=All`: admitted and answered, not stored. */
  readonly dryRun?: boolean
  /**
   * The submission key; by default a UUID made when `create` is called (so re-running its Effect resends the same
   * submission).
   */
  readonly idempotencyKey?: string
}

export interface ListOptions {
  readonly labelSelector?: string
  readonly fieldSelector?: string
  /** Page size (default 500); every page is read. */
  readonly limit?: number
}

export interface ResourceCalls {
  readonly config: ClientConfig
  /** The kubeconfig context's namespace, if it names one. */
  readonly defaultProject: string | undefined
  /** Any route, with the client's retries and errors: the 2xx answer. */
  readonly request: (method: string, path: string, options?: RequestOptions) => Effect.Effect<Response, ClientError>
  /** The same, its 2xx answer's body read as it arrives (a watch); `timeoutMs` also bounds each silence of the body. */
  readonly stream: (
    method: string,
    path: string,
    options?: RequestOptions
  ) => Effect.Effect<StreamedResponse, ClientError>
  /** `/apis/<group>/v1[/namespaces/<project>]/<plural>[/<name>]` */
  readonly path: (plural: string, project?: string, name?: string) => string
  /** POST with an Idempotency-Key kept across its retries; `apiVersion` filled in when missing; the created object. */
  readonly create: (
    plural: string,
    project: string,
    body: NodusObject,
    options?: CreateOptions
  ) => Effect.Effect<NodusObject, ClientError>
  readonly get: (plural: string, project: string | undefined, name: string) => Effect.Effect<NodusObject, ClientError>
  /** Every item, following `continue` pages (no project: every project, or a cluster-scoped kind). */
  readonly list: (
    plural: string,
    project?: string,
    options?: ListOptions
  ) => Effect.Effect<Array<NodusObject>, ClientError>
  readonly delete: (
    plural: string,
    project: string | undefined,
    name: string
  ) => Effect.Effect<NodusObject, ClientError>
  /** A JSON merge patch (RFC 7386). */
  readonly patch: (
    plural: string,
    project: string | undefined,
    name: string,
    patch: NodusObject
  ) => Effect.Effect<NodusObject, ClientError>
  /** Stores bytes in /blobs/v1 (docs/blobs.md), their reference "sha256:<hex>". */
  readonly uploadBlob: (data: string | Uint8Array, project?: string) => Effect.Effect<string, ClientError>
  readonly readBlob: (digest: string) => Effect.Effect<Uint8Array, ClientError>
}
