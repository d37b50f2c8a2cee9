import * as MemoryStore from "../../src/store/MemoryStore.ts"
import { suite } from "./StoreContract.ts"

suite("MemoryStore", MemoryStore.layer)
