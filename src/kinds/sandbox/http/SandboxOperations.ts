// The OpenAPI description of a Sandbox's commands and files (kinds/sandbox/http/SandboxApi.ts, docs/sandboxes.md),
// added to the v1 document beside the Sandbox kind's own paths. The command request's schema is the one admission
// decodes with (kinds/sandbox/SandboxCommandSchema.ts); the answers are described here. Pure.

import { Schema } from "effect"
import type { JsonObject } from "../../../core/Json.ts"
import * as Limits from "../../../core/Limits.ts"
import { toOpenApi30 } from "../../../http/openapi/OpenApi.ts"
import { json, operation as anOperation, pathParameter, queryParameter } from "../../../http/openapi/Operations.ts"
import { SandboxCommandRequest } from "../SandboxCommandSchema.ts"

const bytes: JsonObject = { "application/octet-stream": { schema: { type: "string", format: "binary" } } }
const text: JsonObject = { "text/plain": { schema: { type: "string" } } }

const query = queryParameter

const refusals =
  "A Sandbox that is starting answers 409 SandboxStarting (retry after details.retryAfterSeconds), a stopped one " +
  "409 SandboxNotRunning, a failed one 409 SandboxFailed."

const droppedDescription =
  `The bytes of its output (both streams, from its start) no longer kept: its box keeps the last ` +
  `${Limits.sandboxCommandOutputBytesMax} bytes of each command, ${Limits.sandboxBoxOutputBytesMax} of all its commands, and its host ` +
  `${Limits.sandboxHostOutputBytesMax} of all its boxes', the oldest bytes going first. Absent when nothing was dropped.`

const commandState: JsonObject = {
  type: "object",
  description: "A command of a Sandbox, as its box keeps it.",
  required: ["id", "command", "phase", "startTime"],
  properties: {
    id: { type: "string", description: "The command's id." },
    command: { type: "array", items: { type: "string" }, description: "Its argv." },
    phase: { type: "string", enum: ["Running", "Exited"], description: "Running, or Exited." },
    exitCode: { type: "integer", description: "Its exit code once it exited (none when a signal ended it)." },
    signal: { type: "string", description: "The signal that ended it, such as SIGKILL." },
    timedOut: { type: "boolean", description: "It was killed at its timeout." },
    startTime: { type: "string", format: "date-time", description: "When it started, by the host's clock." },
    durationMs: { type: "integer", description: "How long it ran, once it exited." },
    droppedBytes: { type: "integer", description: droppedDescription }
  }
}

const commandList: JsonObject = {
  type: "object",
  description:
    `The commands of a Sandbox its box remembers: every one running, and the ${Limits.sandboxCommandsKeptMax} most recent that exited, oldest first.`,
  required: ["items"],
  properties: { items: { type: "array", items: { $ref: "#/components/schemas/SandboxCommand" } } }
}

const commandResult: JsonObject = {
  type: "object",
  description: "A foreground command's result (200), or a background command's id (201: id and phase only).",
  required: ["id"],
  properties: {
    id: { type: "string", description: "The command's id, for .../commands/{id}." },
    phase: { type: "string", description: "A background command's phase when answered (Running)." },
    exitCode: { type: "integer", nullable: true, description: "Its exit code; null when a signal ended it." },
    signal: { type: "string", description: "The signal that ended it." },
    timedOut: { type: "boolean", description: "It was killed at its timeout." },
    stdout: {
      type: "string",
      description: `Its stdout (UTF-8): the last ${Limits.sandboxReplyOutputBytesMax} bytes of it.`
    },
    stderr: {
      type: "string",
      description: `Its stderr (UTF-8): the last ${Limits.sandboxReplyOutputBytesMax} bytes of it.`
    },
    truncated: {
      type: "boolean",
      description: "stdout or stderr is not whole: cut at its bound, or its start dropped (droppedBytes)."
    },
    droppedBytes: { type: "integer", description: droppedDescription },
    durationMs: { type: "integer", description: "How long it ran." }
  }
}

const fileList: JsonObject = {
  type: "object",
  description: "A directory of a Sandbox: its entries, by name.",
  required: ["path", "entries"],
  properties: {
    path: { type: "string", description: "The directory, as asked." },
    entries: {
      type: "array",
      description: "What the directory holds.",
      items: {
        type: "object",
        required: ["name", "size", "mode", "modTime", "type"],
        properties: {
          name: { type: "string", description: "The entry's name." },
          size: { type: "integer", description: "Its size in bytes." },
          mode: { type: "string", description: "Its permission bits, in octal (0644)." },
          modTime: { type: "string", format: "date-time", description: "When it was last modified." },
          type: { type: "string", enum: ["file", "directory", "symlink", "other"], description: "What it is." }
        }
      }
    }
  }
}

/** The components the Sandbox operations refer to. */
export const sandboxSchemas = (): JsonObject => ({
  SandboxCommandRequest: toOpenApi30(Schema.toJsonSchemaDocument(SandboxCommandRequest).schema) as JsonObject,
  SandboxCommandResult: commandResult,
  SandboxCommand: commandState,
  SandboxCommandList: commandList,
  SandboxFileList: fileList
})

/** A Sandbox operation: every one may meet the Sandbox starting or stopped. */
const operation = (operationId: string, action: string, description: string, fields: JsonObject): JsonObject =>
  anOperation(operationId, action, `${description} ${refusals}`, fields)

