// The one protobuf request body the server accepts: `kubectl create namespace` sends its Namespace as
// `application/vnd.kubernetes.protobuf` because Namespace is a built-in Kubernetes type, while every other request
// (and every response) is JSON. No protobuf library is available, so this is a minimal, strictly bounds-checked
// decoder for exactly the wire shapes involved (k8s.io/apimachinery runtime.Unknown wrapping k8s.io.api.core.v1
// Namespace), turning the body into the JSON object a JSON client would have sent. A malformed body is an Err with
// a reason, never a throw. Pure: no I/O.
//
// Field numbers follow k8s.io/apimachinery/pkg/runtime/generated.proto (Unknown, TypeMeta),
// k8s.io/api/core/v1/generated.proto (Namespace, NamespaceSpec) and
// k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto (ObjectMeta).

/** The media type of a Kubernetes protobuf body. */
export const protobufMediaType = "application/vnd.kubernetes.protobuf"

/** The four bytes ("k8s\0") that open every Kubernetes protobuf body, before the runtime.Unknown envelope. */
const magicPrefix: ReadonlyArray<number> = [0x6b, 0x38, 0x73, 0x00]

/** The metadata a client can meaningfully send when it creates a Namespace. */
export type NamespaceMetadata = {
  readonly name?: string
  readonly generateName?: string
  readonly labels?: { readonly [key: string]: string }
  readonly annotations?: { readonly [key: string]: string }
  readonly finalizers?: ReadonlyArray<string>
}

/** A Namespace's spec: only its finalizers. */
export type NamespaceSpec = { readonly finalizers?: ReadonlyArray<string> }

/** A decoded Namespace, shaped as the JSON body a client would have sent. */
export type NamespaceObject = {
  readonly apiVersion: "v1"
  readonly kind: "Namespace"
  readonly metadata: NamespaceMetadata
  readonly spec?: NamespaceSpec
}

/** The outcome of a decode: the value, or why the bytes are not a valid body. */
export type DecodeResult<A> = { readonly _tag: "Ok"; readonly value: A } | {
  readonly _tag: "Err"
  readonly message: string
}

type Err = { readonly _tag: "Err"; readonly message: string }

const ok = <A>(value: A): DecodeResult<A> => ({ _tag: "Ok", value })
const err = (message: string): Err => ({ _tag: "Err", message })

// ---------------------------------------------------------------------------------------------------------------
// The reader: varints and fields, with every length checked against the bytes that are actually there.

/** One field of a message. Fixed-width values are only skipped, since no field this module reads uses them. */
type Field =
  | { readonly number: number; readonly wireType: 0; readonly value: number }
  | { readonly number: number; readonly wireType: 1 | 5 }
  | { readonly number: number; readonly wireType: 2; readonly bytes: Uint8Array }

/** What a reader step produced, and the offset just after it. */
type Read<A> = { readonly _tag: "Ok"; readonly value: A; readonly next: number } | Err

const read = <A>(value: A, next: number): Read<A> => ({ _tag: "Ok", value, next })

/** The largest field number protobuf allows (2^29 - 1). */
const maxFieldNumber = 536_870_911

/**
 * Reads a base-128 varint of at most 10 bytes starting at `offset`, returning its value and the offset after it.
 * Values past 2^53 lose precision, which is harmless: the only varints read for their value are tags and lengths,
 * and anything that large fails the field-number and bounds checks that follow; varint fields are only skipped.
 */
const readVarint = (bytes: Uint8Array, offset: number): Read<number> => {
  let value = 0
  for (let index = 0; index < 10; index++) {
    const byte = bytes[offset + index]
    if (byte === undefined) return err("truncated varint")
    // The tenth byte may only hold the 64th bit; anything more overflows uint64 or continues past 10 bytes.
    if (index === 9 && byte > 1) return err("varint longer than 64 bits")
    value += (byte & 0x7f) * 2 ** (7 * index)
    if (byte < 0x80) return read(value, offset + index + 1)
  }
  return err("varint longer than 64 bits")
}

/** Skips `width` bytes of a fixed-width value, failing when fewer remain. */
const skipFixed = (bytes: Uint8Array, offset: number, width: number): Read<undefined> =>
  offset + width <= bytes.length ? read(undefined, offset + width) : err(`truncated ${width * 8}-bit field`)

