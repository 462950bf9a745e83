/**
 * Every route the bridge serves, in the order the router mounts them and the document lists them:
 * the POS's, the register's, the operators' (records, operators, dead letters, reports, backfill, merchants), then
 * operations. What depends on the POSes the bridge registers (their names, the generic payload, the
 * POS accounts a merchant may hold) comes from the catalogue the composition root hands over.
 */
import type { PosCatalogue } from '../pos/contract.js';
import type { Route } from './route.js';
import { adminRoutes } from './routes/admin.js';
import { backfillRoutes } from './routes/backfill.js';
import { merchantRoutes } from './routes/merchants.js';
import { opsRoutes } from './routes/ops.js';
import { posRoutes } from './routes/pos.js';
import { registerRoutes } from './routes/register.js';
import { reportRoutes } from './routes/reports.js';

export function routeTable(catalogue: PosCatalogue): readonly Route[] {
  return [...posRoutes(catalogue), ...registerRoutes, ...adminRoutes, ...reportRoutes, ...backfillRoutes(catalogue), ...merchantRoutes(catalogue), ...opsRoutes];
}
