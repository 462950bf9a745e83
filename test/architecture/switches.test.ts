/**
 * Every `switch` of src/, adapters/, simulator/ and model-check/ ends in a `default` the compiler holds to `never`
 * (`unreachable(x)` or `x satisfies never`): a status, kind, action or fate added to a union then
 * fails to compile at every place that decides by it, instead of falling through silently. The only
 * exceptions are switches over values from outside the bridge's own types (a POS's payload, an
 * express or zod error code), where a default that refuses or describes is the right ending: they
 * are listed below with why, and a listed one that no longer exists fails too, so the list stays true.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from '@jest/globals';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** `file:switch expression` → why its default is not `never`. */
const OUTSIDE_VALUES: Record<string, string> = {
  'adapters/loyverse/checkout.ts:tax.type': "a POS payload's tax type: any other value is refused naming the field",
  'src/http/error-handler.ts:e.type': "body-parser's error types: anything else is the generic 500",
  'simulator/pos-apis/clover.ts:op': 'an operator parsed from a request filter by a regular expression that admits only the cases listed',
  'src/kernel/validation.ts:issue.code': "zod's issue codes: a code zod adds later keeps zod's own message",
  'src/kernel/validation.ts:typeof input': 'typeof of any input value',
  'src/kernel/validation.ts:origin': "zod's size origins",
  'src/kernel/validation.ts:issue.format': "zod's string formats",
};

interface Switch {
  id: string;
  line: number;
  endsInNever: boolean;
}

function sources(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** Each switch statement of a source file, with whether its last clause is a default held to `never`. */
export function switchesOf(file: string, text: string): Switch[] {
  const found: Switch[] = [];
  const head = /\bswitch \(/g;
  for (let match = head.exec(text); match; match = head.exec(text)) {
    // The expression: up to the parenthesis that closes the one after `switch`.
    let i = match.index + match[0].length;
    for (let depth = 1; depth > 0 && i < text.length; i++) depth += text[i] === '(' ? 1 : text[i] === ')' ? -1 : 0;
    const expression = text.slice(match.index + match[0].length, i - 1).trim();
    // The body: from its brace to the one that closes it.
    const open = text.indexOf('{', i);
    let end = open + 1;
    for (let depth = 1; depth > 0 && end < text.length; end++) depth += text[end] === '{' ? 1 : text[end] === '}' ? -1 : 0;
    const body = text.slice(open, end);
    const lastDefault = body.lastIndexOf('default:');
    const tail = lastDefault >= 0 ? body.slice(lastDefault) : '';
    found.push({ id: `${file}:${expression}`, line: text.slice(0, match.index).split('\n').length, endsInNever: /\bunreachable\w*\(|satisfies never|: never\b/.test(tail) });
  }
  return found;
}

const all = ['src', 'adapters', 'simulator', 'model-check'].flatMap(sources).flatMap((file) => switchesOf(relative(ROOT, join(ROOT, file)), readFileSync(join(ROOT, file), 'utf8')));

describe('every switch ends in never', () => {
  it('reads switches (its own check: a switch without a never default is found, one with it passes)', () => {
    const text = "switch (a) {\n  case 'x':\n    return 1;\n}\nswitch (b.kind) {\n  case 'y': { if (z) { return 2; } break; }\n  default:\n    return unreachable(b.kind);\n}\n";
    expect(switchesOf('f.ts', text)).toEqual([
      { id: 'f.ts:a', line: 1, endsInNever: false },
      { id: 'f.ts:b.kind', line: 5, endsInNever: true },
    ]);
    expect(all.length).toBeGreaterThan(30);
  });

  it('holds every switch over the bridge’s own types to never', () => {
    const open = all.filter((s) => !s.endsInNever && !(s.id in OUTSIDE_VALUES)).map((s) => `${s.id} (line ${s.line})`);
    expect(open).toEqual([]);
  });

  it('lists as outside values only switches that exist and do not end in never', () => {
    const stale = Object.keys(OUTSIDE_VALUES).filter((id) => !all.some((s) => s.id === id && !s.endsInNever));
    expect(stale).toEqual([]);
  });
});