/** Reads one field (tag and value) starting at `offset`, returning it and the offset after it. */
const readField = (bytes: Uint8Array, offset: number): Read<Field> => {
  const tag = readVarint(bytes, offset)
  if (tag._tag === "Err") return tag
  const number = Math.floor(tag.value / 8)
  const wireType = tag.value % 8
  if (number < 1 || number > maxFieldNumber) return err(`invalid field number ${number}`)
  switch (wireType) {
    case 0: {
      const varint = readVarint(bytes, tag.next)
      return varint._tag === "Err" ? varint : read({ number, wireType, value: varint.value }, varint.next)
    }
    case 1:
    case 5: {
      const skipped = skipFixed(bytes, tag.next, wireType === 1 ? 8 : 4)
      return skipped._tag === "Err" ? skipped : read({ number, wireType }, skipped.next)
    }
    case 2: {
      const length = readVarint(bytes, tag.next)
      if (length._tag === "Err") return length
      const end = length.next + length.value
      if (end > bytes.length) return err(`field ${number} has length ${length.value}, past the end of its message`)
      return read({ number, wireType, bytes: bytes.subarray(length.next, end) }, end)
    }
    case 3:
    case 4:
      return err(`field ${number} uses the deprecated group wire type ${wireType}, which is not supported`)
    default:
      return err(`field ${number} has invalid wire type ${wireType}`)
  }
}

/** Splits a whole message into its fields, in order; fails if any field is malformed or cut short. */
const fieldsOf = (bytes: Uint8Array): DecodeResult<ReadonlyArray<Field>> => {
  const fields: Array<Field> = []
  let offset = 0
  while (offset < bytes.length) {
    const field = readField(bytes, offset)
    if (field._tag === "Err") return field
    fields.push(field.value)
    offset = field.next
  }
  return ok(fields)
}

// ---------------------------------------------------------------------------------------------------------------
// Interpreting fields: each message is a table from field number to handler; fields without one are skipped, as
// protobuf requires of unknown fields.

/** Handles one occurrence of a known field; undefined means success. */
type FieldHandler = (field: Field) => Err | undefined
type Handlers = { readonly [fieldNumber: number]: FieldHandler }

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true })

const wrongWireType = (field: Field, path: string): Err =>
  err(`${path}: expected wire type 2 (length-delimited), found ${field.wireType}`)

/** Decodes a message, handing each known field to its handler; errors are prefixed with the message's path. */
const decodeMessage = (bytes: Uint8Array, path: string, handlers: Handlers): Err | undefined => {
  const fields = fieldsOf(bytes)
  if (fields._tag === "Err") return err(`${path}: ${fields.message}`)
  for (const field of fields.value) {
    const failure = handlers[field.number]?.(field)
    if (failure !== undefined) return failure
  }
  return undefined
}

/** Decodes a string field as strict UTF-8 and hands it to `use`. */
const withString = (field: Field, path: string, use: (value: string) => void): Err | undefined => {
  if (field.wireType !== 2) return wrongWireType(field, path)
  try {
    use(utf8.decode(field.bytes))
    return undefined
  } catch {
    // TextDecoder with fatal: true throws a TypeError on malformed UTF-8; that is a bad body, not a defect.
    return err(`${path}: invalid UTF-8`)
  }
}

/** Decodes an embedded message field with its own handlers. */
const withMessage = (field: Field, path: string, handlers: Handlers): Err | undefined =>
  field.wireType === 2 ? decodeMessage(field.bytes, path, handlers) : wrongWireType(field, path)

/** Decodes one entry of a map<string, string> field into `into`; a later entry with the same key wins. */
const withMapEntry = (field: Field, path: string, into: Map<string, string>): Err | undefined => {
  let key = ""
  let value = ""
  const failure = withMessage(field, path, {
    1: (entry) =>
      withString(entry, `${path}.key`, (text) => {
        key = text
      }),
    2: (entry) =>
      withString(entry, `${path}.value`, (text) => {
        value = text
      })
  })
  if (failure === undefined) into.set(key, value)
  return failure
}

// ---------------------------------------------------------------------------------------------------------------
// The Kubernetes messages.

/** ObjectMeta as it accumulates; repeated occurrences of the metadata field merge, as protobuf specifies. */
type MetadataBuilder = {
  name: string
  generateName: string
  readonly labels: Map<string, string>
  readonly annotations: Map<string, string>
  readonly finalizers: Array<string>
}

const objectMetaHandlers = (meta: MetadataBuilder): Handlers => ({
  1: (field) =>
    withString(field, "metadata.name", (text) => {
      meta.name = text
    }),
  2: (field) =>
    withString(field, "metadata.generateName", (text) => {
      meta.generateName = text
    }),
  11: (field) => withMapEntry(field, "metadata.labels", meta.labels),
  12: (field) => withMapEntry(field, "metadata.annotations", meta.annotations),
  14: (field) =>
    withString(field, "metadata.finalizers", (text) => {
      meta.finalizers.push(text)
    })
})

/** The JSON metadata, leaving out what is empty, as Go's omitempty does. */
const metadataOf = (meta: MetadataBuilder): NamespaceMetadata => ({
  ...(meta.name === "" ? {} : { name: meta.name }),
  ...(meta.generateName === "" ? {} : { generateName: meta.generateName }),
  // Object.fromEntries defines own properties, so a key such as "__proto__" stays an ordinary member.
  ...(meta.labels.size === 0 ? {} : { labels: Object.fromEntries(meta.labels) }),
  ...(meta.annotations.size === 0 ? {} : { annotations: Object.fromEntries(meta.annotations) }),
  ...(meta.finalizers.length === 0 ? {} : { finalizers: [...meta.finalizers] })
})

