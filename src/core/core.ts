/**
 * The core, split by who calls it: intake (POS checkouts and refunds), delivery (answers within
 * the budget, the worker, reconcile), recovery (start-up), operator actions (admin API). They share
 * one record writer, so every change goes through the same compare-and-set and conflict rule.
 */
import type { LedgerStore } from '../ledger/store.js';
import type { Logger } from '../kernel/logger.js';
import type { Metrics } from './metrics.js';
import { DeliveryService, type DeliveryOptions, type UpstreamDirectory } from './delivery.js';
import { IntakeService } from './intake.js';
import { OperatorActions } from './operator.js';
import { RecordWriter } from './record-writer.js';
import { RecoveryService } from './recovery.js';

export interface Core {
  intake: IntakeService;
  delivery: DeliveryService;
  recovery: RecoveryService;
  operator: OperatorActions;
}

export interface CoreDeps {
  store: LedgerStore;
  /** Each merchant's calls and history (the merchant registry). */
  upstreams: UpstreamDirectory;
  options: DeliveryOptions;
  logger: Logger;
  metrics: Metrics;
  clock?: () => Date;
}

export function createCore(deps: CoreDeps): Core {
  const writer = new RecordWriter(deps.store, deps.logger, deps.clock ?? (() => new Date()), () => deps.metrics.ledgerLastWrite.setToCurrentTime());
  const delivery = new DeliveryService(writer, deps.upstreams, deps.options, deps.logger, deps.metrics);
  const intake = new IntakeService(writer, delivery, deps.options, deps.logger, deps.metrics);
  return { intake, delivery, recovery: new RecoveryService(writer, delivery, deps.options), operator: new OperatorActions(writer, delivery, intake) };
}
