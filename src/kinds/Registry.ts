/**
 * Every kind's HTTP registration (src/http/KindApi.ts), one line per kind: what the generic HTTP layer serves beyond
 * a kind's generic operations (subresources and their OpenAPI operations, create hooks, write options, operator
 * operations). The server's composition hands them to the HTTP layer (`KindApis.layer(registrations)`); a kind not
 * listed here has its generic operations only. The order is the OpenAPI document's.
 */
import { itemsOf, operationsOf } from "../http/KindApi.ts"
import { creditGrantRegistration } from "./creditgrant/http/CreditGrantApi.ts"
import { functionCallRegistration } from "./function/http/FunctionCallResult.ts"
import { functionRegistration } from "./function/http/FunctionMap.ts"
import { jobRegistration } from "./job/http/JobApi.ts"
import { sandboxRegistration } from "./sandbox/http/SandboxApi.ts"
import { serviceAccountRegistration } from "./serviceaccount/http/ServiceAccountApi.ts"
import { topUpRegistration } from "./topup/http/TopUpApi.ts"
import { volumeRegistration } from "./volume/http/VolumeApi.ts"
import { webhookEndpointRegistration } from "./webhookendpoint/http/WebhookApi.ts"

export const registrations = [
  jobRegistration,
  sandboxRegistration,
  webhookEndpointRegistration,
  functionRegistration,
  functionCallRegistration,
  volumeRegistration,
  serviceAccountRegistration,
  creditGrantRegistration,
  topUpRegistration
] as const

/** The kinds' OpenAPI operations, for the documents built without a server (tests, scripts). */
export const kindOperations = operationsOf(registrations)

/** The kinds' subresources with items, for the routes parsed without a server (tests). */
export const kindItems = itemsOf(registrations)
