/**
 * The reconcile core (core/controller/Reconcile.ts): a step's actions are carried out in order and a Delete ends them,
 * synchronously and through effects alike; and the generic reconcile code — the core, the server runtime's
 * reconciler and the headless simulator's loop — names no kind: a kind is an entry of a registry.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import type { Action, LaunchAction } from "../../../src/core/controller/Controller.ts"
import { deletes, interpret, interpretEffect } from "../../../src/core/controller/Reconcile.ts"
import { kinds } from "../../../src/kinds/Kinds.ts"

const root = join(import.meta.dirname, "..", "..", "..")

const launch = { _tag: "Launch", attempt: "a-1" } as unknown as LaunchAction
const actions: ReadonlyArray<Action> = [
  launch,
  { _tag: "Checkpoint", attempt: "a-1", episode: 2 },
  { _tag: "Stop", attempt: "a-1", keepWarmMs: 5 },
  { _tag: "Delete" },
  { _tag: "Stop", attempt: "a-2", keepWarmMs: 0 }
]

describe("interpret", () => {
  it("carries out the actions in order, and nothing after a Delete", () => {
    const done: Array<string> = []
    const finished = interpret(actions, {
      launch: (subject, action) => done.push(`${subject} launch ${action.attempt}`),
      checkpoint: (subject, attempt, episode) => done.push(`${subject} checkpoint ${attempt} ${episode}`),
      stop: (subject, attempt, keepWarmMs) => done.push(`${subject} stop ${attempt} ${keepWarmMs}`),
      delete: (subject) => done.push(`${subject} delete`)
    }, "x")
    assert.isFalse(finished)
    assert.deepStrictEqual(done, ["x launch a-1", "x checkpoint a-1 2", "x stop a-1 5", "x delete"])
    assert.isTrue(deletes(actions))
    assert.isFalse(deletes(actions.slice(0, 3)))
    assert.isTrue(interpret(actions.slice(0, 3), {
      launch: () => {},
      checkpoint: () => {},
      stop: () => {},
      delete: () => assert.fail("no Delete")
    }, "x"))
  })

  it.effect("through effects, in the same order", () =>
    Effect.gen(function*() {
      const done: Array<string> = []
      const note = (line: string) => Effect.sync(() => void done.push(line))
      const finished = yield* interpretEffect(actions, {
        launch: (subject, action) => note(`${subject} launch ${action.attempt}`),
        checkpoint: (subject, attempt, episode) => note(`${subject} checkpoint ${attempt} ${episode}`),
        stop: (subject, attempt, keepWarmMs) => note(`${subject} stop ${attempt} ${keepWarmMs}`),
        delete: (subject) => note(`${subject} delete`)
      }, "x")
      assert.isFalse(finished)
      assert.deepStrictEqual(done, ["x launch a-1", "x checkpoint a-1 2", "x stop a-1 5", "x delete"])
    }))
})

/** The generic reconcile code: the one core, and the drivers' loops over it. */
const genericFiles = [
  "src/core/controller/Reconcile.ts",
  "src/core/controller/BilledStep.ts",
  "src/runtime/Reconciler.ts",
  "src/backends/sim/Simulation.ts",
  "src/backends/sim/SimObject.ts"
]

/**
 * Every served kind but those the reconcile of every kind is made of, which the generic code names: an Attempt is a
 * run of any kind, an Event its record, an Offering what placement ranks for it, a Budget what holds its money back.
 */
const kindNames = kinds.map((info) => info.kind).filter((kind) =>
  !["Attempt", "Event", "Offering", "Budget"].includes(kind)
)

/** A kind's name as a word, or at the head of a name (`jobMachine`, `SandboxSpec`), or a module of its own. */
const namesOf = (code: string): ReadonlyArray<string> =>
  kindNames.filter((kind) => {
    const lower = kind[0]!.toLowerCase() + kind.slice(1)
    return new RegExp(`\\b${kind}(\\b|[A-Z])|\\b${lower}[A-Z]|kinds/${lower}/`, "u").test(code)
  })

/** The code of a file without its comments (a comment may say which kinds an entry serves). */
const codeOf = (text: string): string => text.replace(/\/\*[\s\S]*?\*\//gu, "").replace(/\/\/.*$/gmu, "")

describe("the generic reconcile code", () => {
  it("knows the kinds it must not name", () => {
    assert.includeMembers(kindNames, ["Job", "Sandbox", "Function", "FunctionCall"])
  })

  for (const file of genericFiles) {
    it(`${file} names no kind`, () => {
      const code = codeOf(readFileSync(join(root, file), "utf8"))
      const named = namesOf(code)
      assert.deepStrictEqual(named, [], `${file} names ${named.join(", ")}`)
    })
  }

  it("fails on a file that names one", () => {
    assert.deepStrictEqual(namesOf(codeOf(`// a Job here is fine\nconst x = machines["Sandbox"]\n`)), ["Sandbox"])
    assert.deepStrictEqual(namesOf(`import { jobMachine } from "x"`), ["Job"])
    assert.deepStrictEqual(namesOf(`import { step } from "../core/kinds/function/FunctionMachine.ts"`), ["Function"])
  })
})
