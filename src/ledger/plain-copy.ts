/**
 * A deep copy of plain data (objects, arrays, strings, numbers, booleans, null), by hand: about ten
 * times faster than structuredClone on a ledger record, whose copies in and out of the memory store
 * were a third of the model check's time. Anything else met on the way (a Date, a Map, a class
 * instance) is left to structuredClone. Unlike structuredClone it does not keep two references to
 * one object as one, nor cycles: plain data stored or snapshotted shares no object.
 */
export function copyPlain<T>(value: T): T {
  return copyValue(value) as T;
}

function copyValue(value: unknown): unknown {
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) return value.map(copyValue);
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return structuredClone(value);
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value)) out[key] = copyValue((value as Record<string, unknown>)[key]);
  return out;
}
