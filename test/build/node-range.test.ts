/**
 * The Node range the project states (package.json `engines`, the README) is what every installed
 * package accepts: a range that promised Node 23, which jest refuses, or 22.0, which a dependency
 * refuses, made `npm ci` warn EBADENGINE on a version the README called fine. Checked against the
 * lockfile with semver (npm's own range rules; here as jest's dependency).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import { expect, it } from '@jest/globals';

const require = createRequire(import.meta.url);
const semver = require('semver') as { satisfies(version: string, range: string): boolean; minVersion(range: string): { version: string } | null };

const ROOT = process.cwd();
const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { engines: { node: string } };
const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { engines?: { node?: string } | string[] }> };

it('every package in the lockfile accepts the oldest Node of each line the project states, and the README states the same', () => {
  const stated = manifest.engines.node;
  expect(lock.packages['']!.engines).toEqual({ node: stated });
  // The oldest version of each part of the range (22.12.0, 24.0.0): the versions a user is most likely to be refused on.
  const oldest = stated.split('||').map((part) => semver.minVersion(part.trim())!.version);
  const refusing = Object.entries(lock.packages).flatMap(([path, entry]) => {
    const range = !Array.isArray(entry.engines) ? entry.engines?.node : undefined;
    if (!path || !range) return [];
    return oldest.filter((version) => !semver.satisfies(version, range)).map((version) => `${path} (${range}) refuses Node ${version}`);
  });
  expect(refusing).toEqual([]);
  // Node 23, which jest refuses, is outside the stated range.
  expect(semver.satisfies('23.0.0', stated)).toBe(false);
  expect(readFileSync(join(ROOT, 'README.md'), 'utf8')).toContain('Node 22.12 or later in the 22 line, or Node 24 or later, installs without a warning');
});
