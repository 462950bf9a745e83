/**
 * The end of every switch over a closed set of kinds or statuses: the compiler proves the case
 * cannot happen (its type is `never`), so adding a kind is a type error wherever it is not handled.
 */
export function unreachable(value: never): never {
  throw new Error(`unhandled case ${JSON.stringify(value)}`);
}
