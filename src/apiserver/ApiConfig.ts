/**
 * The settings every part of the API server reads: the API group of every nodus kind, the scheme it is served over
 * (error documentation links name it) and how often watches send bookmarks.
 */
import { Context, type Duration } from "effect"

export interface ApiSettings {
  readonly group: string
  readonly scheme: "http" | "https"
  readonly bookmarkInterval: Duration.Input
}

export class ApiConfig extends Context.Service<ApiConfig, ApiSettings>()("nodus/apiserver/ApiConfig") {}
