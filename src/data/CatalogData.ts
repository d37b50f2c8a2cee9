/**
 * Loads the offering catalog from the list prices kept in the repository
 * (scenarios/data/skypilot-gpu-prices/README.md). Building the catalog is pure (src/core/capacity/Catalog.ts); this
 * module only reads the two files, so the core never does I/O.
 */
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { buildCatalog } from "../core/capacity/Catalog.ts"
import type { Offering } from "../core/capacity/Offering.ts"

/** The repository's copy of the SkyPilot catalog files. */
export const catalogDataDir = fileURLToPath(new URL("../../scenarios/data/skypilot-gpu-prices/", import.meta.url))

export const lambdaCatalogFile = "lambda_vms_v7.csv"
export const awsCatalogFile = "aws_vms_v7_p_family.csv"

/** The catalog built from the Lambda and AWS files in `dir`. */
export const loadCatalog = (dir: string = catalogDataDir): ReadonlyArray<Offering> =>
  buildCatalog({
    lambda: readFileSync(join(dir, lambdaCatalogFile), "utf8"),
    aws: readFileSync(join(dir, awsCatalogFile), "utf8")
  })
