/**
 * The error documentation pages the Status body's `docs` field links to (spec: Errors): one page per registered code,
 * and an index, rendered from the same registry that fixes each code's HTTP status, so the docs cannot drift.
 */
import { errorCodeInfo, errorCodeList, httpReasonPhrase, isErrorCode } from "../core/meta/ErrorCodes.ts"

const escape = (text: string): string =>
  text.replace(
    /[&<>"']/gu,
    (character) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#39;" })[character]!
  )

/** Inline `code` spans of the registry's texts. */
const withCode = (text: string): string => escape(text).replace(/`([^`]+)`/gu, "<code>$1</code>")

const page = (title: string, body: string): string =>
  `<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>${escape(title)}</title>` +
  `<style>body{font-family:system-ui,sans-serif;max-width:46rem;margin:2rem auto;padding:0 1rem;line-height:1.5}` +
  `code{background:#f3f3f3;padding:0 .2em}dt{font-weight:600}</style></head><body>${body}</body></html>\n`

/** The page of one code, or undefined for a name that is not a registered code. */
export const codePage = (code: string): string | undefined => {
  if (!isErrorCode(code)) return undefined
  const info = errorCodeInfo(code)
  return page(
    `${code} — nodus API error`,
    [
      `<p><a href="/docs/errors">All error codes</a></p>`,
      `<h1>${code}</h1>`,
      `<p>${withCode(info.summary)}</p>`,
      `<dl>`,
      `<dt>HTTP status</dt><dd>${info.httpStatus} ${escape(httpReasonPhrase(info.httpStatus))}</dd>`,
      `<dt>What to do</dt><dd>${withCode(info.fix)}</dd>`,
      `<dt>Retry</dt><dd>${
        info.retryable
          ? "Retrying the same request later can succeed; honour <code>details.retryAfterSeconds</code> and reuse the Idempotency-Key."
          : "Retrying the same request will fail the same way; change the request first."
      }</dd>`,
      `<dt>Client library error</dt><dd><code>${info.clientError}</code></dd>`,
      `</dl>`
    ].join("\n")
  )
}

/** The index of every code with its status and summary. */
export const indexPage = (): string =>
  page(
    "nodus API error codes",
    [
      `<h1>Error codes</h1>`,
      `<p>Every error response is a Status object whose <code>reason</code> is one of these codes.</p>`,
      `<table><thead><tr><th>Code</th><th>HTTP</th><th>Meaning</th></tr></thead><tbody>`,
      ...errorCodeList.map((code) => {
        const info = errorCodeInfo(code)
        return `<tr><td><a href="/docs/errors/${code}">${code}</a></td><td>${info.httpStatus}</td><td>${
          withCode(info.summary)
        }</td></tr>`
      }),
      `</tbody></table>`
    ].join("\n")
  )
