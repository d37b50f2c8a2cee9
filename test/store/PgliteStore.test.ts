import * as SqlStore from "../../src/store/SqlStore.ts"
import { suite } from "./StoreContract.ts"

suite("SqlStore on PGlite", SqlStore.layerPglite(undefined))
