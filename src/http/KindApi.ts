/**
 * What a kind adds to the generic HTTP layer (docs/architecture.md, "Adding a kind"): its subresources with their
 * handlers and OpenAPI operations, the hooks of its creates and writes, and its operator operations. A kind's
 * registration lives in its folder (`src/kinds/<kind>/http/`); `src/kinds/Registry.ts` lists them all, and the
 * server's composition hands them to the HTTP layer as `KindApis`, so that the generic code names no kind.
 */
import { Context, Effect, Layer } from "effect"
import type { HttpServerRequest, HttpServerResponse } from "effect/http"
import type { Access, Principal } from "../apiserver/Auth.ts"
import type { WriteOptions } from "../apiserver/Resources.ts"
import type { ApiError } from "../core/meta/ApiError.ts"
import type { ResourceRef } from "../core/meta/Kinds.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import type { CreateHooks } from "../runtime/Credits.ts"
import type { KindOperations } from "./openapi/Operations.ts"
import type { ItemSubresources } from "./Routes.ts"

type Request = HttpServerRequest.HttpServerRequest
type Response = HttpServerResponse.HttpServerResponse

/** Where a request to a subresource goes: the object's path below its kind. */
export interface SubresourceRoute {
  readonly name: string | undefined
  readonly subresource: string
  /** The one segment below a subresource that has items. */
  readonly item: string | undefined
  /** What is done to an item. */
  readonly action: string | undefined
}

/** A request to a subresource, authenticated and authorized, with what the generic layer does for every kind. */
export interface SubresourceCall extends SubresourceRoute {
  readonly request: Request
  readonly query: URLSearchParams
  readonly ref: ResourceRef
  readonly namespace: string | undefined
  readonly name: string
  readonly principal: Principal
  /** The request's write options, as a create or a patch of the kind reads them. */
  readonly writeOptions: Effect.Effect<WriteOptions, ApiError>
  /** An object answered as the API answers one (JSON, or a Table when asked). */
  readonly render: (
    object: ResourceObject,
    status: number,
    headers: Record<string, string>
  ) => Effect.Effect<Response, ApiError>
}

export interface Subresource {
  /** The path segments it answers (`…/{name}/<segment>`). */
  readonly names: ReadonlyArray<string>
  /** The access a method on the route needs; undefined: the method is not allowed there (405). */
  readonly access: (method: string, route: SubresourceRoute) => Access | undefined
  /** The plural of the kind whose rights the request needs, when not the object's own. */
  readonly authorizeAs?: string
  readonly handle: (call: SubresourceCall) => Effect.Effect<Response, ApiError>
}

/** An operator's operation of the kind (`/apis/{group}/{version}/operator/<plural>/…`), admin only. */
export interface OperatorOperation {
  /** What it does, for the refusal of a key without the admin scope ("grant credits"). */
  readonly does: string
  /** `create`: the body is created as a client's create is; otherwise the operation on the named object. */
  readonly run: "create" | ((name: string) => Effect.Effect<ResourceObject, ApiError>)
}

/** A kind's HTTP parts, built from the services they call. */
export interface KindHttp {
  readonly subresources?: ReadonlyArray<Subresource>
  readonly createHooks?: CreateHooks
  /** What the kind adds to the options of every write by `principal`. */
  readonly writeOptions?: (principal: Principal) => Partial<WriteOptions>
  /** The operator's operation at `…/operator/<plural>/[name[/action…]]`; undefined: none there (404). */
  readonly operator?: (
    name: string | undefined,
    path: ReadonlyArray<string>
  ) => OperatorOperation | undefined
}

/** A kind's registration: its name, its OpenAPI operations (pure), and how its HTTP parts are made. */
export interface KindRegistration<R> {
  readonly kind: string
  readonly operations?: KindOperations
  /** Its subresource segments that have items (Routes.ts `ItemSubresources`), by what follows them. */
  readonly items?: Readonly<Record<string, "items" | "actions">>
  readonly make: Effect.Effect<KindHttp, never, R>
}

/** The services a registration's parts are made with. */
export type ServicesOf<Registration> = Registration extends KindRegistration<infer R> ? R : never

/** The registered kinds' HTTP parts, by kind, and their OpenAPI operations in registry order. */
export class KindApis extends Context.Service<KindApis, {
  readonly of: (kind: string) => KindHttp | undefined
  /** Every subresource segment some kind answers. */
  readonly subresourceNames: ReadonlySet<string>
  readonly operations: ReadonlyArray<KindOperations>
  readonly items: ItemSubresources
}>()("nodus/http/KindApi") {
  static readonly layer = <const Registrations extends ReadonlyArray<KindRegistration<any>>>(
    registrations: Registrations
  ): Layer.Layer<KindApis, never, ServicesOf<Registrations[number]>> =>
    Layer.effect(
      KindApis,
      Effect.gen(function*() {
        const byKind = new Map<string, KindHttp>()
        for (const registration of registrations) byKind.set(registration.kind, yield* registration.make)
        return KindApis.of({
          of: (kind) => byKind.get(kind),
          subresourceNames: new Set(
            [...byKind.values()].flatMap((http) => (http.subresources ?? []).flatMap((entry) => entry.names))
          ),
          operations: operationsOf(registrations),
          items: itemsOf(registrations)
        })
      })
    )
}

/** The subresources with items of `registrations`. */
export const itemsOf = (registrations: ReadonlyArray<KindRegistration<unknown>>): ItemSubresources =>
  new Map(registrations.flatMap((registration) => Object.entries(registration.items ?? {})))

/** The OpenAPI operations of `registrations`, in their order. */
export const operationsOf = (registrations: ReadonlyArray<KindRegistration<unknown>>): ReadonlyArray<KindOperations> =>
  registrations.flatMap((registration) => registration.operations === undefined ? [] : [registration.operations])
