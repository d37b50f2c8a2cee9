/**
 * Connection (spec: Other kinds — "a Connection injects env and egress hosts and may be an object-storage or database
 * connection"; JobInput.bucket.connection, JobOutput.sink.connection, Workspace/Job connections; error
 * ConnectionNotReady): access to an outside service that workloads name in `connections`. The spec does not show its
 * fields; this module decides a small schema (docs/kinds/Connection.md): the type, where the service is, credentials
 * that only ever come from Secrets, the env it injects and the egress hosts it adds. The spec is a union keyed by
 * `type`, one struct per type, so that OpenAPI (and data generated from it) shows which fields each type takes; the
 * URI grammar is a JSON Schema pattern, checked beside the URL parser. The type is fixed at create.
 */
import { Schema } from "effect"
import * as Limits from "../../core/Limits.ts"
import { described, listOf, mapOf, matching, nonEmpty, optional } from "../../core/meta/Fields.ts"
import { fullOps, kindInfo } from "../../core/meta/Kinds.ts"
import type { KindDefinition, ServedKind } from "../../core/schemas/Kind.ts"
import { Condition, EnvVar } from "../../core/schemas/Shared.ts"

/** Connection types (nodus's names for the spec's object-storage and database connections, plus plain HTTP APIs). */
export const connectionTypes = ["ObjectStorage", "Database", "Http"] as const

/** The Network grammar of egress hosts: a DNS name or a *.suffix pattern (spec: Network.egress.allow). */
const egressHost = matching(
  /^(\*\.)?([a-z0-9]([-a-z0-9]*[a-z0-9])?\.)*[a-z0-9]([-a-z0-9]*[a-z0-9])?$/u,
  "must be a DNS name or a *.suffix pattern"
)

const credentialName = /^[A-Za-z][A-Za-z0-9]*$/u

/** A credential is only ever a reference to a key of a Secret in the project (spec: Conventions 6). */
const ConnectionCredential = Schema.Struct({
  secretKeyRef: described(
    Schema.Struct({
      name: described(nonEmpty, "The Secret."),
      key: described(nonEmpty, "The key in the Secret.")
    }),
    "A key of a Secret in the project."
  )
})

const Credentials = mapOf(
  ConnectionCredential,
  (name) => credentialName.test(name) ? undefined : `must match ${credentialName.source} (e.g. accessKeyId, password)`,
  { pattern: credentialName.source }
).check(
  Schema.makeFilter(
    (credentials: Readonly<Record<string, unknown>>) => {
      const count = Object.keys(credentials).length
      return count <= Limits.connectionCredentialsMax
        ? undefined
        : `Too many: ${count}: must have at most ${Limits.connectionCredentialsMax} credentials`
    },
    { toJsonSchema: () => ({ maxProperties: Limits.connectionCredentialsMax }) }
  )
)

// ---------------------------------------------------------------------------------------------------------------------
// URI grammar (RFC 3986, restricted to what the WHATWG URL parser reads the same way): written once here as JSON
// Schema patterns, so OpenAPI shows the rule and generated test data is well-formed. WebhookEndpoint.url uses it too.

const h16 = "[0-9A-Fa-f]{1,4}"
const decOctet = "(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"

/** A dotted-decimal IPv4 address (no leading zeros, which URL parsers would read as octal). */
export const ipv4Grammar = `${decOctet}(\\.${decOctet}){3}`

const ls32 = `(${h16}:${h16}|${ipv4Grammar})`

/** An IPv6 address as RFC 3986 writes it (IPv6address), without brackets. */
export const ipv6Grammar = [
  `(${h16}:){6}${ls32}`,
  `::(${h16}:){5}${ls32}`,
  `(${h16})?::(${h16}:){4}${ls32}`,
  `((${h16}:){0,1}${h16})?::(${h16}:){3}${ls32}`,
  `((${h16}:){0,2}${h16})?::(${h16}:){2}${ls32}`,
  `((${h16}:){0,3}${h16})?::${h16}:${ls32}`,
  `((${h16}:){0,4}${h16})?::${ls32}`,
  `((${h16}:){0,5}${h16})?::${h16}`,
  `((${h16}:){0,6}${h16})?::`
].join("|")

