/**
 * Signing secrets and signatures of webhook deliveries (spec: Events, Delivery — the Standard Webhooks scheme):
 * a secret is `whsec_` + base64 of random bytes; a signature is `v1,` + base64(HMAC-SHA256(key, id.timestamp.body))
 * with the key the secret's base64-decoded bytes; during a rotation a delivery carries one signature per live secret,
 * separated by spaces, so a receiver holding either verifies it.
 */
import { createHmac, randomBytes } from "node:crypto"
import * as Limits from "../core/Limits.ts"

export const secretPrefix = "whsec_"

/** A new signing secret (Limits.webhookSecretBytes random bytes). */
export const newSecret = (): string => `${secretPrefix}${randomBytes(Limits.webhookSecretBytes).toString("base64")}`

/** The HMAC key of a secret: the bytes after the prefix, base64-decoded. */
const keyOf = (secret: string): Buffer => Buffer.from(secret.slice(secretPrefix.length), "base64")

/** One signature (`v1,<base64>`) of a delivery attempt under one secret. */
export const sign = (secret: string, id: string, timestampSeconds: number, body: string): string =>
  `v1,${createHmac("sha256", keyOf(secret)).update(`${id}.${timestampSeconds}.${body}`).digest("base64")}`

/** The webhook-signature header: a signature per live secret, newest first. */
export const signatureHeader = (
  secrets: ReadonlyArray<string>,
  id: string,
  timestampSeconds: number,
  body: string
): string => secrets.map((secret) => sign(secret, id, timestampSeconds, body)).join(" ")

/** A delivery's webhook-id: unique, kept across its retries; a replay gets a new one. */
export const newWebhookId = (): string => `msg_${randomBytes(16).toString("hex")}`
