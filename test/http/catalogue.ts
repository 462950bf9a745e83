/**
 * The POS catalogue the composition root (src/bridge.ts) hands the HTTP layer, built the same way
 * from the adapters the bridge registers: for tests that build the route table or the document
 * without starting a bridge.
 */
import { adapters, posSettingDeclarations } from '../../adapters/index.js';
import { EXAMPLE_CHECKOUT } from '../../adapters/generic/example.js';
import { GenericCheckout, GenericRefund } from '../../adapters/generic/schema.js';
import { openApiDocument } from '../../src/http/openapi.js';
import { routeTable } from '../../src/http/table.js';
import type { PosCatalogue } from '../../src/pos/contract.js';

export const CATALOGUE: PosCatalogue = {
  names: [...adapters.keys()],
  webhookNames: [...adapters.values()].filter((a) => a.webhook).map((a) => a.name),
  listingNames: [...adapters.values()].filter((a) => a.backfill).map((a) => a.name),
  settingDeclarations: posSettingDeclarations,
  schemas: { checkout: GenericCheckout, refund: GenericRefund },
  examples: { checkout: EXAMPLE_CHECKOUT },
};

export const ROUTES = routeTable(CATALOGUE);

/** The document a bridge with every adapter serves. */
export const documentOf = (version: string) => openApiDocument(ROUTES, version);