const label = "[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?"
/** The last label starts with a letter: a name ending in a number is read as an IPv4 address by URL parsers. */
const lastLabel = "[A-Za-z]([-A-Za-z0-9]*[A-Za-z0-9])?"

/** A DNS name of ASCII labels (IDNs in their xn-- form), optionally fully qualified with a trailing dot. */
export const dnsNameGrammar = `(${label}\\.)*${lastLabel}\\.?`

/** A DNS name of two or more labels. */
export const dottedNameGrammar = `(${label}\\.)+${lastLabel}\\.?`

/** A port, 1 to 65535, without leading zeros. */
export const portGrammar = "(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3})"

/** A user name (no password: a ":" in the user information is refused). */
const userGrammar = "[-A-Za-z0-9._~!$&'()*+,;=%]+"

/** Path, query and fragment: printable ASCII, as a URI is written. */
export const restGrammar = "([/?#][!-~]*)?"

/** The authority of a URI: optional user name, a DNS name, an IPv4 address or a bracketed IPv6 address, and a port. */
const authorityGrammar = (host: string) =>
  `(${userGrammar}@)?(${host}|${ipv4Grammar}|\\[(${ipv6Grammar})\\])(:${portGrammar})?`

const httpsUriPattern = `^https://${authorityGrammar(dnsNameGrammar)}${restGrammar}$`
const databaseUriPattern = `^[a-z][a-z0-9+.-]*://${authorityGrammar(dnsNameGrammar)}${restGrammar}$`
const httpSchemes = "^https?:"

const httpsUri = new RegExp(httpsUriPattern, "u")
const databaseUri = new RegExp(databaseUriPattern, "u")