/** The path items of a Sandbox's commands and files, under the v1 root of `group`. */
export const sandboxPaths = (group: string): ReadonlyArray<readonly [string, JsonObject]> => {
  const sandbox = `/apis/${group}/v1/namespaces/{namespace}/sandboxes/{name}`
  const scope = [
    pathParameter("namespace", "The project (namespace) of the Sandbox."),
    pathParameter("name", "The name of the Sandbox.")
  ]
  const command = [...scope, pathParameter("id", "The command's id.")]
  const path = query(
    "path",
    "The file or directory: absolute, or relative to the Sandbox's workingDir; resolved inside the box."
  )
  return [
    [`${sandbox}/commands`, {
      parameters: scope,
      get: operation(
        "listSandboxCommands",
        "list",
        "List the commands the Sandbox's box remembers: those running, and the most recent that exited.",
        {
          responses: { "200": { description: "OK", content: json("SandboxCommandList") } }
        }
      ),
      post: operation(
        "runSandboxCommand",
        "post",
        "Run a command in the Sandbox's box, as its user, with its environment. A foreground command is killed when its " +
          "client disconnects before it exits; a background one (background: true) runs on. A body that is not JSON (or YAML) is 415 UnsupportedMediaType.",
        {
          requestBody: { required: true, content: json("SandboxCommandRequest") },
          responses: {
            "200": { description: "The foreground command exited", content: json("SandboxCommandResult") },
            "201": { description: "The background command started", content: json("SandboxCommandResult") }
          }
        }
      )
    }],
    [`${sandbox}/commands/{id}`, {
      parameters: command,
      get: operation("readSandboxCommand", "get", "Read a command's state.", {
        responses: { "200": { description: "OK", content: json("SandboxCommand") } }
      })
    }],
    [`${sandbox}/commands/{id}/log`, {
      parameters: command,
      get: operation(
        "readSandboxCommandLog",
        "get",
        "A command's output (stdout and stderr as they came), from its start, less what its box dropped " +
          "at its output bounds (the header Nodus-Output-Dropped-Bytes counts those bytes).",
        {
          parameters: [query("follow", "Keep the answer open until the command exits.", { type: "boolean" })],
          responses: {
            "200": {
              description: "OK",
              headers: {
                "Nodus-Output-Dropped-Bytes": {
                  description: "The bytes of its output dropped before the first byte of this answer.",
                  schema: { type: "integer" }
                }
              },
              content: text
            }
          }
        }
      )
    }],
    [`${sandbox}/commands/{id}/stdin`, {
      parameters: command,
      post: operation(
        "writeSandboxCommandStdin",
        "post",
        "Write the body's bytes to a background command's stdin; 429 StdinBackpressure while it has not read what came before.",
        {
          parameters: [query("close", "Close its stdin after these bytes.", { type: "boolean" })],
          requestBody: { required: false, content: bytes },
          responses: { "200": { description: "Written" } }
        }
      )
    }],
    [`${sandbox}/commands/{id}/kill`, {
      parameters: command,
      post: operation("killSandboxCommand", "post", "Send a signal to a command and everything it started.", {
        parameters: [query("signal", "SIGKILL (default), SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 or SIGUSR2.")],
        responses: { "200": { description: "Sent" } }
      })
    }],
    [`${sandbox}/terminal`, {
      parameters: scope,
      get: operation(
        "openSandboxTerminal",
        "connect",
        "An interactive terminal over a WebSocket (Upgrade: websocket): a shell on a pseudo-terminal in the box. " +
          "Binary frames from the client are its input; a text frame {\"resize\": {\"cols\": C, \"rows\": R}} resizes it; binary frames from the " +
          "server are its output, and a text frame {\"exit\": code} comes before the close when the shell exits. Only input is activity: a silent " +
          "open terminal is idle.",
        {
          parameters: [
            query("cols", "Columns, 1 to 1000 (default 80).", { type: "integer" }),
            query("rows", "Rows, 1 to 1000 (default 24).", { type: "integer" }),
            query("shell", "The shell, an absolute path (default bash, else sh).")
          ],
          responses: { "101": { description: "Switching Protocols: the WebSocket is open" } }
        }
      )
    }],
    [`${sandbox}/files`, {
      parameters: scope,
      get: operation(
        "readSandboxFile",
        "get",
        `A file's bytes (at most ${Limits.sandboxFileBytesMax} bytes; 413 FileTooLarge above), or a directory's entries; ` +
          "422 Invalid for what cannot be read as either (a device, /proc/self/mem).",
        {
          parameters: [path],
          responses: {
            "200": {
              description: "The file, or the directory's entries",
              content: { ...bytes, ...json("SandboxFileList") }
            }
          }
        }
      ),
      put: operation(
        "writeSandboxFile",
        "put",
        `Write the body as the file, making its parents (at most ${Limits.sandboxFileBytesMax} bytes; 413 FileTooLarge above).`,
        {
          parameters: [path],
          requestBody: { required: true, content: bytes },
          responses: { "200": { description: "Written" } }
        }
      ),
      delete: operation("deleteSandboxFile", "delete", "Delete a file, or a directory with everything in it.", {
        parameters: [path],
        responses: { "200": { description: "Deleted" } }
      })
    }]
  ]
}
