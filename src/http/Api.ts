/**
 * The HTTP face of the resource API, its router: one handler for every request. It parses the route, authenticates,
 * checks the scope, and hands the request to a generic handler (Handlers.ts: list, watch, create, replace, patch,
 * delete), to a kind's registered subresource or operator operation (KindApi.ts, src/kinds/Registry.ts), to
 * discovery and the OpenAPI documents, the test clock, blobs, or the node agent protocol. Every failure leaves here as
 * a Status body; a defect becomes a 500 InternalError without a stack trace (the trace goes to the server log).
 */
import { Cause, Context, Effect, Layer, Option, Result } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { ApiConfig } from "../apiserver/ApiConfig.ts"
import { type Access, Auth, forbidden, type Principal } from "../apiserver/Auth.ts"
import { Blobs } from "../apiserver/Blobs.ts"
import { Ids } from "../apiserver/Ids.ts"
import { etagOf, Resources } from "../apiserver/Resources.ts"
import type { JsonObject } from "../core/Json.ts"
import { ApiError, methodNotAllowed, notFound, resourceNotFound } from "../core/meta/ApiError.ts"
import { errorCodeInfo } from "../core/meta/ErrorCodes.ts"
import {
  apiVersionOf,
  eventKind,
  type KindInfo,
  namespaceKind,
  namespaceRef,
  type Operation,
  type ResourceRef,
  type Version,
  versions
} from "../core/meta/Kinds.ts"
import { adminScope } from "../core/meta/Scopes.ts"
import { byResource } from "../kinds/Kinds.ts"
import {
  agentBodyBytesMax,
  type AgentCall,
  type AgentDownload,
  type AgentUpload,
  NodeAgents
} from "../runtime/NodeAgents.ts"
import { clockObject, parseClockRequest, SimulationControl } from "../runtime/SimulationControl.ts"
import { makeBlobApi } from "./BlobApi.ts"
import { parseJson, readBytes, readText } from "./Body.ts"
import * as Discovery from "./Discovery.ts"
import * as Docs from "./Docs.ts"
import { ResourceHandlers } from "./Handlers.ts"
import { KindApis } from "./KindApi.ts"
import * as OpenApi from "./openapi/OpenApi.ts"
import { schemaDocuments } from "./openapi/SchemaDocuments.ts"
import { authorizationOf, boolParameter, requestTextProblem } from "./Parameters.ts"
import { json, requestIdHeader, type ResponseContext, statusResponse, withSafeHeaders } from "./Respond.ts"
import * as Routes from "./Routes.ts"

type Request = HttpServerRequest.HttpServerRequest
type Response = HttpServerResponse.HttpServerResponse

/** Which generic operation a method on a route means, before the kind's availability is checked. */
const operationOf = (
  method: string,
  route: Extract<Routes.Route, { _tag: "Resource" }>,
  info: KindInfo,
  watch: boolean
): Operation | undefined => {
  if (route.subresource === "status") {
    return method === "GET"
      ? "getStatus"
      : method === "PUT" || method === "PATCH"
      ? "writeStatus"
      : undefined
  }
  if (route.name === undefined) {
    if (method === "GET") {
      return watch
        ? "watch"
        : route.namespace === undefined && info.scope === "Namespaced"
        ? "listAll"
        : "list"
    }
    return method === "POST" ? "create" : undefined
  }
  switch (method) {
    case "GET":
      return "get"
    case "PUT":
      return "replace"
    case "PATCH":
      return "patch"
    case "DELETE":
      return "delete"
    default:
      return undefined
  }
}

const accessOf = (operation: Operation): Access => {
  switch (operation) {
    case "list":
    case "listAll":
    case "watch":
    case "get":
    case "getStatus":
      return "read"
    case "writeStatus":
      return "status"
    default:
      return "write"
  }
}