/** Decodes a core/v1 Namespace message; its status (field 3) is skipped, since a client cannot set it. */
const decodeNamespaceMessage = (raw: Uint8Array): DecodeResult<NamespaceObject> => {
  const meta: MetadataBuilder = {
    name: "",
    generateName: "",
    labels: new Map(),
    annotations: new Map(),
    finalizers: []
  }
  const specFinalizers: Array<string> = []
  let hasSpec = false
  const failure = decodeMessage(raw, "Namespace", {
    1: (field) => withMessage(field, "metadata", objectMetaHandlers(meta)),
    2: (field) => {
      hasSpec = true
      return withMessage(field, "spec", {
        1: (entry) =>
          withString(entry, "spec.finalizers", (text) => {
            specFinalizers.push(text)
          })
      })
    }
  })
  if (failure !== undefined) return failure
  const spec: NamespaceSpec = specFinalizers.length === 0 ? {} : { finalizers: specFinalizers }
  return ok({ apiVersion: "v1", kind: "Namespace", metadata: metadataOf(meta), ...(hasSpec ? { spec } : {}) })
}

/** The runtime.Unknown envelope's fields; empty strings stand for absent ones, as in Go. */
type Envelope = {
  apiVersion: string
  kind: string
  raw: Uint8Array | undefined
  contentEncoding: string
  contentType: string
}

const decodeEnvelope = (bytes: Uint8Array): DecodeResult<Envelope> => {
  const envelope: Envelope = { apiVersion: "", kind: "", raw: undefined, contentEncoding: "", contentType: "" }
  const failure = decodeMessage(bytes, "Unknown", {
    1: (field) =>
      withMessage(field, "typeMeta", {
        1: (entry) =>
          withString(entry, "typeMeta.apiVersion", (text) => {
            envelope.apiVersion = text
          }),
        2: (entry) =>
          withString(entry, "typeMeta.kind", (text) => {
            envelope.kind = text
          })
      }),
    2: (field) => {
      if (field.wireType !== 2) return wrongWireType(field, "raw")
      envelope.raw = field.bytes
      return undefined
    },
    3: (field) =>
      withString(field, "contentEncoding", (text) => {
        envelope.contentEncoding = text
      }),
    4: (field) =>
      withString(field, "contentType", (text) => {
        envelope.contentType = text
      })
  })
  return failure ?? ok(envelope)
}

/** Why an envelope cannot carry a protobuf Namespace, or undefined when it can. */
const envelopeProblem = (envelope: Envelope): string | undefined => {
  if (envelope.apiVersion !== "" && envelope.apiVersion !== "v1") {
    return `expected apiVersion "v1", found "${envelope.apiVersion}"`
  }
  if (envelope.kind !== "" && envelope.kind !== "Namespace") {
    return `expected kind "Namespace", found "${envelope.kind}"`
  }
  if (envelope.contentEncoding !== "") return `unsupported content encoding "${envelope.contentEncoding}"`
  if (envelope.contentType !== "" && envelope.contentType !== protobufMediaType) {
    return `unsupported inner content type "${envelope.contentType}"`
  }
  return undefined
}

/**
 * Decodes a Kubernetes protobuf Namespace body (the "k8s\0" prefix, a runtime.Unknown envelope, and a core/v1
 * Namespace inside it) into the JSON object a client would have sent: apiVersion, kind, the metadata a creator
 * sets (name, generateName, labels, annotations, finalizers) and spec.finalizers. Every other field is skipped by
 * wire type. The envelope's TypeMeta, when set, must say v1 Namespace and its content encoding must be empty.
 * Truncated, malformed or non-UTF-8 input is an Err with a reason; this function never throws.
 */
export const decodeNamespace = (body: Uint8Array): DecodeResult<NamespaceObject> => {
  const prefixed = body.length >= magicPrefix.length && magicPrefix.every((byte, index) => body[index] === byte)
  if (!prefixed) return err(`not a Kubernetes protobuf body: it must start with the bytes "k8s\\0"`)
  if (body.length === magicPrefix.length) return err("empty protobuf body: nothing follows the \"k8s\\0\" prefix")
  const envelope = decodeEnvelope(body.subarray(magicPrefix.length))
  if (envelope._tag === "Err") return envelope
  const problem = envelopeProblem(envelope.value)
  if (problem !== undefined) return err(problem)
  const raw = envelope.value.raw
  return raw === undefined
    ? err("the protobuf envelope carries no object (field raw is absent)")
    : decodeNamespaceMessage(raw)
}