/** The user information of a URI's authority (before the last "@"), or undefined when it has none. */
const userInfoOf = (text: string): string | undefined => {
  const authority = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/([^/?#]*)/u.exec(text)?.[1] ?? ""
  const at = authority.lastIndexOf("@")
  return at < 0 ? undefined : authority.slice(0, at)
}

const parses = (text: string): URL | undefined => {
  try {
    return new URL(text)
  } catch {
    return undefined
  }
}

/** Whether a URI carries a password (user:password@host), however it is written. */
const carriesPassword = (text: string): boolean =>
  (userInfoOf(text)?.includes(":") ?? false) || (parses(text)?.password ?? "") !== ""

/** The URI with its password replaced, so that an error message never repeats a secret. */
const redacted = (text: string): string => {
  const user = userInfoOf(text)
  return user === undefined || !user.includes(":")
    ? "<redacted>"
    : text.replace(`${user}@`, `${user.slice(0, user.indexOf(":"))}:***@`)
}

type UriForm = "https" | "database"

/** Why `text` is not a `form` URI, or undefined. */
const uriProblem = (form: UriForm, text: string): string | undefined => {
  if (carriesPassword(text)) return "must not carry a password: put it in credentials as a secretKeyRef"
  if (form === "https") {
    if (!text.startsWith("https://")) return "must be an https URL"
    return httpsUri.test(text) && parses(text) !== undefined
      ? undefined
      : "must be an https URL with a host, such as https://s3.eu-central-1.amazonaws.com"
  }
  if (/^https?:/u.test(text)) {
    return "must be a database URI with a scheme and a host, such as postgresql://db.example.com:5432/app, not an http or https URL"
  }
  return databaseUri.test(text) && parses(text) !== undefined
    ? undefined
    : "must be an absolute URI with a scheme and a host, such as postgresql://db.example.com:5432/app"
}

/**
 * A URI of `form`. The pattern is the grammar; the URL parser and the password rule are checked beside it, so the
 * JSON Schema is declared an approximation (a punycode label the parser refuses still matches the pattern).
 */
const uri = (form: UriForm) =>
  Schema.String.check(Schema.makeFilter(
    (text: string) => {
      const problem = uriProblem(form, text)
      return problem === undefined
        ? undefined
        : `Invalid value: "${carriesPassword(text) ? redacted(text) : text}": ${problem}`
    },
    {
      toJsonSchema: () => [
        form === "https"
          ? { pattern: httpsUriPattern }
          : { pattern: databaseUriPattern, not: { pattern: httpSchemes } },
        true
      ]
    }
  ))

// ---------------------------------------------------------------------------------------------------------------------
// spec: one struct per type

const sharedFields = {
  credentials: optional(
    Credentials,
    "Named credentials (e.g. accessKeyId, secretAccessKey, username, password, token), each a secretKeyRef; never literal values."
  ),
  env: optional(
    listOf(EnvVar, Limits.connectionEnvMax),
    "Environment injected into every workload that names the Connection; secrets come through valueFrom.secretKeyRef."
  ),
  egress: optional(
    listOf(egressHost, Limits.egressAllowMax),
    "DNS names or *.suffix patterns added to the egress allow list of every workload that names the Connection."
  )
}

export const ObjectStorageConnectionSpec = Schema.Struct({
  type: described(Schema.Literal("ObjectStorage"), "ObjectStorage: an S3-compatible object store."),
  uri: optional(
    uri("https"),
    "The store's https endpoint, e.g. https://s3.eu-central-1.amazonaws.com; absent means AWS S3. Never a password."
  ),
  region: optional(nonEmpty, "The object store's region."),
  ...sharedFields
}).annotate({
  identifier: "ObjectStorageConnectionSpec",
  description: "A Connection to an S3-compatible object store (JobInput.bucket.connection)."
})

export const DatabaseConnectionSpec = Schema.Struct({
  type: described(Schema.Literal("Database"), "Database: a SQL database, e.g. for output sinks."),
  uri: described(
    uri("database"),
    "A database URI with a scheme and a host, e.g. postgresql://app@db.example.com:5432/warehouse; not http or https. Never a password."
  ),
  ...sharedFields
}).annotate({
  identifier: "DatabaseConnectionSpec",
  description: "A Connection to a SQL database (JobOutput.sink.connection)."
})

export const HttpConnectionSpec = Schema.Struct({
  type: described(Schema.Literal("Http"), "Http: an HTTP API."),
  uri: described(uri("https"), "The API's https URL, e.g. https://api.example.com/v1. Never a password."),
  ...sharedFields
}).annotate({ identifier: "HttpConnectionSpec", description: "A Connection to an HTTP API." })

/**
 * The spec: a union keyed by `type` (as Sweep's template is keyed by `template.kind`). A field another type has (e.g.
 * `region` on a Database) is not a field of that type: unknown, under the caller's fieldValidation.
 */
export const ConnectionSpec = Schema.Union([ObjectStorageConnectionSpec, DatabaseConnectionSpec, HttpConnectionSpec])
  .annotate({
    identifier: "ConnectionSpec",
    description:
      "Access to an outside service: env and egress hosts for workloads (spec: Other kinds); its fields depend on its type.",
    message: `Unsupported value: type: supported values: ${
      connectionTypes.map((type) => JSON.stringify(type)).join(", ")
    }`
  })

export const ConnectionStatus = Schema.Struct({
  conditions: optional(
    Schema.Array(Condition),
    "Ready is False while the service cannot be reached or the credentials are refused; workloads naming it fail with ConnectionNotReady."
  ),
  lastCheckTime: optional(Schema.String, "When the service last checked the connection."),
  message: optional(Schema.String, "Why it is not ready."),
  observedGeneration: optional(Schema.Int, "The spec generation this status reflects.")
}).annotate({ identifier: "ConnectionStatus", description: "Whether the Connection works." })

export const connection: KindDefinition = {
  spec: ConnectionSpec,
  status: ConnectionStatus,
  // nodus: the type is fixed at create; everything else may change (it applies to workloads admitted afterwards).
  updates: { immutable: ["type"] }
}

/**
 * How the API serves Connection (spec: Availability by kind) and its schema: its entry in the registry
 * (src/kinds/Kinds.ts).
 */
export const connectionServed: ServedKind = {
  info: kindInfo({
    kind: "Connection",
    plural: "connections",
    shortNames: ["conn"],
    operations: fullOps,
    description: "Injects env and egress hosts; may be an object-storage or database connection."
  }),
  definition: connection
}