export class Api extends Context.Service<Api, { readonly handle: (request: Request) => Effect.Effect<Response> }>()(
  "nodus/http/Api"
) {
  static readonly layer = Layer.effect(
    Api,
    Effect.gen(function*() {
      const settings = yield* ApiConfig
      const resources = yield* Resources
      const auth = yield* Auth
      const ids = yield* Ids
      const { render: renderObject, create, list, patch, remove, replace, watch, writeOptions } =
        yield* ResourceHandlers
      const simulation = yield* SimulationControl
      const agents = yield* NodeAgents
      const kindApis = yield* KindApis
      const blobApi = makeBlobApi({
        blobs: yield* Blobs,
        projectExists: (project) =>
          resources.get(namespaceRef, undefined, project).pipe(
            Effect.as(true),
            Effect.catchIf((error) => error.code === "NotFound", () => Effect.succeed(false))
          )
      })
      const group = settings.group
      // Documents are generated once, on first request (tens of ms, off start-up): they depend only on the group and
      // the kinds' schemas.
      const openApiDocuments = new Map<Version, JsonObject>()
      const openApiDocument = (version: Version): JsonObject => {
        let document = openApiDocuments.get(version)
        if (document === undefined) {
          openApiDocuments.set(
            version,
            document = OpenApi.document(group, version, schemaDocuments, kindApis.operations)
          )
        }
        return document
      }

      const refOf = (route: Extract<Routes.Route, { _tag: "Resource" }>): ResourceRef | undefined => {
        if (route.group === "") {
          const info = route.plural === "namespaces" ? namespaceKind : route.plural === "events" ? eventKind : undefined
          return info === undefined ? undefined : { info, group: "", apiVersion: "v1" }
        }
        if (route.group !== group) {
          return undefined
        }
        const info = byResource(route.version, route.plural)
        return info === undefined ? undefined : { info, group, apiVersion: apiVersionOf(group, info) }
      }

      /**
       * The operator's operations of a kind (docs/billing.md, "Credits"), admin only, beside the resource API so that
       * users keep the spec's operations: `POST …/operator/<plural>[/<name>/<action>]`, as the kind registers them.
       */
      const operator = Effect.fnUntraced(function*(
        request: Request,
        url: URL,
        route: Extract<Routes.Route, { _tag: "Operator" }>,
        principal: Principal
      ) {
        const [plural, name, ...rest] = route.path
        const ref = refOf({ _tag: "Resource", group: route.group, version: route.version, plural: plural ?? "" })
        const operation = ref === undefined ? undefined : kindApis.of(ref.info.kind)?.operator?.(name, rest)
        if (operation === undefined || route.version !== "v1" || ref === undefined) return yield* resourceNotFound()
        if (request.method !== "POST") return yield* methodNotAllowed(request.method)
        if (!principal.scopes.has(adminScope)) {
          return yield* forbidden(principal, `cannot ${operation.does}: the operation needs scope "${adminScope}"`)
        }
        if (operation.run === "create") return yield* create(request, url.searchParams, principal, ref, undefined)
        const object = yield* operation.run(name ?? "")
        return yield* renderObject(request, url.searchParams, ref, object, 200, { etag: etagOf(object) })
      })

      const resource = Effect.fnUntraced(function*(
        request: Request,
        url: URL,
        route: Extract<Routes.Route, { _tag: "Resource" }>,
        principal: Principal
      ) {
        const ref = refOf(route)
        if (
          ref === undefined || (ref.group !== "" && !versions.includes(route.version as never))
        ) return yield* resourceNotFound()
        const namespaced = ref.info.scope === "Namespaced"
        // Cluster-scoped kinds have no project segment; namespaced items always have one.
        if (
          (!namespaced && route.namespace !== undefined) ||
          (namespaced && route.name !== undefined && route.namespace === undefined)
        ) return yield* resourceNotFound()
        const query = url.searchParams
        if (route.subresource !== undefined && route.subresource !== "status") {
          return yield* kindSubresource(request, query, route, route.subresource, principal, ref)
        }
        const watching = route.name === undefined && request.method === "GET"
          ? yield* boolParameter(query, "watch")
          : false
        const operation = operationOf(request.method, route, ref.info, watching)
        if (operation === undefined || !ref.info.operations.has(operation)) {
          return yield* methodNotAllowed(request.method)
        }
        const namespace = ref.info === namespaceKind ? undefined : route.namespace
        const authorizedProject = ref.info === namespaceKind ? route.name : route.namespace
        yield* auth.authorize(principal, ref.info, accessOf(operation), authorizedProject)
        const name = route.name ?? ""
        const subresource = route.subresource === "status" ? "status" as const : undefined
        switch (operation) {
          case "list":
          case "listAll":
            return yield* list(request, query, principal, ref, namespace)
          case "watch":
            return yield* watch(request, query, principal, ref, namespace)
          case "get":
          case "getStatus": {
            const object = yield* resources.get(ref, namespace, name)
            return yield* renderObject(request, query, ref, object, 200, { etag: etagOf(object) })
          }
          case "create":
            return yield* create(request, query, principal, ref, namespace)
          case "replace":
            return yield* replace(request, query, principal, ref, namespace, name, undefined)
          case "writeStatus":
            return request.method === "PUT"
              ? yield* replace(request, query, principal, ref, namespace, name, subresource)
              : yield* patch(request, query, principal, ref, namespace, name, subresource)
          case "patch":
            return yield* patch(request, query, principal, ref, namespace, name, undefined)
          case "delete":
            return yield* remove(request, query, ref, namespace, name)
        }
      })

      /**
       * A subresource a kind registers (src/kinds/Registry.ts): a segment no kind answers is NotFound, one another kind
       * answers or a method the kind's does not take is MethodNotAllowed; the access it needs is checked on the kind
       * it names (a Function's map creates FunctionCalls), else on the object's.
       */
      const kindSubresource = Effect.fnUntraced(function*(
        request: Request,
        query: URLSearchParams,
        route: Extract<Routes.Route, { _tag: "Resource" }>,
        subresource: string,
        principal: Principal,
        ref: ResourceRef
      ) {
        if (!kindApis.subresourceNames.has(subresource)) return yield* resourceNotFound()
        const target = { name: route.name, subresource, item: route.item, action: route.action }
        const found = kindApis.of(ref.info.kind)?.subresources?.find((entry) => entry.names.includes(subresource))
        const access = found?.access(request.method, target)
        if (found === undefined || access === undefined) return yield* methodNotAllowed(request.method)
        const namespace = ref.info === namespaceKind ? undefined : route.namespace
        const authorizedProject = ref.info === namespaceKind ? route.name : route.namespace
        const authorizedKind = found.authorizeAs === undefined ? ref.info : byResource("v1", found.authorizeAs)!
        yield* auth.authorize(principal, authorizedKind, access, authorizedProject)
        return yield* found.handle({
          ...target,
          request,
          query,
          ref,
          namespace,
          name: route.name ?? "",
          principal,
          writeOptions: writeOptions(request, query, principal, ref),
          render: (object, status, headers) => renderObject(request, query, ref, object, status, headers)
        })
      })

      /** GET reads the test clock (any key); POST moves it, which moves time for everyone: admin only. */
      const simulationClock = Effect.fnUntraced(function*(
        request: Request,
        route: Extract<Routes.Route, { _tag: "SimulationClock" }>,
        principal: Principal
      ) {
        if (route.group !== group || route.version !== "v1") return yield* resourceNotFound()
        if (request.method === "GET") return json(200, clockObject(group, yield* simulation.read))
        if (request.method !== "POST") return yield* methodNotAllowed(request.method)
        if (!principal.scopes.has(adminScope)) {
          return yield* forbidden(principal, `cannot move the simulation clock: the key needs scope "${adminScope}"`)
        }
        const body = yield* Effect.flatMap(readText(request), parseJson)
        const target = parseClockRequest(body)
        if (Result.isFailure(target)) {
          return yield* target.failure
        }
        return json(200, clockObject(group, yield* simulation.advance(target.success)))
      })

      const discovery = (request: Request, route: Routes.Route) => {
        const accept = request.headers["accept"]
        switch (route._tag) {
          case "CoreVersions":
            return Discovery.wantsAggregated(accept)
              ? HttpServerResponse.text(JSON.stringify(Discovery.aggregatedCore()), {
                contentType: Discovery.aggregatedContentType
              })
              : json(200, Discovery.coreVersions())
          case "CoreResources":
            return json(200, Discovery.coreResourceList())
          case "Groups":
            return Discovery.wantsAggregated(accept)
              ? HttpServerResponse.text(JSON.stringify(Discovery.aggregatedGroups(group)), {
                contentType: Discovery.aggregatedContentType
              })
              : json(200, Discovery.groupList(group))
          default:
            return undefined
        }
      }

      const authenticated = Effect.fnUntraced(function*(request: Request, url: URL, route: Routes.Route) {
        const principal = yield* auth.authenticate(yield* authorizationOf(request))
        const found = discovery(request, route)
        if (found !== undefined) return found
        switch (route._tag) {
          case "Root":
            return json(200, { paths: Routes.rootPaths(group) })
          case "OpenApiV2":
            // An empty body is an empty protobuf Document: kubectl finds no schema there and skips client-side
            // validation (needed for Namespace manifests and TopUps, whose v3 documents have no PATCH to carry
            // fieldValidation). The type is the one kube-openapi answers with: the '@' form kubectl asks for is no
            // valid media type, and client-go fails to parse a response that carries it ("unexpected content after
            // media subtype").
            return HttpServerResponse.uint8Array(new Uint8Array(0), {
              contentType: "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
            })
          case "Group":
            return route.group === group ? json(200, Discovery.group(group)) : yield* resourceNotFound()
          case "GroupVersion":
            return route.group === group && versions.includes(route.version as never)
              ? json(200, Discovery.resourceList(group, route.version as "v1" | "v1beta1"))
              : yield* resourceNotFound()
          case "OpenApiIndex":
            return json(200, OpenApi.index(group))
          case "OpenApiGroupVersion":
            return route.group === group && versions.includes(route.version as never)
              ? json(200, openApiDocument(route.version as Version))
              : yield* resourceNotFound()
          case "OpenApiCore":
            return json(200, OpenApi.coreDocument())
          case "Resource":
            return yield* resource(request, url, route, principal)
          case "SimulationClock":
            return yield* simulationClock(request, route, principal)
          case "Operator":
            return yield* operator(request, url, route, principal)
          case "Blob":
            return yield* blobApi.handle(request, url.searchParams, route.reference, principal)
          default:
            return yield* resourceNotFound()
        }
      })

      /** The node agent protocol (runtime/NodeAgents.ts): POST with JSON, the agent's key as its bearer credential. */
      const agentCall = Effect.fnUntraced(
        function*(request: Request, url: URL, call: AgentCall | AgentUpload | AgentDownload) {
          if (request.method !== "POST") return yield* methodNotAllowed(request.method)
          const authorization = yield* authorizationOf(request)
          const credential = authorization?.startsWith("Bearer ")
            ? authorization.slice("Bearer ".length).trim()
            : undefined
          // An output's bytes are the body itself, streamed to the store (no JSON, no body size bound of the API).
          if (call === "outputs" || call === "checkpoints") {
            return json(200, yield* agents.upload(call, url.searchParams, request.stream, credential))
          }
          if (call === "inputs" || call === "restores") {
            return HttpServerResponse.stream(yield* agents.download(call, url.searchParams, credential), {
              contentType: "application/octet-stream"
            })
          }
          // A sync carries box replies (a file of up to 16 MiB, in base64): an agent's body may be larger than a
          // client's.
          const limit = credential === undefined
            ? undefined
            : {
              maxBytes: agentBodyBytesMax,
              tooLarge: () =>
                new ApiError({
                  code: "RequestEntityTooLarge",
                  message: `an agent's request body is larger than ${agentBodyBytesMax} bytes`
                })
            }
          const body = yield* Effect.flatMap(
            Effect.map(readBytes(request, limit), (bytes) => new TextDecoder().decode(bytes)),
            parseJson
          )
          return json(200, yield* agents.call(call, body, credential))
        }
      )

      const route = (request: Request, url: URL): Effect.Effect<Response, ApiError> => {
        const parsed = Routes.parse(url.pathname, kindApis.items)
        const problem = requestTextProblem(parsed, url.searchParams)
        if (problem !== undefined) return Effect.fail(problem)
        switch (parsed._tag) {
          case "Version":
            return Effect.succeed(json(200, Discovery.versionInfo()))
          case "Health":
            return Effect.succeed(HttpServerResponse.text("ok"))
          case "ErrorDocs": {
            const page = parsed.code === undefined ? Docs.indexPage() : Docs.codePage(parsed.code)
            return page === undefined
              ? Effect.fail(notFound({ kind: "errorcodes", name: parsed.code ?? "" }))
              : Effect.succeed(HttpServerResponse.text(page, { contentType: "text/html; charset=utf-8" }))
          }
          case "NotFound":
            return Effect.fail(resourceNotFound())
          case "Agent":
            return agentCall(request, url, parsed.call)
          default:
            return settings.servesApi === false ? Effect.fail(controllersOnly) : authenticated(request, url, parsed)
        }
      }

      // Request ids need to be unique, not secret: a per-process random prefix and a counter.
      const requestPrefix = `req_${ids.secret(6)}`
      let requestCounter = 0

      const handle = Effect.fn("Api.handle")(function*(request: Request) {
        const requestId = `${requestPrefix}${(++requestCounter).toString(36)}`
        const context: ResponseContext = {
          requestId,
          docsBase: `${settings.publicUrl()}/docs/errors`
        }
        const url = new URL(request.url, "http://local")
        const logged = `${request.method} ${url.pathname} (request id ${requestId})`
        return yield* route(request, url).pipe(
          Effect.catchCause((cause) => {
            const failure = Cause.findErrorOption(cause)
            if (Option.isSome(failure) && failure.value instanceof ApiError) {
              const error = failure.value
              // Every 5xx is the server's to explain: it is logged with the id the client was given.
              const log = errorCodeInfo(error.code).httpStatus >= 500
                ? Effect.logError(`${logged} answered ${error.code}: ${error.message}`)
                : Effect.void
              return Effect.as(log, statusResponse(error, context))
            }
            return Effect.as(
              Effect.logError(`${logged} failed`, Cause.pretty(cause)),
              statusResponse(
                new ApiError({
                  code: "InternalError",
                  message: "an internal error occurred; it has been logged",
                  fix: `Retry the request; if it keeps failing, report request id ${requestId}.`
                }),
                context
              )
            )
          }),
          Effect.map((response) => withSafeHeaders(HttpServerResponse.setHeader(response, requestIdHeader, requestId)))
        )
      })

      return Api.of({ handle })
    })
  )
}

/** What a server of `--role controllers` answers to API requests (docs/scale-out.md, "Roles"). */
const controllersOnly = new ApiError({
  code: "Unavailable",
  message:
    "this server runs controllers only (--role controllers): it answers /healthz, /readyz, /livez, /version and node agents, not the API",
  fix: "Send API requests to a server of the same database started with --role api or --role all."
})

/** The HTTP app: every request through `Api.handle`. */
export const app = Effect.flatMap(
  Effect.all([Api, HttpServerRequest.HttpServerRequest]),
  ([api, request]) => api.handle(request)
)
